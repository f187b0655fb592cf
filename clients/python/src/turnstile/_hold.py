"""Opening a held stream (Hold, Campaign, or Hold resuming a lease) on the
service's instances in turn, until one grants it."""

from __future__ import annotations

import time
from typing import List, Optional, Tuple

from . import _errors
from ._transport import Broken, Stream, StreamTimeout, Transport
from ._wire import Address

# Grants a held stream's first messages may carry: Hold's and Campaign's.
GRANTS = ("granted", "elected")

# Margin over a request's wait before its stream is given up as silent: the
# service ends the wait itself, and says so.
WAIT_MARGIN = 5.0


def open_held(t: Transport, service: str, method: str, body: dict, wait: Optional[float],
              retry: bool, avoid: Optional[int] = None,
              deadline: Optional[float] = None) -> Tuple[Stream, dict]:
    """The stream and its grant. wait bounds the wait the service makes
    (None: the service's own bound); with retry, instances that cannot be
    reached are tried again until the wait is over; deadline (monotonic)
    bounds everything, for a resume within a lease's validity."""
    if wait is not None:
        end = time.monotonic() + wait
        deadline = end if deadline is None else min(deadline, end)
    tried: List[Tuple[Address, BaseException]] = []
    pause = 0.05
    while True:
        for i in t.order(avoid):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            ct = t.connect_timeout if left is None else min(t.connect_timeout, left)
            try:
                st = t.open_stream(i, service, method, body, ct)
            except (OSError, Broken) as e:
                t.skip(i)
                tried.append((t.addresses[i], e))
                continue
            except _errors.TurnstileError as e:
                if e.reason == "DRAINING":
                    t.skip(i)
                    tried.append((t.addresses[i], e))
                    continue
                raise
            try:
                st.settimeout(None if left is None else left + WAIT_MARGIN)
                while True:
                    m = st.next()
                    if m is None:
                        raise Broken("%s ended its stream without an answer" % st.address.name, code="unavailable")
                    for g in GRANTS:
                        if isinstance(m.get(g), dict):
                            t.use(i)
                            return st, m[g]
            except StreamTimeout:
                st.close()
                raise _errors.Unavailable("%s did not answer within the wait" % st.address.name,
                                          code="unavailable") from None
            except Broken as e:
                st.close()
                t.skip(i)
                tried.append((t.addresses[i], e))
                continue
            except _errors.TurnstileError as e:
                st.close()
                if e.reason == "DRAINING":
                    t.skip(i)
                    tried.append((t.addresses[i], e))
                    continue
                raise
            except BaseException:
                st.close()
                raise
        left = None if deadline is None else deadline - time.monotonic()
        if not retry or left is None or left <= 0:
            raise t.unreachable(tried)
        time.sleep(min(pause, left))
        pause = min(pause * 2, 1.0)
