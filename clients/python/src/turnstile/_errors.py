"""The exceptions of the turnstile client, and how the service's errors map to them.

Every exception is a TurnstileError carrying the service's status code and
reason (the ErrorReason names of proto/turnstile/v1/locks.proto). No message
ever includes the bearer token: the service leaves it out of its own, and the
client builds its messages from addresses and key names only.
"""

from __future__ import annotations

from typing import Optional


class TurnstileError(Exception):
    """An error of the turnstile service or of reaching it.

    ``code`` is the Connect status code ("aborted", "unavailable", ...),
    ``reason`` the service's reason ("NOT_ACQUIRED", ...) or "".
    """

    def __init__(self, message: str, code: str = "unknown", reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return "%s(%r, code=%r, reason=%r)" % (type(self).__name__, self.message, self.code, self.reason)


class NotAcquired(TurnstileError):
    """Another owner held the lock for the whole wait (or at once, for try_lock)."""


class LeaseLost(TurnstileError):
    """The lease ended while it was meant to be held: renewal refused, the lock
    removed by force, or no renewal confirmed within its validity. Work done
    under it may have overlapped with the next holder's: the storage's fence
    (the lease's token) is what refuses its late writes."""


class PermissionDenied(TurnstileError):
    """The bearer token's role or key prefixes do not allow the call."""


class Unauthenticated(PermissionDenied):
    """No bearer token, or one the service does not know."""


class Unavailable(TurnstileError):
    """No instance of the service could be reached, or the store behind it
    failed (then the outcome of the call is unknown)."""


class Unsupported(TurnstileError):
    """The service's store has no such lock kind or operation."""


class InvalidArgument(TurnstileError, ValueError):
    """The request was refused as malformed: a bad key, TTL, or option."""


for _cls in (TurnstileError, NotAcquired, LeaseLost, PermissionDenied, Unauthenticated, Unavailable, Unsupported,
             InvalidArgument):
    _cls.__module__ = "turnstile"

_BY_CODE = {
    "permission_denied": PermissionDenied,
    "unauthenticated": Unauthenticated,
    "unavailable": Unavailable,
    "unimplemented": Unsupported,
    "invalid_argument": InvalidArgument,
}

_BY_REASON = {
    "NOT_ACQUIRED": NotAcquired,
    "NOT_HELD": LeaseLost,
    "LOCK_LOST": LeaseLost,
}

# Connect's mapping of HTTP statuses for responses that are not Connect's own
# (a proxy's error page, a server that is not turnstile).
_HTTP_CODES = {
    400: "internal",
    401: "unauthenticated",
    403: "permission_denied",
    404: "unimplemented",
    429: "unavailable",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


def code_of_http_status(status: int) -> str:
    return _HTTP_CODES.get(status, "unknown")


def from_service(code: str, message: str, reason: str = "", where: Optional[str] = None) -> TurnstileError:
    """The exception for an error the service sent."""
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or TurnstileError
    text = message or code
    if text.startswith("turnstile: "):
        text = text[len("turnstile: "):]
    if where:
        text = "%s: %s" % (where, text)
    if reason and reason not in text:
        text = "%s (%s)" % (text, reason)
    return cls(text, code=code, reason=reason)
