"""The token bucket of rate limits, run in PostgreSQL: no window ever sees more than refill + burst.

The property drives ``jobretry_bucket_tokens()`` (migration 0026), the one
refill the limited claim spends tokens by, through random claim times: a
start is taken whenever a whole token is there. In every window of T
seconds at most ``per_second * T + burst`` starts happen. The negative
control runs the same property on a bucket without its ``burst`` cap, and
hypothesis must find the burst it allows.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.django_db

REAL = "jobretry_bucket_tokens(%s, to_timestamp(%s), to_timestamp(%s), %s, %s)"
#: The refill without LEAST(burst, ...): tokens pile up while nobody claims.
UNCAPPED = (
    "GREATEST(%s, 0) + %s * 0 + %s * GREATEST(extract(epoch FROM to_timestamp(%s) - to_timestamp(%s)), 0)"
)

PROPERTY = settings(max_examples=60, deadline=None, database=None, report_multiple_bugs=False)
gaps = st.lists(st.floats(min_value=0, max_value=3, allow_nan=False), min_size=1, max_size=60)
rates = st.floats(min_value=0.5, max_value=50, allow_nan=False)
bursts = st.integers(min_value=1, max_value=5)


def real(tokens: float, then: float, now: float, per_second: float, burst: float) -> float:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {REAL}", [tokens, then, now, per_second, burst])
        return float(cursor.fetchone()[0])


def uncapped(tokens: float, then: float, now: float, per_second: float, burst: float) -> float:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {UNCAPPED}", [tokens, burst, per_second, now, then])
        return float(cursor.fetchone()[0])


Refill = Callable[[float, float, float, float, float], float]


def starts(refill: Refill, gaps: list[float], per_second: float, burst: int) -> list[float]:
    """Claim at each time (a start whenever a token is there), the bucket created full at t = 1000."""
    tokens, then, now, taken = float(burst), 1000.0, 1000.0, []
    for gap in gaps:
        now += gap
        tokens = refill(tokens, then, now, per_second, burst)
        then = now
        while tokens >= 1:
            tokens -= 1
            taken.append(now)
    return taken


def worst_window_excess(times: list[float], per_second: float, burst: int) -> float:
    """The most any window [t, t + T] of starts exceeds per_second * T + burst (<= 0: the bound holds)."""
    worst = float("-inf")
    for i, first in enumerate(times):
        for j in range(i, len(times)):
            span = times[j] - first
            worst = max(worst, (j - i + 1) - (per_second * span + burst))
    return worst


@PROPERTY
@given(gaps, rates, bursts)
def test_no_window_sees_more_starts_than_its_refill_plus_the_burst(
    gaps: list[float], per_second: float, burst: int
) -> None:
    assert worst_window_excess(starts(real, gaps, per_second, burst), per_second, burst) <= 1e-6


def test_negative_control_a_bucket_without_its_cap_lets_a_quiet_spell_burst() -> None:
    @PROPERTY
    @given(gaps, rates, bursts)
    def uncapped_holds(gaps: list[float], per_second: float, burst: int) -> None:
        assert worst_window_excess(starts(uncapped, gaps, per_second, burst), per_second, burst) <= 1e-6

    with pytest.raises(AssertionError):
        uncapped_holds()
