"""Calls to the service's instances over Connect's protocol with JSON, on
HTTP/1.1: unary calls as application/json, streams as application/connect+json
(5-byte envelopes: a flags byte, a big-endian length, the message).

Failing over between instances, as the Go client does: a call goes to the
instance the last one went to. An instance that cannot be reached (the call
never left) or that drains (it did nothing) is passed over for a while and the
call goes to the next one at once. A connection that breaks during a call
leaves its outcome unknown: the call fails with Unavailable and the instance
is passed over for a while.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import struct
import threading
import time
from typing import List, Optional, Tuple

from . import _errors
from ._wire import FLAG_COMPRESSED, FLAG_END_STREAM, MAX_MESSAGE, Address, frame

VERSION = "0.1.0"

# How long an instance that failed is passed over.
SKIP_FOR = 2.0


class Broken(_errors.Unavailable):
    """A stream's connection broke, or its body ended without Connect's end."""


class StreamTimeout(Exception):
    """Nothing arrived on a stream within the time its reader allowed."""


def _keepalive(sock: socket.socket) -> None:
    # A service host that vanishes mid-stream is found by TCP keepalive,
    # as the service finds a vanished client.
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for opt, val in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 2), ("TCP_KEEPCNT", 4)):
            if hasattr(socket, opt):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), val)
    except OSError:
        pass


def _reason_of(values: object) -> str:
    if isinstance(values, list) and values:
        values = values[0]
    if isinstance(values, str):
        return values.split(",")[0].strip()
    return ""


def _error_of(obj: object, reason: str, where: str) -> _errors.TurnstileError:
    """The exception for a Connect error object {"code", "message", "details"}."""
    if not isinstance(obj, dict):
        return _errors.TurnstileError("%s: a malformed error" % where)
    code = obj.get("code") if isinstance(obj.get("code"), str) else "unknown"
    message = obj.get("message") if isinstance(obj.get("message"), str) else ""
    if not reason:
        for d in obj.get("details") or []:
            debug = d.get("debug") if isinstance(d, dict) else None
            if isinstance(debug, dict) and debug.get("domain") == "turnstile" and isinstance(debug.get("reason"), str):
                reason = debug["reason"]
    return _errors.from_service(code, message, reason)


class Stream:
    """One server stream: its messages, then its end."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, index: int, address: Address):
        self._conn = conn
        self._resp = resp
        self.index = index
        self.address = address
        self._closed = False

    def settimeout(self, secs: Optional[float]) -> None:
        sock = self._conn.sock
        if sock is not None:
            sock.settimeout(secs)

    def _read(self, n: int) -> bytes:
        try:
            data = self._resp.read(n)
        except socket.timeout as e:
            raise StreamTimeout() from e
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
            # ValueError, AttributeError: the response was closed under the
            # read by close() from another thread.
            raise Broken("the stream from %s broke: %s" % (self.address.name, type(e).__name__), code="unavailable") from None
        if len(data) < n:
            raise Broken("the stream from %s ended before its end message" % self.address.name, code="unavailable")
        return data

    def next(self) -> Optional[dict]:
        """The next message; None at a clean end. Raises the stream's error,
        Broken, or StreamTimeout."""
        flags, length = struct.unpack(">BI", self._read(5))
        if length > MAX_MESSAGE:
            raise Broken("a message of %d bytes from %s: the stream is out of step" % (length, self.address.name))
        if flags & FLAG_COMPRESSED:
            raise Broken("a compressed message from %s, which was not asked for" % self.address.name)
        data = self._read(length) if length else b"{}"
        try:
            obj = json.loads(data)
        except ValueError:
            raise Broken("a malformed message from %s" % self.address.name) from None
        if not isinstance(obj, dict):
            raise Broken("a malformed message from %s" % self.address.name)
        if flags & FLAG_END_STREAM:
            err = obj.get("error")
            if err is None:
                return None
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            reason = ""
            for k, v in meta.items():
                if k.lower() == "turnstile-reason":
                    reason = _reason_of(v)
            raise _error_of(err, reason, self.address.name)
        return obj

    def close(self) -> None:
        """Closes the connection: the service sees the stream end at once."""
        if self._closed:
            return
        self._closed = True
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            self._conn.close()
        except OSError:
            pass


class Transport:
    """The instances of one service, and how calls reach them."""

    def __init__(self, addresses: List[Address], bearer: Optional[str], context: Optional[ssl.SSLContext],
                 connect_timeout: float, timeout: float) -> None:
        self.addresses = addresses
        self._bearer = bearer
        self._context = context
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._mu = threading.Lock()
        self._current = 0
        self._skip_until = [0.0] * len(addresses)

    def order(self, avoid: Optional[int] = None) -> List[int]:
        """The instances to try, in turn: the current one first, those passed
        over (and avoid) last."""
        with self._mu:
            n = len(self.addresses)
            now = time.monotonic()
            idx = [(self._current + i) % n for i in range(n)]
            fresh = [i for i in idx if self._skip_until[i] <= now and i != avoid]
            stale = [i for i in idx if i not in fresh]
            return fresh + stale

    def skip(self, i: int) -> None:
        with self._mu:
            self._skip_until[i] = time.monotonic() + SKIP_FOR
            if self._current == i:
                self._current = (i + 1) % len(self.addresses)

    def use(self, i: int) -> None:
        with self._mu:
            self._current = i

    def _headers(self, streaming: bool, timeout: Optional[float]) -> dict:
        h = {
            "Content-Type": "application/connect+json" if streaming else "application/json",
            "Connect-Protocol-Version": "1",
            "User-Agent": "turnstile-python/" + VERSION,
        }
        if timeout is not None and not streaming:
            h["Connect-Timeout-Ms"] = str(max(1, int(timeout * 1000)))
        if self._bearer:
            h["Authorization"] = "Bearer " + self._bearer
        return h

    def connect(self, i: int, timeout: float) -> http.client.HTTPConnection:
        """A connection to instance i; OSError if it cannot be reached."""
        a = self.addresses[i]
        timeout = max(timeout, 0.001)
        if a.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                a.host, a.port, timeout=timeout, context=self._context)
        else:
            conn = http.client.HTTPConnection(a.host, a.port, timeout=timeout)
        try:
            conn.connect()
        except BaseException:
            conn.close()
            raise
        _keepalive(conn.sock)
        return conn

    def unreachable(self, errors: List[Tuple[Address, BaseException]]) -> _errors.Unavailable:
        """The error of a call no instance took: each address once, with the
        last thing it said (a wait retries them many times)."""
        last: dict = {}
        for a, e in errors:
            last.pop(a.name, None)
            last[a.name] = _describe(e)
        text = "the service could not be reached"
        if last:
            text += " (%s)" % "; ".join("%s: %s" % kv for kv in last.items())
        return _errors.Unavailable(text, code="unavailable")

    def unary(self, service: str, method: str, body: dict, timeout: Optional[float] = None) -> dict:
        """One call, on the instances in turn as the top of this file says."""
        timeout = self.timeout if timeout is None else timeout
        path = "/turnstile.v1.%s/%s" % (service, method)
        data = json.dumps(body, separators=(",", ":")).encode()
        tried: List[Tuple[Address, BaseException]] = []
        for i in self.order():
            a = self.addresses[i]
            try:
                conn = self.connect(i, min(self.connect_timeout, timeout))
            except OSError as e:
                self.skip(i)
                tried.append((a, e))
                continue
            try:
                conn.sock.settimeout(timeout)
                conn.request("POST", a.prefix + path, body=data, headers=self._headers(False, timeout))
                resp = conn.getresponse()
                payload = resp.read(MAX_MESSAGE + 1)
            except (OSError, http.client.HTTPException) as e:
                self.skip(i)
                raise _errors.Unavailable("%s %s on %s: the connection broke, the outcome is unknown: %s"
                                          % (service, method, a.name, _describe(e)), code="unavailable") from None
            finally:
                conn.close()
            if resp.status == 200:
                self.use(i)
                try:
                    out = json.loads(payload)
                except ValueError:
                    raise _errors.TurnstileError("%s: a malformed answer to %s" % (a.name, method)) from None
                if not isinstance(out, dict):
                    raise _errors.TurnstileError("%s: a malformed answer to %s" % (a.name, method))
                return out
            err = self._unary_error(resp, payload, a)
            if err.reason == "DRAINING":
                self.skip(i)
                tried.append((a, err))
                continue
            raise err
        raise self.unreachable(tried)

    @staticmethod
    def _unary_error(resp: http.client.HTTPResponse, payload: bytes, a: Address) -> _errors.TurnstileError:
        reason = _reason_of(resp.getheader("Turnstile-Reason", ""))
        ctype = (resp.getheader("Content-Type", "") or "").split(";")[0].strip()
        if ctype == "application/json":
            try:
                return _error_of(json.loads(payload), reason, a.name)
            except ValueError:
                pass
        code = _errors.code_of_http_status(resp.status)
        return _errors.from_service(code, "HTTP %d from %s, not an answer of the turnstile service" % (resp.status, a.name), reason)

    def open_stream(self, i: int, service: str, method: str, body: dict, connect_timeout: float) -> Stream:
        """A stream on instance i. OSError if it cannot be reached;
        TurnstileError if it answered with something that is not a stream."""
        a = self.addresses[i]
        conn = self.connect(i, connect_timeout)
        try:
            conn.request("POST", a.prefix + "/turnstile.v1.%s/%s" % (service, method), body=frame(body),
                         headers=self._headers(True, None))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise Broken("%s %s on %s: the connection broke: %s" % (service, method, a.name, _describe(e)),
                         code="unavailable") from None
        if resp.status != 200:
            payload = resp.read(MAX_MESSAGE + 1)
            conn.close()
            raise self._unary_error(resp, payload, a)
        return Stream(conn, resp, i, a)


def _describe(e: BaseException) -> str:
    if isinstance(e, _errors.TurnstileError):
        return e.message
    if isinstance(e, socket.timeout):
        return "timed out"
    if isinstance(e, ssl.SSLError):
        return "TLS: %s" % (e.reason or type(e).__name__)
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return type(e).__name__
