"""Concurrency and rate limits as declared: validated values, no Django, no database.

A :class:`Limit` is what ``@job(concurrency=..., concurrency_key=...,
rate=...)`` or a ``JOBRETRY["QUEUE_LIMITS"]`` entry declares. The claim enforces it in the
database (jobs/statements.py); this module only says what a declaration
means and refuses a bad one with the field, the value and what is allowed.

- ``concurrency``: at most this many running jobs at once, across every
  worker: of the task (or queue), or, with ``concurrency_key``, of each key.
- ``concurrency_key``: a ``str.format`` template naming the function's
  arguments (``"tenant:{tenant_id}"``), filled in at enqueue and stored on
  the job. Jobs of any task with the same key share that key's slots.
- ``rate``: ``"N/s"``, ``"N/m"`` or ``"N/h"``: a token bucket refilled at
  N per period and holding at most ``burst`` tokens (default 1), so in any
  window of T seconds at most ``N * T / period + burst`` jobs start.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass

from django_jobretry.policy.errors import JobRetryError

#: Seconds per rate period, by the letter a rate is written with.
PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*([smh])\s*$")
#: Longest concurrency_key stored on a job (after its template is filled in).
MAX_KEY_CHARS = 200
#: Largest concurrency or burst accepted: beyond it a limit limits nothing.
MAX_SLOTS = 100_000


class InvalidLimit(JobRetryError, ValueError):
    """A limit declaration that cannot be enforced: names the field, the value and what is allowed."""


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` starts per ``period`` seconds, at most ``burst`` at once after a quiet spell."""

    count: int
    period: float
    burst: int = 1

    @property
    def per_second(self) -> float:
        return self.count / self.period

    @classmethod
    def parse(cls, where: str, value: object, burst: object = None) -> Rate:
        """``"100/m"`` (with an optional ``burst``) as a Rate, or InvalidLimit saying why not."""
        match = _RATE.match(value) if isinstance(value, str) else None
        if match is None or int(match.group(1)) < 1:
            raise InvalidLimit(
                f"{where}: rate {value!r} is invalid: write it as 'N/s', 'N/m' or 'N/h' with N >= 1"
            )
        return cls(int(match.group(1)), PERIODS[match.group(2)], _slots(where, "burst", burst, default=1))


@dataclass(frozen=True, slots=True)
class Limit:
    """One declaration: a concurrency limit (global, or per key), a rate limit, or both."""

    concurrency: int | None = None
    concurrency_key: str | None = None
    rate: Rate | None = None

    @classmethod
    def declare(
        cls,
        where: str,
        *,
        concurrency: object = None,
        concurrency_key: object = None,
        rate: object = None,
        burst: object = None,
    ) -> Limit | None:
        """The Limit these options declare (None when they declare nothing), or InvalidLimit.

        ``where`` names the declaration in the error ("@job app.jobs.sync").
        """
        if concurrency is None and concurrency_key is None and rate is None:
            if burst is not None:
                raise InvalidLimit(f"{where}: burst={burst!r} needs a rate")
            return None
        slots = None if concurrency is None else _slots(where, "concurrency", concurrency, default=None)
        if concurrency_key is not None:
            key_fields(where, concurrency_key)
            if slots is None:
                raise InvalidLimit(
                    f"{where}: concurrency_key={concurrency_key!r} needs concurrency=N, "
                    "the number of jobs of one key that may run at once"
                )
        if rate is None and burst is not None:
            raise InvalidLimit(f"{where}: burst={burst!r} needs a rate")
        parsed = None if rate is None else Rate.parse(where, rate, burst)
        return cls(slots, concurrency_key if isinstance(concurrency_key, str) else None, parsed)


def key_fields(where: str, template: object) -> list[str]:
    """The argument names a concurrency_key template uses, or InvalidLimit.

    Only plain names (``{tenant_id}``): no attribute or index lookups, no
    conversions or format specs, so filling in a key can never run code.
    """
    if not isinstance(template, str) or not template.strip():
        raise InvalidLimit(f"{where}: concurrency_key {template!r} is invalid: a non-empty str template")
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise InvalidLimit(f"{where}: concurrency_key {template!r} is not a template ({exc})") from None
    fields = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise InvalidLimit(
                f"{where}: concurrency_key {template!r}: '{{{name}}}' is not allowed; "
                "use plain argument names such as '{tenant_id}'"
            )
        fields.append(name)
    if not fields:
        raise InvalidLimit(
            f"{where}: concurrency_key {template!r} names no argument: all jobs would share one key"
        )
    return fields


def fill_key(template: str, arguments: dict[str, object]) -> str:
    """The key of one job: ``template`` with its argument names filled in from ``arguments``.

    ``arguments`` are the call's bound arguments (defaults applied); a value
    is written with ``str()``. Raises InvalidLimit for a missing argument or a
    key longer than MAX_KEY_CHARS.
    """
    values = {}
    for name in key_fields("concurrency_key", template):
        if name not in arguments:
            raise InvalidLimit(f"concurrency_key {template!r} names {name!r}, which this call does not pass")
        values[name] = str(arguments[name])
    key = template.format_map(values)
    if len(key) > MAX_KEY_CHARS:
        raise InvalidLimit(
            f"concurrency_key {template!r} filled in is {len(key)} characters; at most {MAX_KEY_CHARS}"
        )
    return key


def _slots(where: str, field: str, value: object, *, default: int | None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SLOTS:
        raise InvalidLimit(f"{where}: {field}={value!r} is invalid: an integer from 1 to {MAX_SLOTS:,}")
    return value


def window_bound(rate: Rate, seconds: float) -> int:
    """The most starts a bucket allows in any window of ``seconds``: the refill plus the burst."""
    return math.floor(rate.per_second * seconds) + rate.burst
