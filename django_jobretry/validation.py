"""Input checks at the enqueue boundary: clear errors, and nothing is written.

Arguments travel as JSON through PostgreSQL ``jsonb``; anything that would
not come back unchanged (sets, objects, non-string keys, NaN, floats jsonb
turns into integers, integers outside 64 bits) or that PostgreSQL refuses
(NUL characters, lone surrogates) is refused here with the argument's name
rather than mangled - and without the value, which may be a secret. A value
of a type JSON does not have is :class:`InvalidArguments`, a ``TypeError``
too, as Django's task framework raises for it.

Everything here is pure (no database access) and iterative: a value nested
100,000 levels deep, a cycle or a structure that shares its parts to look
astronomically large is refused with :class:`InvalidJob`, never a
``RecursionError`` or an endless walk.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from itertools import chain
from typing import Any, NamedTuple

from django_jobretry.exceptions import InvalidArguments, InvalidJob, UnsupportedArgument
from django_jobretry.policy.errors import InvalidPolicy, to_timedelta

# \Z, not $: "$" also matches before a trailing newline.
TASK_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,199}\Z")
QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")
UNIQUE_KEY_MAX = 200
PRIORITY_MIN, PRIORITY_MAX = -100, 100

#: Integers an argument may hold: a signed 64-bit integer (PostgreSQL ``bigint``,
#: Django's ``BigIntegerField``), so every database id fits. Inside this range an
#: integer comes back from jsonb exactly; see docs/jobs.md#arguments for why not more.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
#: Floats of this magnitude or more are written in exponent form (``1e+16``),
#: which jsonb stores as a whole ``numeric`` and returns as an integer, not a float.
FLOAT_LIMIT = 1e16

# Surrogate code points (U+D800-U+DFFF) are not text: UTF-8 cannot encode them and
# jsonb refuses their "\ud800" escapes, so PostgreSQL would fail the INSERT.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_END = object()


def check_task_name(name: object) -> str:
    if not isinstance(name, str) or not TASK_NAME.match(name):
        raise InvalidJob(
            f"task name {name!r} is invalid: use 1-200 characters from letters, digits, '_', '.', ':', '-', "
            "starting with a letter or '_'"
        )
    return name


def check_queue_name(name: object) -> str:
    if not isinstance(name, str) or not QUEUE_NAME.match(name):
        raise InvalidJob(
            f"queue_name {name!r} is invalid: use 1-100 characters from letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return name


def check_priority(priority: object) -> int:
    if (
        isinstance(priority, int)
        and not isinstance(priority, bool)
        and PRIORITY_MIN <= priority <= PRIORITY_MAX
    ):
        return priority
    raise InvalidJob(f"priority {priority!r} is invalid: an integer from {PRIORITY_MIN} to {PRIORITY_MAX}")


def check_unique_key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= UNIQUE_KEY_MAX:
        raise InvalidJob(f"unique_key {key!r} is invalid: a string of 1-{UNIQUE_KEY_MAX} characters, or None")
    check_text("unique_key", key)
    return key


class Arguments(NamedTuple):
    """A job's arguments as checked: JSON-safe copies, and the JSON text the INSERT binds."""

    args: list[Any]
    kwargs: dict[str, Any]
    args_json: str
    kwargs_json: str


#: Compact JSON that refuses NaN and infinities: one encoder, not one per ``json.dumps`` call.
_COMPACT = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def encode_arguments(
    task_name: str, args: tuple[Any, ...], kwargs: dict[str, Any], *, max_bytes: int, max_depth: int
) -> Arguments:
    """JSON-safe copies of args/kwargs and their JSON text, or InvalidJob naming the bad argument.

    The text is what the INSERT binds (jobs/insert.py), so the
    arguments are encoded once; the copies are decoded from it, so they are
    exactly what jsonb will give back.
    """
    walker = _Walker(task_name, max_depth=max_depth, max_values=max_bytes)
    for index, value in enumerate(args):
        walker.walk(f"positional argument {index}", value)
    for position, (name, value) in enumerate(kwargs.items()):
        _check_keyword_name(task_name, position, name)
        walker.walk(f"keyword argument {name!r}", value)
    args_json, kwargs_json = _COMPACT.encode(list(args)), _COMPACT.encode(kwargs)
    # The size of the pair as one JSON array, [args,kwargs]: the brackets and the comma.
    size = len(args_json.encode()) + len(kwargs_json.encode()) + 3
    if size > max_bytes:
        raise InvalidJob(
            f"arguments of task {task_name!r} are {size} bytes as JSON; the limit is {max_bytes} "
            "(JOBRETRY['MAX_ARGS_BYTES']). Pass an id and load the data in the job instead."
        )
    return Arguments(json.loads(args_json), json.loads(kwargs_json), args_json, kwargs_json)


def check_result(task_name: str, value: Any, *, max_bytes: int, max_depth: int) -> str:
    """The JSON text a task's return value is stored as, or InvalidJob saying why it cannot be.

    The same rules as arguments (a value must come back from jsonb unchanged),
    with Django's own conversion first: tuples become lists, as
    ``django.tasks`` does for every backend.
    """
    what = "the return value"
    _Walker(task_name, max_depth=max_depth, max_values=max_bytes, what=what).walk(what, value)
    text = _COMPACT.encode(value)
    if len(text.encode()) > max_bytes:
        raise InvalidJob(
            f"the return value of task {task_name!r} is {len(text.encode())} bytes as JSON; the limit is "
            f"{max_bytes} (JOBRETRY['MAX_ARGS_BYTES']). Store large results elsewhere and return a reference."
        )
    return text


def check_result_shape(task_name: str, value: Any, *, max_bytes: int, max_depth: int) -> None:
    """The depth and size rules of :func:`check_result`, on a return value before Django converts it.

    ``django.utils.json.normalize_json`` recurses: a value nested 5,000 deep
    would be a RecursionError there, not an InvalidJob naming the limit.
    """
    what = "the return value"
    shape = _Walker(task_name, max_depth=max_depth, max_values=max_bytes, what=what, shape_only=True)
    shape.walk(what, value)


def _check_keyword_name(task: str, position: int, name: object) -> None:
    if not isinstance(name, str):
        raise InvalidArguments(
            f"keyword argument name {name!r} of task {task!r} is a {type(name).__name__}; "
            "keyword argument names must be strings"
        )
    check_text(f"the name of keyword argument {position} (counting from 0) of task {task!r}", name)


def check_text(subject: str, text: str) -> None:
    """Refuse what PostgreSQL cannot store in text or jsonb; the message never quotes ``text``."""
    if "\x00" in text:
        raise InvalidJob(f"{subject} contains a NUL character; PostgreSQL cannot store it")
    if _SURROGATE.search(text):
        raise InvalidJob(
            f"{subject} contains a lone surrogate (a code point from U+D800 to U+DFFF), which is not "
            "valid Unicode text and PostgreSQL cannot store it; pass valid text, e.g. bytes decoded "
            "with errors='replace', or base64 for binary data"
        )


class _Walker:
    """Checks argument values depth-first with an explicit stack, so depth is bounded, not the C stack.

    Every JSON value takes at least one byte, so arguments holding more
    values (dict keys included) than MAX_ARGS_BYTES are refused as soon as
    that many are seen: a list that contains itself twice, 30 levels down,
    is not walked a billion times.
    """

    def __init__(
        self, task: str, *, max_depth: int, max_values: int, what: str = "arguments", shape_only: bool = False
    ) -> None:
        self.task, self.what = task, what
        #: Only depth and count, of any Mapping or Sequence: a result before Django converts it.
        self.shape_only = shape_only
        self.max_depth = max_depth
        self.max_values = max_values
        self.seen = 0

    def walk(self, where: str, root: Any) -> None:
        # Each entry: the children still to check, and the depth they are at (an argument is level 1).
        pending: list[tuple[Iterator[Any], int]] = [(iter((root,)), 1)]
        while pending:
            children, depth = pending[-1]
            value = next(children, _END)
            if value is _END:
                pending.pop()
                continue
            self._count(1)
            inside = self._children(where, value)
            if inside is None:
                if not self.shape_only:
                    self._check_leaf(where, value)
                continue
            # Checked before descending: keys and values of a dict sit one level deeper, like items.
            if value and depth >= self.max_depth:
                raise InvalidJob(
                    f"{where} of task {self.task!r} is nested deeper than {self.max_depth} levels "
                    "(MAX_ARGS_DEPTH)"
                )
            pending.append((inside, depth + 1))

    def _children(self, where: str, value: Any) -> Iterator[Any] | None:
        """What ``value`` holds; None for a leaf. ``shape_only``: whatever Django's conversion walks."""
        if isinstance(value, list | tuple):
            return iter(value)
        if isinstance(value, dict) and not self.shape_only:
            self._check_keys(where, value)
            return iter(value.values())
        if self.shape_only and isinstance(value, Mapping):
            return chain.from_iterable(value.items())  # normalize_json converts the keys too
        if self.shape_only and isinstance(value, Sequence) and not isinstance(value, str | bytes):
            return iter(value)
        return None

    def _count(self, values: int) -> None:
        self.seen += values
        if self.seen > self.max_values:
            raise InvalidJob(
                f"{self.what} of task {self.task!r} hold more than {self.max_values} values, so more than "
                f"{self.max_values} bytes as JSON; the limit is {self.max_values} "
                "(JOBRETRY['MAX_ARGS_BYTES']). Pass an id and load the data in the job instead."
            )

    def _check_keys(self, where: str, value: dict[Any, Any]) -> None:
        for key in value:
            if not isinstance(key, str):
                raise InvalidArguments(
                    f"{where} of task {self.task!r} has a dict key {key!r} of type {type(key).__name__}; "
                    "JSON object keys must be strings"
                )
            check_text(f"a dict key in {where} of task {self.task!r}", key)
        self._count(len(value))

    def _check_leaf(self, where: str, value: Any) -> None:
        subject = f"{where} of task {self.task!r}"
        if value is None or isinstance(value, bool):
            return
        if isinstance(value, int):
            if not INT_MIN <= value <= INT_MAX:
                raise InvalidJob(
                    f"{subject} contains an integer outside {INT_MIN}..{INT_MAX} (a signed 64-bit "
                    "integer, PostgreSQL's bigint); pass a larger number as a string"
                )
            return
        if isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidJob(f"{subject} is {value!r}; JSON has no NaN or infinity")
            if abs(value) >= FLOAT_LIMIT:
                raise InvalidJob(
                    f"{subject} contains a float of magnitude 1e16 or more, which PostgreSQL's jsonb "
                    "returns as an integer, not always equal to it; pass it as a string, or as an int"
                )
            return
        if isinstance(value, str):
            check_text(subject, value)
            return
        raise UnsupportedArgument(
            f"{subject} is a {type(value).__module__}.{type(value).__qualname__}, which is not "
            "JSON-serialisable; pass plain data (str, int, float, bool, None, list, dict), e.g. an id",
            type(value),
        )


def check_timeout(value: object) -> timedelta | None:
    """A job's time limit: seconds or a timedelta, more than 0 and at most 365 days; or None."""
    if value is None:
        return None
    try:
        return to_timedelta("timeout", value)
    except InvalidPolicy as exc:
        raise InvalidJob(f"timeout {value!r} is invalid: {exc.allowed}") from None
