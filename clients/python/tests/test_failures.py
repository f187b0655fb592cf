"""What the client does when things go wrong: a dead holder, a forced
release, a wrong token, an unreachable or draining service."""

from __future__ import annotations

import signal
import socket
import threading
import time

from tests import support
from tests.support import turnstile


class DeadHolderTest(support.ServiceCase):
    def test_sigkilled_holder_frees_the_lock_within_its_ttl(self) -> None:
        key, ttl = support.key("killed"), 5.0
        w = self.worker("hold", support.env("TURNSTILE_TEST_URL"), key, str(ttl))
        held = int(support.read_line(w).split()[1])
        w.send_signal(signal.SIGKILL)
        w.wait(10)
        started = time.monotonic()
        with self.c.lock(key, ttl=ttl, wait=2 * ttl) as lease:
            took = time.monotonic() - started
            self.assertGreater(lease.token, held)
        # Its kernel closed the connection: the service released the lock at
        # once rather than at the TTL.
        self.assertLess(took, ttl, "the next holder waited %.2f s, more than the TTL" % took)

    def test_force_release_is_told_within_a_second(self) -> None:
        # A 10 s TTL: the lease's next renewal is 3.3 s away, so only the
        # service's word on the forced release can tell it within 1 s.
        key = support.key("forced")
        lease = self.c.lock(key, ttl=10, wait=10)
        told = threading.Event()
        lease.on_lost(lambda l: told.set())
        started = time.monotonic()
        removed = self.c.force_release(key)
        self.assertTrue(removed.held)
        self.assertTrue(lease.lost.wait(5), "lease.lost not set after a forced release")
        took = time.monotonic() - started
        self.assertLess(took, 1.0, "lease.lost was set %.2f s after the forced release" % took)
        self.assertTrue(told.wait(5), "the on_lost callback was not called")
        self.assertFalse(lease.held)
        self.assertIsInstance(lease.lost_error, turnstile.LeaseLost)
        with self.assertRaises(turnstile.LeaseLost):
            lease.release()
        with self.c.try_lock(key, ttl=5) as nxt:
            self.assertGreater(nxt.token, removed.token)

    def test_release_finds_a_loss_not_yet_told(self) -> None:
        """Removed through another instance, the lease is told only at its
        next renewal; release() asks the store and raises LeaseLost."""
        extra = support.Instance()
        try:
            key = support.key("untold")
            lease = self.c.lock(key, ttl=30, wait=10)
            admin = turnstile.Client(extra.url, token=support.env("TURNSTILE_TEST_ADMIN"))
            self.assertTrue(admin.force_release(key).held)
            with self.assertRaises(turnstile.LeaseLost):
                lease.release()
            self.assertTrue(lease.lost.is_set())
        finally:
            extra.stop()

    def test_lost_in_a_with_block_raises_at_its_end(self) -> None:
        key = support.key("lostwith")
        with self.assertRaises(turnstile.LeaseLost):
            with self.c.lock(key, ttl=1.2, wait=10) as lease:
                self.c.force_release(key)
                self.assertTrue(lease.lost.wait(5))


class TokenTest(support.ServiceCase):
    def test_wrong_bearer_token(self) -> None:
        name, _, secret = support.env("TURNSTILE_TEST_ADMIN").partition(".")
        wrong = name + "." + secret[::-1]
        c = turnstile.Client(support.env("TURNSTILE_TEST_URL"), token=wrong)
        self.assertNotIn(secret[::-1], repr(c))
        for call in (lambda: c.lock(support.key("auth"), ttl=5, wait=5), lambda: c.try_lock("k"),
                     lambda: c.status("k"), lambda: c.election("e").campaign(wait=1)):
            with self.assertRaises(turnstile.PermissionDenied) as cm:
                call()
            self.assertIsInstance(cm.exception, turnstile.Unauthenticated)
            self.assertEqual(cm.exception.reason, "NO_TOKEN")
            for text in (str(cm.exception), repr(cm.exception)):
                self.assertNotIn(secret, text)
                self.assertNotIn(secret[::-1], text)

    def test_key_outside_the_tokens_prefixes(self) -> None:
        limited = support.env("TURNSTILE_TEST_LIMITED")
        c = turnstile.Client(support.env("TURNSTILE_TEST_URL"), token=limited)
        with self.assertRaises(turnstile.PermissionDenied) as cm:
            c.lock(support.key("prefix"), ttl=5, wait=5)
        self.assertEqual(cm.exception.reason, "KEY_NOT_ALLOWED")
        self.assertNotIn(limited.partition(".")[2], str(cm.exception))
        with self.assertRaises(turnstile.PermissionDenied) as cm:
            c.force_release("other:x")
        self.assertEqual(cm.exception.reason, "ROLE_NOT_ALLOWED")
        with c.lock("other:" + support.key("allowed"), ttl=5, wait=5) as lease:
            self.assertGreater(lease.token, 0)


def _dead_address() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return "http://127.0.0.1:%d" % port


class UnreachableTest(support.ServiceCase):
    def test_unavailable_within_the_wait(self) -> None:
        c = turnstile.Client(_dead_address(), token=support.env("TURNSTILE_TEST_ADMIN"))
        started = time.monotonic()
        with self.assertRaises(turnstile.Unavailable) as cm:
            c.lock(support.key("down"), ttl=5, wait=1.5)
        took = time.monotonic() - started
        self.assertLess(took, 1.5 + 1.0)
        self.assertIn("could not be reached", str(cm.exception))
        self.assertEqual(str(cm.exception).count("127.0.0.1"), 1, "each address once: %s" % cm.exception)
        self.assertNotIn(support.env("TURNSTILE_TEST_ADMIN").partition(".")[2], str(cm.exception))
        with self.assertRaises(turnstile.Unavailable):
            c.status("k")

    def test_fails_over_to_a_live_instance(self) -> None:
        c = turnstile.Client([_dead_address(), support.env("TURNSTILE_TEST_URL")],
                             token=support.env("TURNSTILE_TEST_ADMIN"))
        with c.lock(support.key("failover"), ttl=5, wait=5) as lease:
            self.assertGreater(lease.token, 0)
        self.assertTrue(c.info().store.startswith("redis"))


class HandoverTest(support.ServiceCase):
    """A lease moves to another instance when its own drains or dies."""

    def _held_through_extra(self, sig: int) -> None:
        extra = support.Instance()
        try:
            c = turnstile.Client([extra.url, support.env("TURNSTILE_TEST_URL")],
                                 token=support.env("TURNSTILE_TEST_ADMIN"))
            key = support.key("handover")
            with c.lock(key, ttl=3, wait=10) as lease:
                first = lease.token
                extra.stop(sig)
                # Resumed on the other instance, with a new token, the lock
                # held all along.
                deadline = time.monotonic() + 10
                while lease.token == first and time.monotonic() < deadline and not lease.lost.is_set():
                    time.sleep(0.02)
                self.assertFalse(lease.lost.is_set(), lease.lost_error)
                self.assertGreater(lease.token, first)
                time.sleep(3.5)  # past the TTL: renewed by the other instance
                self.assertTrue(lease.held)
                self.assertEqual([h.token for h in self.c.status(key).holders], [lease.token])
            self.assertFalse(self.c.status(key).held)
        finally:
            extra.stop(signal.SIGKILL)

    def test_drained_instance(self) -> None:
        self._held_through_extra(signal.SIGTERM)

    def test_killed_instance(self) -> None:
        self._held_through_extra(signal.SIGKILL)


class TLSTest(support.ServiceCase):
    def test_tls(self) -> None:
        url, ca = support.env("TURNSTILE_TEST_TLS_URL"), support.env("TURNSTILE_TEST_CA")
        c = turnstile.Client(url, token=support.env("TURNSTILE_TEST_ADMIN"), ca_file=ca)
        with c.lock(support.key("tls"), ttl=5, wait=5) as lease:
            self.assertGreater(lease.token, 0)
        unverified = turnstile.Client(url, token=support.env("TURNSTILE_TEST_ADMIN"))
        with self.assertRaises(turnstile.Unavailable) as cm:
            unverified.status("k")
        self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))
        with self.assertRaises(ValueError):
            turnstile.Client(support.env("TURNSTILE_TEST_URL"), ca_file=ca)
