"""The client against a real turnstile serve over a real redis-server:
mutual exclusion, fencing tokens, kinds, status."""

from __future__ import annotations

import os
import tempfile
import time

from tests import support
from tests.support import turnstile


class CounterTest(support.ServiceCase):
    def test_four_processes_count_exactly(self) -> None:
        """4 processes x 200 sections under one lock: the count is exact and
        the tokens strictly increase in the order of the sections."""
        procs, n = 4, 200
        key = support.key("counter")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "counter")
            open(path, "w").close()
            logs = [os.path.join(d, "log%d" % i) for i in range(procs)]
            started = time.monotonic()
            ws = [self.worker("counter", support.env("TURNSTILE_TEST_URL"), key, path, str(n), log) for log in logs]
            for w in ws:
                self.assertEqual(w.wait(300), 0, "a counter worker failed")
            took = time.monotonic() - started
            with open(path) as f:
                self.assertEqual(int(f.read()), procs * n)
            sections = []
            for log in logs:
                with open(log) as f:
                    sections += [tuple(int(x) for x in line.split()) for line in f]
        sections.sort()
        self.assertEqual([v for v, _ in sections], list(range(procs * n)), "a section read a value twice")
        tokens = [t for _, t in sections]
        for i in range(1, len(tokens)):
            self.assertGreater(tokens[i], tokens[i - 1], "section %d's token is not above section %d's" % (i, i - 1))
        print("\n  %d sections in %.1f s (%.1f ms each, process start included)" % (procs * n, took, took * 1000 / (procs * n)))


class LockTest(support.ServiceCase):
    def test_lease_basics(self) -> None:
        key = support.key("basics")
        with self.c.lock(key, ttl=10, wait=30) as lease:
            self.assertIsInstance(lease.token, int)
            self.assertGreater(lease.token, 0)
            self.assertTrue(lease.held)
            self.assertFalse(lease.lost.is_set())
            self.assertGreater(lease.validity, 5)
            st = self.c.status(key)
            self.assertTrue(st.held)
            self.assertEqual([h.token for h in st.holders], [lease.token])
            self.assertIn(key, [s.key for s in self.c.ls(key)])
            with self.assertRaises(turnstile.NotAcquired):
                self.c.try_lock(key, ttl=5)
            with self.assertRaises(turnstile.NotAcquired):
                self.c.lock(key, ttl=5, wait=0.3)
        self.assertFalse(lease.held)
        self.assertFalse(lease.lost.is_set())
        # Released when the stream closed: free again at once.
        with self.c.try_lock(key, ttl=5) as again:
            self.assertGreater(again.token, lease.token)

    def test_renewed_past_its_ttl(self) -> None:
        key = support.key("renewed")
        with self.c.lock(key, ttl=1, wait=10) as lease:
            time.sleep(2.5)
            self.assertTrue(lease.held)
            self.assertFalse(lease.lost.is_set())
            self.assertEqual([h.token for h in self.c.status(key).holders], [lease.token])

    def test_try_lock(self) -> None:
        key = support.key("try")
        lease = self.c.try_lock(key, ttl=2)
        try:
            time.sleep(2.5)  # past its TTL: renewed by the service
            self.assertTrue(lease.held)
            self.assertEqual([h.token for h in self.c.status(key).holders], [lease.token])
        finally:
            lease.release()
        self.assertFalse(self.c.status(key).held)

    def test_wait_for_release(self) -> None:
        key = support.key("wait")
        first = self.c.lock(key, ttl=10, wait=10)
        got = []
        import threading

        def second() -> None:
            with self.c.lock(key, ttl=10, wait=30) as lease:
                got.append(lease.token)

        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        self.assertEqual(got, [])
        first.release()
        t.join(30)
        self.assertEqual(len(got), 1)
        self.assertGreater(got[0], first.token)

    def test_kinds(self) -> None:
        kinds = self.c.info().kinds
        self.assertIn("shared", kinds)
        self.assertIn("semaphore", kinds)
        key = support.key("rw")
        with self.c.lock(key, ttl=5, wait=5, kind="shared"), self.c.try_lock(key, ttl=5, kind="shared"):
            with self.assertRaises(turnstile.NotAcquired):
                self.c.try_lock(key, ttl=5, kind="exclusive")
        with self.c.try_lock(key, ttl=5, kind="exclusive"):
            with self.assertRaises(turnstile.NotAcquired):
                self.c.try_lock(key, ttl=5, kind="shared")
        key = support.key("sem")
        with self.c.lock(key, ttl=5, wait=5, kind="semaphore", permits=2) as a, \
                self.c.lock(key, ttl=5, wait=5, kind="semaphore", permits=2) as b:
            self.assertNotEqual(a.token, b.token)
            with self.assertRaises(turnstile.NotAcquired):
                self.c.try_lock(key, ttl=5, kind="semaphore", permits=2)
            self.assertEqual(len(self.c.status(key, kind="semaphore", permits=2).holders), 2)

    def test_bad_input_is_refused_at_once(self) -> None:
        with self.assertRaises(ValueError):
            self.c.lock("", ttl=5)
        with self.assertRaises(ValueError):
            self.c.lock("k", ttl=-1)
        with self.assertRaises(ValueError):
            self.c.lock("k", kind="nope")
        with self.assertRaises(ValueError):
            self.c.lock("k", kind="semaphore")
        with self.assertRaises(turnstile.InvalidArgument):
            self.c.lock(support.key("ttl"), ttl=0.01, wait=1)  # below the service's 200ms
