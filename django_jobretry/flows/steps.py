"""A flow's parts as declared: a call (a task and its arguments) and a step (a call in its place).

Apart from the Workflow that makes them (flows/__init__.py), so that
build.py, which stores them, imports neither the public module nor the
other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """A task and its arguments, not enqueued: what a step or a callback runs."""

    task: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def call(task: Any, /, *args: Any, **kwargs: Any) -> Call:
    """``task(*args, **kwargs)`` as a step of :func:`chain` or :func:`batch`, or a callback."""
    return Call(task, args, kwargs)


@dataclass(frozen=True, eq=False)
class Step:
    """One step of a :class:`Workflow`, as :meth:`Workflow.add` returns it: pass it in ``after``."""

    #: The Workflow that made it: a step is a parent only within its own flow.
    flow: object
    name: str
    call: Call
    role: str
    #: (parent, on_dead) pairs, in the order given.
    parents: tuple[tuple[Step, str], ...]
    reads_results: bool
