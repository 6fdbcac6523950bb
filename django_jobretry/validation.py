"""Input checks at the enqueue boundary: clear errors, and nothing is written.

Arguments travel as JSON through PostgreSQL ``jsonb``; anything that would
not come back unchanged (sets, objects, non-string keys, NUL characters,
NaN) is refused here with the argument's name rather than mangled.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django_jobretry.exceptions import InvalidJob

TASK_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,199}$")
QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
UNIQUE_KEY_MAX = 200
PRIORITY_MIN, PRIORITY_MAX = -100, 100


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
    if not isinstance(key, str) or not 1 <= len(key) <= UNIQUE_KEY_MAX or "\x00" in key:
        raise InvalidJob(f"unique_key {key!r} is invalid: a string of 1-{UNIQUE_KEY_MAX} characters, or None")
    return key


def check_arguments(
    task_name: str, args: tuple[Any, ...], kwargs: dict[str, Any], *, max_bytes: int, max_depth: int
) -> tuple[list[Any], dict[str, Any]]:
    """JSON-safe copies of args/kwargs, or InvalidJob naming the bad argument."""
    for index, value in enumerate(args):
        _check_value(task_name, f"positional argument {index}", value, 1, max_depth)
    for name, value in kwargs.items():
        _check_value(task_name, f"keyword argument {name!r}", value, 1, max_depth)
    payload = json.dumps([list(args), kwargs], allow_nan=False, separators=(",", ":"))
    size = len(payload.encode())
    if size > max_bytes:
        raise InvalidJob(
            f"arguments of task {task_name!r} are {size} bytes as JSON; the limit is {max_bytes} "
            "(JOBRETRY['MAX_ARGS_BYTES']). Pass an id and load the data in the job instead."
        )
    args_copy, kwargs_copy = json.loads(payload)
    return args_copy, kwargs_copy


def _check_value(task: str, where: str, value: Any, depth: int, max_depth: int) -> None:
    if depth > max_depth:
        raise InvalidJob(
            f"{where} of task {task!r} is nested deeper than {max_depth} levels (MAX_ARGS_DEPTH)"
        )
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJob(f"{where} of task {task!r} is {value!r}; JSON has no NaN or infinity")
        return
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidJob(f"{where} of task {task!r} contains a NUL character; PostgreSQL cannot store it")
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_value(task, where, item, depth + 1, max_depth)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidJob(
                    f"{where} of task {task!r} has a dict key {key!r} of type {type(key).__name__}; "
                    "JSON object keys must be strings"
                )
            _check_value(task, where, key, depth + 1, max_depth)
            _check_value(task, where, item, depth + 1, max_depth)
        return
    raise InvalidJob(
        f"{where} of task {task!r} is a {type(value).__module__}.{type(value).__qualname__}, which is not "
        "JSON-serialisable; pass plain data (str, int, float, bool, None, list, dict), e.g. an id"
    )
