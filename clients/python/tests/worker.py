"""Worker processes of the service tests (support.worker starts them).

    worker.py counter URL KEY COUNTER_FILE N LOG   N sections, each adding 1 to COUNTER_FILE
    worker.py hold URL KEY TTL                     hold KEY, say "held TOKEN", then sleep
    worker.py campaign URL NAME VALUE DIR          lead once, then resign

The bearer token comes from TURNSTILE_TEST_ADMIN, never from the arguments.
"""

from __future__ import annotations

import os
import sys
import time

import turnstile


def client(url: str) -> turnstile.Client:
    return turnstile.Client(url, token=os.environ["TURNSTILE_TEST_ADMIN"])


def counter(url: str, key: str, path: str, n: str, log_path: str) -> None:
    c = client(url)
    with open(log_path, "a") as log:
        for _ in range(int(n)):
            with c.lock(key, ttl=10, wait=120) as lease:
                with open(path) as f:
                    value = int(f.read() or "0")
                with open(path, "w") as f:
                    f.write(str(value + 1))
                # The section's place (the value it read) and its token.
                log.write("%d %d\n" % (value, lease.token))
                log.flush()


def hold(url: str, key: str, ttl: str) -> None:
    lease = client(url).lock(key, ttl=float(ttl), wait=30)
    print("held", lease.token, flush=True)
    while True:
        time.sleep(60)


def campaign(url: str, name: str, value: str, directory: str) -> None:
    c = client(url)
    e = c.election(name)
    with e.campaign(value=value, ttl=5, wait=120) as lead:
        marker = os.path.join(directory, "leader")
        # O_EXCL: a second leader at the same time finds the marker there.
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.write(fd, value.encode())
        os.close(fd)
        with open(os.path.join(directory, "terms"), "a") as f:
            f.write("%d\n" % lead.term)  # in the order of the terms, the marker being ours
        now = e.leader()
        print("leader %s term %d sees %s term %d" % (value, lead.term, now.value, now.term), flush=True)
        time.sleep(0.3)
        os.remove(marker)
        lead.check()


if __name__ == "__main__":
    {"counter": counter, "hold": hold, "campaign": campaign}[sys.argv[1]](*sys.argv[2:])
