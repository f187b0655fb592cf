"""A held lease: renewed by the service while its stream is open, and told
the moment it is lost."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, List, Optional

from . import _errors
from ._hold import open_held
from ._transport import Broken, Stream, StreamTimeout, Transport
from ._wire import duration, kind_name, parse_duration, uint

log = logging.getLogger("turnstile")

# The lease's states: a lease is held until it is released or lost, once.
HELD, RELEASED, LOST = "held", "released", "lost"


class Lease:
    """A held lock.

    The service renews it for as long as the lease is held; ``lost`` (a
    threading.Event) is set the moment the lease is lost: a renewal refused,
    the lock removed by force, or no renewal confirmed within its validity.
    ``token`` is the fencing token to pass to the storage you write to.

    Use it as a context manager: leaving the block releases the lock, and
    raises LeaseLost if the lease was lost meanwhile (unless the block raised),
    so that work that may have overlapped with the next holder's does not pass
    unnoticed.

    A lease the service hands over between instances (one that drains, or a
    connection that broke) is resumed on another instance within its
    validity, with a new, greater token: read ``token`` when you write.
    """

    # The call that ends the lease by its handle.
    _release_call = ("Locks", "Release")

    def __init__(self, transport: Transport, stream: Stream, grant: dict, ttl: Optional[float]) -> None:
        self._t = transport
        self._mu = threading.Lock()
        self._state = HELD
        self._error: Optional[_errors.LeaseLost] = None
        self._callbacks: List[Callable[["Lease"], None]] = []
        self._stream = stream
        self._ttl_asked = ttl
        self.lost = threading.Event()
        handle = grant.get("lease") or {}
        self.key: str = handle.get("key", "")
        self.kind: str = kind_name(handle.get("kind"))
        self.permits: int = int(handle.get("permits") or 0)
        self._apply(grant)
        self._thread = threading.Thread(target=self._watch, name="turnstile-lease", daemon=True)
        self._thread.start()

    def _apply(self, grant: dict) -> None:
        handle = grant.get("lease")
        if not isinstance(handle, dict) or not handle.get("owner"):
            raise _errors.TurnstileError("the service granted a lease without its handle")
        self._handle = handle
        self._token = uint(handle.get("token"))
        self.ttl: float = parse_duration(grant.get("ttl", "0s"))
        self._deadline = time.monotonic() + parse_duration(grant.get("validity", "0s"))

    @property
    def token(self) -> int:
        """The fencing token: greater than every earlier token of the key."""
        return self._token

    @property
    def owner(self) -> str:
        """The owner id the lock is held under in the store."""
        return self._handle.get("owner", "")

    @property
    def held(self) -> bool:
        """Whether the lease is still held: not released, not lost."""
        with self._mu:
            return self._state == HELD

    @property
    def validity(self) -> float:
        """Seconds the lease is certainly still held (0 once it ended)."""
        with self._mu:
            if self._state != HELD:
                return 0.0
            return max(0.0, self._deadline - time.monotonic())

    @property
    def lost_error(self) -> Optional[_errors.LeaseLost]:
        """Why the lease was lost, or None."""
        return self._error

    def on_lost(self, fn: Callable[["Lease"], None]) -> None:
        """Call fn(lease) the moment the lease is lost (at once if it was).
        fn runs on the lease's own thread: keep it short."""
        with self._mu:
            if self._state != LOST:
                self._callbacks.append(fn)
                return
        fn(self)

    def check(self) -> None:
        """Raise LeaseLost if the lease was lost."""
        if self._error is not None:
            raise self._error

    def release(self) -> None:
        """Release the lock; when it returns the lock is free. Raises
        LeaseLost if the lease had been lost, even if the service had not
        said so yet (the store no longer held it). Releasing again does
        nothing. If no instance answers, closing the stream releases it
        (or the lock expires within its TTL)."""
        with self._mu:
            held = self._state == HELD
            if held:
                self._state = RELEASED
            st, handle = self._stream, self._handle
        if held:
            service, method = self._release_call
            try:
                self._t.unary(service, method, {"lease": handle})
            except _errors.LeaseLost as e:
                self._lose(e.message, was=RELEASED)
            except _errors.TurnstileError:
                pass
        st.close()
        self.check()

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.release()
            return
        try:
            self.release()
        except _errors.LeaseLost:
            pass

    def __repr__(self) -> str:
        with self._mu:
            state = self._state
        return "<turnstile.%s key=%r token=%d kind=%s %s>" % (type(self).__name__, self.key, self._token, self.kind, state)

    # The lease's thread: it reads the stream, and loses the lease when the
    # service says so, or when its validity passes without a renewal.

    def _watch(self) -> None:
        try:
            self._loop()
        except Exception as e:  # never leave a lease believed held unwatched
            self._lose("the lease's watch failed: %s" % type(e).__name__)

    def _loop(self) -> None:
        while True:
            with self._mu:
                if self._state != HELD:
                    return
                st = self._stream
                left = self._deadline - time.monotonic()
            if left <= 0:
                self._lose("no renewal was confirmed within the lease's validity")
                return
            st.settimeout(left)
            try:
                m = st.next()
            except StreamTimeout:
                continue
            except Broken:
                if not self._resume(self._handle, None):
                    return
                continue
            except _errors.TurnstileError as e:
                if e.reason == "DRAINING" and self._resume(self._handle, st.index):
                    continue
                self._lose(e.message)
                return
            if m is None:
                if not self._resume(self._handle, None):
                    return
                continue
            if isinstance(m.get("renewed"), dict):
                valid = parse_duration(m["renewed"].get("validity", "0s"))
                with self._mu:
                    self._deadline = time.monotonic() + valid
            elif isinstance(m.get("lost"), dict):
                self._lose(m["lost"].get("message") or "the service lost the lease")
                return
            elif isinstance(m.get("draining"), dict):
                handle = m["draining"].get("lease") or self._handle
                if not self._resume(handle, st.index):
                    return

    def _resume(self, handle: dict, avoid: Optional[int]) -> bool:
        """Go on holding the lease through another instance (or this one,
        last) within its validity. False once the lease is lost."""
        with self._mu:
            if self._state != HELD:
                return False
            old = self._stream
            deadline = self._deadline
        old.close()
        if deadline <= time.monotonic():
            # Paused (a GC pause, a stopped process) past its validity: the
            # lock may be another's by now.
            self._lose("its stream ended after the lease's validity had run out")
            return False
        body = {"resume": handle}
        if self._ttl_asked is not None:
            body["ttl"] = duration(self._ttl_asked)
        try:
            st, grant = open_held(self._t, "Locks", "Hold", body, None, retry=True, avoid=avoid, deadline=deadline)
        except _errors.TurnstileError as e:
            self._lose("the lease could not be resumed on another instance: %s" % e.message)
            return False
        with self._mu:
            if self._state == HELD:
                self._stream = st
                self._apply(grant)
                return True
        st.close()
        return False

    def _lose(self, why: str, was: str = HELD) -> None:
        if why.startswith("turnstile: "):
            why = why[len("turnstile: "):]
        with self._mu:
            if self._state != was:
                return
            self._state = LOST
            self._error = _errors.LeaseLost("lease of %r (token %d) lost: %s" % (self.key, self._token, why),
                                            code="failed_precondition", reason="LOCK_LOST")
            callbacks, self._callbacks = self._callbacks, []
            st = self._stream
        self.lost.set()
        st.close()
        for fn in callbacks:
            try:
                fn(self)
            except Exception:
                log.exception("turnstile: an on_lost callback of %r failed", self.key)


class Leadership(Lease):
    """A won election: a Lease whose term is its token. Leaving the block (or
    release()) resigns; ``lost`` is set the moment the leadership is lost."""

    _release_call = ("Elections", "Resign")

    @property
    def term(self) -> int:
        return self._token

    @property
    def value(self) -> str:
        """What observers see as the leader's value."""
        owner = self.owner
        return owner.rsplit("/", 1)[0] if "/" in owner else owner

    def resign(self) -> None:
        self.release()
