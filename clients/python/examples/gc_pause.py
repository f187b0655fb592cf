"""The GC-pause incident, replayed with turnstile's Python client.

Worker 1 holds the lock on order:42 and is paused (SIGSTOP, as a
stop-the-world GC pause or a stalled VM would pause it) just before a write.
The service renews a held lease for as long as its stream is open, so a
paused process keeps its lock while its connection and the instance serving
it live; its lease runs out during the pause when that renewal stops as
well. Here the instance renewing worker 1's lease dies during the pause (as
in a crash or a partition), the lease runs out within its TTL, and worker 2
takes the lock with a greater fencing token and writes. Worker 1 wakes up
and writes with its old token: the storage checks fencing tokens and
refuses the late write.

The storage is examples/fenced-register: turnstile's fence package
(fence.Memory) behind a small HTTP endpoint.

    python3 clients/python/examples/gc_pause.py --turnstile ./turnstile \\
        --fenced-register ./fenced-register --redis redis://127.0.0.1:6379

It starts two instances of "turnstile serve" over that Redis and the
fenced register, on free loopback ports, and stops them when it is done.
Exit status 0 when the late write was refused.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import List, Tuple
from urllib.parse import urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
import turnstile  # noqa: E402

KEY = "order:42"
TTL = 2.0


def write(register: str, token: int, value: str) -> Tuple[int, dict]:
    """A write of the register's resource KEY with a fencing token."""
    u = urlsplit(register)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("POST", "/write", body=json.dumps({"resource": KEY, "token": token, "value": value}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def read(register: str) -> dict:
    u = urlsplit(register)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", "/read?resource=" + KEY)
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def worker1(services: str, register: str) -> None:
    """Worker 1, a process of its own: takes the lock, writes, says so, and
    writes again when told (after its pause)."""
    client = turnstile.Client(services.split(","))
    try:
        with client.lock(KEY, ttl=TTL, wait=10) as lease:
            status, _ = write(register, lease.token, "paid (worker 1)")
            print("held %d %d" % (lease.token, status), flush=True)
            sys.stdin.readline()  # the pause lands here, just before the write
            status, body = write(register, lease.token, "shipped (worker 1, late)")
            print("wrote %d %s" % (status, body.get("error", "ok")), flush=True)
    except turnstile.LeaseLost as e:
        print("lost %s" % e, flush=True)


def start(args: List[str], pattern: str, what: str) -> Tuple[subprocess.Popen, str]:
    """A server process and the URL it says it serves at."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found: List[str] = []
    ready = threading.Event()

    def scan() -> None:
        for line in p.stdout:
            m = re.search(pattern, line)
            if m and not found:
                found.append(m.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=scan, daemon=True).start()
    if not ready.wait(30) or not found:
        p.kill()
        sys.exit("gc_pause: %s did not start" % what)
    return p, found[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turnstile", default="turnstile", help="the turnstile binary")
    ap.add_argument("--fenced-register", default="fenced-register", help="examples/fenced-register, built")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379", help="the Redis the instances share")
    ap.add_argument("worker", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker1(*a.worker)
        return 0

    procs: List[subprocess.Popen] = []
    try:
        urls = []
        for _ in range(2):
            p, url = start([a.turnstile, "serve", "--backend", a.redis, "--listen", "127.0.0.1:0"],
                           r" on (http://127\.0\.0\.1:\d+)", "turnstile serve")
            procs.append(p)
            urls.append(url)
        p, register = start([a.fenced_register, "--listen", "127.0.0.1:0"], r"listening on (http://\S+)",
                            "fenced-register")
        procs.append(p)
        print("two instances of turnstile serve over %s; the fenced register at %s" % (a.redis, register))
        return incident(procs[0], urls, register)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
            p.wait(10)


def incident(instance1: subprocess.Popen, urls: List[str], register: str) -> int:
    # Worker 1 calls instance 1 first, instance 2 if it cannot.
    w1 = subprocess.Popen([sys.executable, os.path.abspath(__file__), ",".join(urls), register],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = w1.stdout.readline().split()
        if not line or line[0] != "held":
            print("worker 1 did not take the lock: %s" % " ".join(line))
            return 1
        token1 = int(line[1])
        print("worker 1: holds %s with fencing token %d; its write: HTTP %s" % (KEY, token1, line[2]))

        w1.send_signal(signal.SIGSTOP)
        paused = time.monotonic()
        print("worker 1: paused (SIGSTOP), as a stop-the-world GC pause would pause it, before its next write")
        instance1.kill()
        instance1.wait()
        print("instance 1, which renews worker 1's lease, dies: the lease runs out within its %g s TTL" % TTL)

        with turnstile.Client(urls[1]).lock(KEY, ttl=TTL, wait=15) as lease:
            status, _ = write(register, lease.token, "refunded (worker 2)")
            print("worker 2: holds %s with fencing token %d, %.1f s into the pause; its write: HTTP %d"
                  % (KEY, lease.token, time.monotonic() - paused, status))
            token2 = lease.token

        w1.stdin.write("go\n")
        w1.stdin.flush()
        w1.send_signal(signal.SIGCONT)
        print("worker 1: resumed (SIGCONT) after %.1f s; it writes with token %d" % (time.monotonic() - paused, token1))
        refused = False
        for out in w1.stdout:
            word, _, rest = out.strip().partition(" ")
            if word == "wrote":
                status, _, why = rest.partition(" ")
                refused = status == "409"
                print("worker 1: its late write: HTTP %s, %s" % (status, why))
            elif word == "lost":
                print("worker 1: leaving its with block: LeaseLost: %s" % rest)
        w1.wait(30)
    finally:
        if w1.poll() is None:
            w1.kill()
            w1.wait()
    final = read(register)
    print("the register holds %r, written with token %s" % (final.get("value"), final.get("token")))
    if refused and final.get("token") == token2:
        print("the late write was refused: the fencing token kept worker 2's write")
        return 0
    print("FAILED: the late write was not refused")
    return 1


if __name__ == "__main__":
    sys.exit(main())
