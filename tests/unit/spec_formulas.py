"""The policy's documented formulas (docs/policy.md) written out literally, independent of the implementation.

The properties compare the policy against these, so a policy that agrees with
itself but not with the spec (its own bounds() broken as well) still fails.
"""

from __future__ import annotations

import math
from typing import Any

# timedelta keeps microseconds: the implementation rounds once, so allow one
# microsecond plus float noise relative to the value.
TOLERANCE = 1e-6


def nominal(params: dict[str, Any], attempt: int) -> float:
    """nominal(a) = min(base_delay * multiplier^(a-1), max_delay), in seconds."""
    base: float = params["base_delay"]
    multiplier: float = params["multiplier"]
    cap: float = params["max_delay"]
    # For huge attempts the power overflows a float; the min() is then the cap.
    try:
        return min(base * multiplier ** (attempt - 1), cap)
    except OverflowError:
        return cap


def close_enough(actual: float, expected: float) -> bool:
    return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=TOLERANCE)


def worst_case_total(params: dict[str, Any]) -> float:
    """Every retry at full jitter: sum of nominal(a) * (1 + jitter) for a < max_attempts."""
    jitter: float = params["jitter"]
    return sum(nominal(params, a) * (1 + jitter) for a in range(1, params["max_attempts"]))
