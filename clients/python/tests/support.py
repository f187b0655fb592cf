"""What the service tests share: the servers clients/test.sh started, extra
instances of the service, worker processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest
from typing import List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
sys.path.insert(0, SRC)

import turnstile  # noqa: E402

NAMES = ("TURNSTILE_BIN", "TURNSTILE_TEST_REDIS", "TURNSTILE_TEST_URL", "TURNSTILE_TEST_TLS_URL", "TURNSTILE_TEST_CA",
         "TURNSTILE_TEST_ADMIN", "TURNSTILE_TEST_LIMITED", "TURNSTILE_TEST_TOKENS_FILE")


def env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        # Not a skip: a suite that cannot reach its servers has failed.
        raise RuntimeError("%s is not set: run clients/test.sh, which starts redis-server and turnstile serve" % name)
    return v


def client(**kw) -> turnstile.Client:
    kw.setdefault("token", env("TURNSTILE_TEST_ADMIN"))
    return turnstile.Client(env("TURNSTILE_TEST_URL"), **kw)


_seq = [0]


def key(name: str) -> str:
    """A key no other test or run uses."""
    _seq[0] += 1
    return "py:%s:%d:%d:%d" % (name, os.getpid(), int(time.time() * 1000) % 10 ** 8, _seq[0])


class Instance:
    """An extra "turnstile serve" over the test Redis, for tests that stop it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [env("TURNSTILE_BIN"), "serve", "--backend", env("TURNSTILE_TEST_REDIS"), "--listen", "127.0.0.1:0",
             "--tokens", env("TURNSTILE_TEST_TOKENS_FILE"), "--drain-timeout", "2s"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log: List[str] = []
        found = threading.Event()
        self.url = ""

        def read() -> None:
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r" on (http://127\.0\.0\.1:\d+)", line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(20) or not self.url:
            self.stop(signal.SIGKILL)
            raise RuntimeError("turnstile serve did not start: %s" % "".join(self.log))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)
        self.proc.stderr.close() if self.proc.stderr else None


def worker(*args: str, stdin: Optional[int] = None) -> subprocess.Popen:
    """tests/worker.py with args, its stdout a pipe of lines."""
    e = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "worker.py")] + list(args), env=e,
                            stdout=subprocess.PIPE, stdin=stdin, text=True)


def read_line(p: subprocess.Popen, timeout: float = 60) -> str:
    """The worker's next line, or a failure when it says nothing in time."""
    out: List[str] = []
    t = threading.Thread(target=lambda: out.append(p.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not out or not out[0]:
        p.kill()
        raise AssertionError("worker %s said nothing within %ss (exit %s)" % (p.args[2:], timeout, p.poll()))
    return out[0].strip()


class ServiceCase(unittest.TestCase):
    def setUp(self) -> None:
        for n in NAMES:
            env(n)
        self.c = client()

    def worker(self, *args: str) -> subprocess.Popen:
        """worker(*args), killed (if it still runs) when the test ends."""
        p = worker(*args)

        def end() -> None:
            if p.poll() is None:
                p.kill()
            p.wait(30)
            p.stdout.close()

        self.addCleanup(end)
        return p
