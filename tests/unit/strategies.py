"""Hypothesis strategies for retry policies, wide as the issue asks.

Delays from 1 ms to days, multipliers 1-10, jitter 0-1, attempts 1-100.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

DAY = 86_400.0

base_delays = st.floats(min_value=0.001, max_value=3 * DAY, allow_nan=False, allow_infinity=False)
multipliers = st.floats(min_value=1.0, max_value=10.0, allow_nan=False)
jitters = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
samples = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
attempt_limits = st.integers(min_value=1, max_value=100)


@st.composite
def policy_params(draw: st.DrawFn) -> dict[str, Any]:
    """Keyword arguments for a valid RetryPolicy (no budget, no deadline)."""
    base = draw(base_delays)
    # max_delay between base and 100x base (or a year), so both schedules
    # that hit the cap and schedules that never reach it are drawn.
    max_delay = min(base * draw(st.floats(min_value=1.0, max_value=100.0)), 365 * DAY)
    return {
        "max_attempts": draw(attempt_limits),
        "base_delay": base,
        "multiplier": draw(multipliers),
        "max_delay": max_delay,
        "jitter": draw(jitters),
    }
