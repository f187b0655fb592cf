"""The client of the turnstile lock service."""

from __future__ import annotations

import os
import re
import secrets
import socket
import ssl
from typing import Iterator, List, NamedTuple, Optional, Sequence, Union

from . import _errors
from ._hold import open_held
from ._lease import Lease, Leadership
from ._transport import Broken, StreamTimeout, Transport
from ._wire import (Seconds, duration, kind_name, kind_of, parse_addresses, parse_duration, seconds, uint)


class Holder(NamedTuple):
    owner: str
    token: int
    ttl: Optional[float]  # seconds left unless renewed; None for a session
    session: bool


class LockState(NamedTuple):
    key: str
    held: bool
    holders: List[Holder]
    token: int  # the highest token the store issued for the key (0: unknown)
    waiters: int  # -1: the store keeps no queue it can count


class LockList(list):
    """The locks ls() found; ``more`` says the limit cut the list short."""

    more: bool = False


class Leader(NamedTuple):
    elected: bool
    value: str
    term: int
    owner: str


class Info(NamedTuple):
    store: str
    kinds: List[str]
    store_notices: bool
    store_queue: bool
    version: str
    instance: str
    default_ttl: float
    max_wait: float


_UNSAFE_HEADER = re.compile(r"[\x00-\x20\x7f]")


def _state(m: Optional[dict]) -> LockState:
    m = m or {}
    holders = [Holder(h.get("owner", ""), uint(h.get("token")),
                      None if h.get("session") else parse_duration(h.get("ttl", "0s")), bool(h.get("session")))
               for h in m.get("holders") or []]
    return LockState(m.get("key", ""), bool(m.get("held")), holders, uint(m.get("token")), int(m.get("waiters") or 0))


def _leader(m: Optional[dict]) -> Leader:
    m = m or {}
    return Leader(bool(m.get("elected")), m.get("value", ""), uint(m.get("term")), m.get("owner", ""))


def _check_key(key: object, what: str = "key") -> str:
    if not isinstance(key, str):
        raise TypeError("turnstile: the %s must be a str, got %s" % (what, type(key).__name__))
    if not key:
        raise ValueError("turnstile: empty %s" % what)
    return key


class Client:
    """A client of the turnstile lock service ("turnstile serve").

    ``url`` is one instance ("http://127.0.0.1:7070"), several of one service
    ("http://h1:7070,h2:7070"), or a list of URLs; https:// speaks TLS,
    verifying the instance's certificate against ``ca_file`` (default: the
    system's authorities), with a client certificate if ``cert_file`` and
    ``key_file`` name one, or with your own ``ssl_context``. ``token`` is the
    bearer token NAME.SECRET of the service's tokens file; it is sent with
    every call and never shown (repr, errors).

    ``connect_timeout`` bounds reaching one instance; ``timeout`` bounds a
    call that does not wait for a lock.
    """

    def __init__(self, url: Union[str, Sequence[str]], token: Optional[str] = None, *,
                 ca_file: Optional[str] = None, cert_file: Optional[str] = None, key_file: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None, connect_timeout: Seconds = 5.0,
                 timeout: Seconds = 30.0) -> None:
        addresses = parse_addresses(url)
        if token is not None:
            if not isinstance(token, str) or not token or _UNSAFE_HEADER.search(token):
                raise ValueError("turnstile: the bearer token must be a non-empty str without spaces or control "
                                 "characters (NAME.SECRET, as \"turnstile serve token\" prints it)")
        tls = any(a.scheme == "https" for a in addresses)
        if not tls and (ca_file or cert_file or key_file or ssl_context):
            raise ValueError("turnstile: TLS options given for http:// addresses: use https://")
        if (cert_file is None) != (key_file is None):
            raise ValueError("turnstile: cert_file and key_file go together: the client certificate and its key")
        context = ssl_context
        if tls and context is None:
            context = ssl.create_default_context(cafile=ca_file)
            if cert_file:
                context.load_cert_chain(cert_file, key_file)
        ct = seconds(connect_timeout, "connect_timeout")
        to = seconds(timeout, "timeout")
        if not ct or not to:
            raise ValueError("turnstile: connect_timeout and timeout must be positive")
        self._t = Transport(addresses, token, context, ct, to)
        self._has_token = token is not None

    def __repr__(self) -> str:
        return "<turnstile.Client %s%s>" % (",".join(str(a) for a in self._t.addresses),
                                             " token=<hidden>" if self._has_token else "")

    def _body(self, key: str, kind: str, permits: int, ttl: Optional[float]) -> dict:
        wire, permits = kind_of(kind, permits)
        body: dict = {"key": _check_key(key), "kind": wire}
        if permits:
            body["permits"] = permits
        if ttl is not None:
            body["ttl"] = duration(ttl)
        return body

    def lock(self, key: str, ttl: Optional[Seconds] = None, wait: Optional[Seconds] = None, *,
             kind: str = "lock", permits: int = 0) -> Lease:
        """Wait for the lock on key and hold it; the service renews it until
        the lease is released. ``ttl``: how long the store keeps the lock if
        this client vanishes (seconds; default: the service's --ttl).
        ``wait``: how long to wait (default: the service's --max-wait);
        instances that cannot be reached are tried again within it. ``kind``:
        "lock", "shared" or "exclusive" (the two sides of a read-write lock),
        "semaphore" (with ``permits``), "fair" — where the store has them.

        Raises NotAcquired when the wait ends, Unavailable when no instance
        answered within it, PermissionDenied, Unsupported."""
        ttl_s, wait_s = seconds(ttl, "ttl"), seconds(wait, "wait")
        if wait_s == 0:
            return self.try_lock(key, ttl, kind=kind, permits=permits)
        body = self._body(key, kind, permits, ttl_s)
        if wait_s is not None:
            body["wait"] = duration(wait_s)
        st, grant = open_held(self._t, "Locks", "Hold", body, wait_s, retry=wait_s is not None)
        return self._lease(Lease, st, grant, ttl_s)

    def try_lock(self, key: str, ttl: Optional[Seconds] = None, *, kind: str = "lock", permits: int = 0) -> Lease:
        """Take the lock on key if it is free, and hold it as lock() does.
        Raises NotAcquired if another owner holds it."""
        ttl_s = seconds(ttl, "ttl")
        body = self._body(key, kind, permits, ttl_s)
        body["owner"] = _owner_id()
        try:
            got = self._t.unary("Locks", "TryAcquire", body)
        except _errors.Unavailable as e:
            if "outcome is unknown" not in e.message:
                raise
            # The same owner id again: the store grants a lock it holds
            # already to its owner, so the retry is safe.
            got = self._t.unary("Locks", "TryAcquire", body)
        handle = got.get("lease")
        hold = {"resume": handle}
        if ttl_s is not None:
            hold["ttl"] = duration(ttl_s)
        try:
            st, grant = open_held(self._t, "Locks", "Hold", hold, None, retry=False)
        except BaseException:
            try:
                self._t.unary("Locks", "Release", {"lease": handle})
            except _errors.TurnstileError:
                pass  # it expires within its TTL
            raise
        return self._lease(Lease, st, grant, ttl_s)

    def _lease(self, cls, st, grant: dict, ttl: Optional[float]):
        try:
            return cls(self._t, st, grant, ttl)
        except BaseException:
            st.close()
            raise

    def status(self, key: str, *, kind: str = "lock", permits: int = 0) -> LockState:
        """Who holds key (read role)."""
        wire, permits = kind_of(kind, permits)
        body = {"key": _check_key(key), "kind": wire}
        if permits:
            body["permits"] = permits
        return _state(self._t.unary("Locks", "Status", body).get("state"))

    def ls(self, prefix: str = "", limit: Optional[int] = None, *, kind: str = "lock", permits: int = 0) -> LockList:
        """The held locks under prefix (read role); a token limited to one
        prefix lists under it when prefix is empty."""
        if not isinstance(prefix, str):
            raise TypeError("turnstile: the prefix must be a str")
        wire, permits = kind_of(kind, permits)
        body: dict = {"prefix": prefix, "kind": wire}
        if permits:
            body["permits"] = permits
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError("turnstile: limit must be a positive int")
            body["limit"] = limit
        got = self._t.unary("Locks", "List", body)
        out = LockList(_state(m) for m in got.get("locks") or [])
        out.more = bool(got.get("more"))
        return out

    def force_release(self, key: str, *, kind: str = "lock", permits: int = 0) -> LockState:
        """Remove the lock on key whoever holds it, raising its fence first
        (admin role): the holder is told its lease is lost, and every later
        token is greater than the returned state's token."""
        wire, permits = kind_of(kind, permits)
        body = {"key": _check_key(key), "kind": wire}
        if permits:
            body["permits"] = permits
        return _state(self._t.unary("Locks", "ForceRelease", body).get("removed"))

    def info(self) -> Info:
        """The instance and its store: which lock kinds it has."""
        m = self._t.unary("Locks", "Info", {})
        return Info(m.get("store", ""), [kind_name(k) for k in m.get("kinds") or [] if kind_name(k)],
                    bool(m.get("storeNotices")), bool(m.get("storeQueue")), m.get("version", ""),
                    m.get("instance", ""), parse_duration(m.get("defaultTtl", "0s")),
                    parse_duration(m.get("maxWait", "0s")))

    def election(self, name: str) -> "Election":
        """The election of name: one leader at a time, whose term is its
        lease's fencing token."""
        return Election(self, _check_key(name, "election name"))


class Election:
    """An election: campaign() to lead, leader() and observe() to watch."""

    def __init__(self, client: Client, name: str) -> None:
        self._c = client
        self.name = name

    def __repr__(self) -> str:
        return "<turnstile.Election %r>" % self.name

    def campaign(self, value: Optional[str] = None, ttl: Optional[Seconds] = None,
                 wait: Optional[Seconds] = None) -> Leadership:
        """Wait until this candidate leads (as long as it takes, unless
        ``wait``), then hold the leadership; use it as a context manager,
        whose exit resigns. ``value`` is what observers see (an address, a
        host name; default: the instance's id)."""
        ttl_s, wait_s = seconds(ttl, "ttl"), seconds(wait, "wait")
        body: dict = {"name": self.name}
        if value is not None:
            if not isinstance(value, str):
                raise TypeError("turnstile: the leader value must be a str")
            body["value"] = value
        if ttl_s is not None:
            body["ttl"] = duration(ttl_s)
        if wait_s is not None:
            body["wait"] = duration(wait_s)
        st, grant = open_held(self._c._t, "Elections", "Campaign", body, wait_s, retry=wait_s is not None)
        return self._c._lease(Leadership, st, grant, ttl_s)

    def leader(self) -> Leader:
        """Who leads now (read role)."""
        return _leader(self._c._t.unary("Elections", "Leader", {"name": self.name}).get("leader"))

    def observe(self, interval: Optional[Seconds] = None) -> Iterator[Leader]:
        """Who leads now, then every change, until the generator is closed
        (read role). Raises Unavailable if the stream breaks."""
        body: dict = {"name": self.name}
        iv = seconds(interval, "interval")
        if iv is not None:
            body["interval"] = duration(iv)
        t = self._c._t
        tried = []
        for i in t.order():
            try:
                st = t.open_stream(i, "Elections", "Observe", body, t.connect_timeout)
                break
            except (OSError, Broken) as e:
                t.skip(i)
                tried.append((t.addresses[i], e))
        else:
            raise t.unreachable(tried)
        try:
            st.settimeout(None)
            while True:
                try:
                    m = st.next()
                except StreamTimeout:
                    continue
                if m is None:
                    return
                yield _leader(m.get("leader"))
        finally:
            st.close()


def _owner_id() -> str:
    """An owner id for a lock this client takes itself: who holds it, for the
    operator reading status, and 128 random bits."""
    host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:64] or "host"
    return "py-%s-%d/%s" % (host, os.getpid(), secrets.token_hex(16))
