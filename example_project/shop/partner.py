"""A stand-in for a partner's API that the demo can take down and bring back.

The demo's outage chapter (shop/demo/outage.py) takes it down for a few
seconds; everywhere else it is up. Workers in the demo run in its own
process, so they see the same outage.
"""

from __future__ import annotations

import threading
import time

_lock = threading.Lock()
#: time.monotonic() until which the partner refuses connections; 0: up.
_down_until = 0.0


def take_down(seconds: float) -> None:
    """The partner refuses connections for the next ``seconds``, then answers again by itself."""
    global _down_until  # noqa: PLW0603 - one partner per process, as a real one would be
    with _lock:
        _down_until = time.monotonic() + seconds


def is_down() -> bool:
    with _lock:
        return time.monotonic() < _down_until


def post_order(order_id: int) -> None:
    """Send the order; a ConnectionRefusedError while the partner is down (retryable: it comes back)."""
    if is_down():
        raise ConnectionRefusedError(f"partner refused the connection for order {order_id}")
