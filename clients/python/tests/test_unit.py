"""What the client checks and shows without a service."""

from __future__ import annotations

import ast
import datetime
import os
import struct
import unittest

from tests import support  # noqa: F401  (puts src on the path)
import turnstile
from turnstile import _errors, _wire


class AddressTest(unittest.TestCase):
    def test_forms(self) -> None:
        a = _wire.parse_addresses("http://h1:7070,h2,[::1]:8080/base/")
        self.assertEqual([x.name for x in a], ["h1:7070", "h2:7070", "[::1]:8080"])
        self.assertEqual({x.prefix for x in a}, {"/base"})
        b = _wire.parse_addresses(["https://a:1", "http://b"])
        self.assertEqual([(x.scheme, x.port) for x in b], [("https", 1), ("http", 7070)])

    def test_refused(self) -> None:
        for bad in ("", "h:7070", "ftp://h", "http://", "http://h:0", "http://h:x", "http://h,", "http://::1:70",
                    "http://h/?q=1", "http://[::1", "http://h:", "http://[::1]:",
                    "http://127.0.0.1:1,http://127.0.0.1:2"):
            with self.assertRaises(ValueError, msg=bad):
                _wire.parse_addresses(bad)
        with self.assertRaises(ValueError) as cm:
            _wire.parse_addresses("http://name:s3cret@h:7070")
        self.assertNotIn("s3cret", str(cm.exception))

    def test_client_hides_its_token(self) -> None:
        c = turnstile.Client("http://127.0.0.1:7070", token="orders.s3cretsecret")
        self.assertNotIn("s3cret", repr(c))
        self.assertIn("hidden", repr(c))
        for bad in ("a b", "x\n", ""):
            with self.assertRaises(ValueError) as cm:
                turnstile.Client("http://h", token=bad)
            self.assertNotIn(bad.strip() or "\x00", str(cm.exception))


class WireTest(unittest.TestCase):
    def test_durations(self) -> None:
        self.assertEqual(_wire.duration(10), "10s")
        self.assertEqual(_wire.duration(1.5), "1.5s")
        self.assertEqual(_wire.duration(0.000000001), "0.000000001s")
        self.assertEqual(_wire.seconds(datetime.timedelta(milliseconds=1500), "ttl"), 1.5)
        self.assertAlmostEqual(_wire.parse_duration("0.987490021s"), 0.987490021)
        for bad in (-1, float("nan"), float("inf")):
            with self.assertRaises(ValueError):
                _wire.seconds(bad, "ttl")
        with self.assertRaises(TypeError):
            _wire.seconds("10", "ttl")

    def test_frame(self) -> None:
        f = _wire.frame({"key": "k"})
        flags, n = struct.unpack(">BI", f[:5])
        self.assertEqual((flags, f[5:]), (0, b'{"key":"k"}'))
        self.assertEqual(n, len(f) - 5)

    def test_kinds(self) -> None:
        self.assertEqual(_wire.kind_of("Shared", 0), ("KIND_SHARED", 0))
        self.assertEqual(_wire.kind_of("semaphore", 3), ("KIND_SEMAPHORE", 3))
        self.assertEqual(_wire.kind_name("KIND_REENTRANT"), "reentrant")
        for kind, permits in (("semaphore", 0), ("lock", 2), ("reentrant", 0), ("semaphore", 1 << 17)):
            with self.assertRaises(ValueError):
                _wire.kind_of(kind, permits)


class ErrorTest(unittest.TestCase):
    def test_mapping(self) -> None:
        cases = [("aborted", "NOT_ACQUIRED", turnstile.NotAcquired), ("failed_precondition", "NOT_HELD", turnstile.LeaseLost),
                 ("permission_denied", "KEY_NOT_ALLOWED", turnstile.PermissionDenied),
                 ("unauthenticated", "NO_TOKEN", turnstile.Unauthenticated),
                 ("unavailable", "STORE_UNAVAILABLE", turnstile.Unavailable),
                 ("unimplemented", "UNSUPPORTED", turnstile.Unsupported),
                 ("invalid_argument", "INVALID_TTL", turnstile.InvalidArgument),
                 ("internal", "", turnstile.TurnstileError)]
        for code, reason, cls in cases:
            e = _errors.from_service(code, "turnstile: why", reason)
            self.assertIs(type(e), cls)
            self.assertEqual((e.code, e.reason), (code, reason))
            self.assertTrue(str(e).startswith("why"))
        self.assertTrue(issubclass(turnstile.Unauthenticated, turnstile.PermissionDenied))
        self.assertTrue(issubclass(turnstile.InvalidArgument, ValueError))


class CompatibilityTest(unittest.TestCase):
    def test_python_3_9_grammar(self) -> None:
        """The package parses as Python 3.9 (no match, no X | Y at run time)."""
        src = os.path.join(support.SRC, "turnstile")
        for name in sorted(os.listdir(src)):
            if name.endswith(".py"):
                with open(os.path.join(src, name)) as f:
                    ast.parse(f.read(), name, feature_version=(3, 9))


if __name__ == "__main__":
    unittest.main()
