"""turnstile: a client of the turnstile lock service, standard library only.

    import turnstile

    with turnstile.Client("http://127.0.0.1:7070", token=...).lock("lock:order:42", ttl=10, wait=30) as lease:
        db.write(row, fencing_token=lease.token)  # lease.lost is set the moment the lease is lost

The service renews the lease while it is held (its Hold stream); a client
that dies loses the lock within its TTL, at once if its connection closes.
"""

from ._client import Client, Election, Holder, Info, Leader, LockList, LockState
from ._errors import (InvalidArgument, LeaseLost, NotAcquired, PermissionDenied, TurnstileError, Unauthenticated,
                      Unavailable, Unsupported)
from ._lease import Lease, Leadership
from ._transport import VERSION as __version__

__all__ = [
    "Client", "Election", "Holder", "Info", "Leader", "Leadership", "Lease", "LockList", "LockState",
    "TurnstileError", "NotAcquired", "LeaseLost", "PermissionDenied", "Unauthenticated", "Unavailable",
    "Unsupported", "InvalidArgument",
]
