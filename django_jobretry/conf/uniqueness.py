"""Deduplication of enqueues: which key a call takes, how long the key stays taken, what a conflict does.

Declared on ``@job`` (or a django.tasks task of our backend) and checked
there, once: a bad value is an :class:`~django_jobretry.exceptions.InvalidJob`
at import, not at the first enqueue. The enqueue service applies it under
a per-key lock (jobs/enqueue.py); this module only computes and
validates, so any front door can use it without touching the database.

- ``unique_key``: one fixed key, or, per call, ``.using(unique_key=...)``.
- ``unique_args``: the key is built from these named arguments of the call
  (defaults applied), so ``send(order_id=7)`` and ``send(7)`` share a key.
- ``unique_for``: the key stays taken this long after its job succeeded
  (without it, only while the job is live: ready or running).
- ``on_conflict``: ``"return_existing"`` (the job holding the key is
  returned), ``"raise"`` (:class:`~django_jobretry.exceptions.JobConflict`
  names it) or ``"replace"`` (a still-ready holder takes the new arguments
  and ``run_after``; a running or finished one is returned as it is).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, cast

from django_jobretry.exceptions import InvalidJob
from django_jobretry.signatures import bound_arguments, untaken
from django_jobretry.validation import UNIQUE_KEY_MAX, check_unique_key

type OnConflict = Literal["raise", "return_existing", "replace"]

#: The conflict modes, the default first: what enqueuing a key that is taken does.
ON_CONFLICT: tuple[OnConflict, ...] = ("return_existing", "raise", "replace")
#: The longest window: long enough for any business rule, short of PostgreSQL's interval range.
UNIQUE_FOR_MAX = timedelta(days=3660)


@dataclass(frozen=True, slots=True)
class Uniqueness:
    """How one task's enqueues are deduplicated; the default deduplicates nothing."""

    key: str | None = None
    args: tuple[str, ...] = ()
    #: How long the key stays taken after its job succeeded; None: only while the job is live.
    window: timedelta | None = None
    on_conflict: OnConflict = "return_existing"

    @classmethod
    def declare(
        cls,
        where: str,
        *,
        unique_key: object = None,
        unique_args: object = (),
        unique_for: object = None,
        on_conflict: object = "return_existing",
        func: Callable[..., Any] | None = None,
        takes_context: bool = False,
    ) -> Uniqueness:
        """The options as given, checked: InvalidJob names ``where`` (if any), the option and the value.

        With the task's ``func``, ``unique_args`` must name parameters it takes.
        """
        try:
            declared = cls(
                key=check_unique_key(unique_key),
                args=_checked_args(unique_args),
                window=_checked_window(unique_for),
                on_conflict=_checked_mode(on_conflict),
            )
            if not declared.deduplicates and (declared.window or declared.on_conflict != ON_CONFLICT[0]):
                raise InvalidJob(
                    "unique_for and on_conflict apply to a keyed enqueue: give unique_args, or unique_key "
                    "with .using()"
                )
            if func is not None and (unknown := untaken(func, declared.args, takes_context=takes_context)):
                name = getattr(func, "__name__", "the task function")
                raise InvalidJob(
                    f"unique_args {list(declared.args)!r} names {unknown[0]!r}, which {name}() does not take"
                )
            return declared
        except InvalidJob as exc:
            raise InvalidJob(f"{where}: {exc}" if where else str(exc)) from None

    @property
    def deduplicates(self) -> bool:
        """Whether an enqueue under these options takes a key at all."""
        return self.key is not None or bool(self.args)

    def key_for(
        self,
        task_name: str,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        takes_context: bool = False,
    ) -> str | None:
        """The key of one call (already checked against ``func``), or None when it takes none.

        From ``args``: the task name, then the SHA-256 of the task name and
        the named arguments' values as compact, sorted JSON
        (``app.jobs.send:3f0c...``). A digest, not the values: a key is shown
        to everyone who may view jobs, and arguments only to those who may
        read them (docs/admin.md).
        """
        if self.key is not None or not self.args:
            return self.key
        bound = bound_arguments(func, args, kwargs, takes_context=takes_context)
        try:
            values = json.dumps(
                {name: bound[name] for name in self.args},
                sort_keys=True,
                separators=(",", ":"),
                allow_nan=False,
            )
        except (TypeError, ValueError) as exc:  # a default that is not JSON
            raise InvalidJob(
                f"{task_name}: unique_args {list(self.args)!r} take a value that is not JSON: {exc}"
            ) from None
        digest = hashlib.sha256(f"{task_name}\0{values}".encode()).hexdigest()
        return f"{task_name[: UNIQUE_KEY_MAX - len(digest) - 1]}:{digest}"


def _checked_args(value: object) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, tuple | list) or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise InvalidJob(f"unique_args {value!r} is invalid: a tuple of argument names, like ('order_id',)")
    if len(set(names)) != len(names):
        raise InvalidJob(f"unique_args {value!r} names an argument twice")
    return tuple(cast("list[str]", names))


def _checked_window(value: object) -> timedelta | None:
    if value is None:
        return None
    window = value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        window = timedelta(seconds=min(value, UNIQUE_FOR_MAX.total_seconds() + 1))
    if isinstance(window, timedelta) and timedelta(0) < window <= UNIQUE_FOR_MAX:
        return window
    raise InvalidJob(
        f"unique_for {value!r} is invalid: a timedelta (or seconds) above 0 "
        f"and at most {UNIQUE_FOR_MAX.days} days"
    )


def _checked_mode(value: object) -> OnConflict:
    for mode in ON_CONFLICT:
        if value == mode:
            return mode
    raise InvalidJob(f"on_conflict {value!r} is invalid: one of {', '.join(map(repr, ON_CONFLICT))}")


#: What a task without deduplication options has: no key, so every enqueue inserts.
NOT_UNIQUE = Uniqueness()
