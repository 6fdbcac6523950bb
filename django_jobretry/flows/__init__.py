"""Workflows: chains, batches with callbacks and dependency graphs, built from ordinary jobs.

Declared here, stored in one transaction by build.py, advanced by the
database in the statement that ends each step's job (jobs/functions.sql,
"workflows"), read by status.py, cancelled by service.py. docs/workflows.md
is the guide::

    flow = Workflow("order-4007")
    a = flow.add(fetch, 4007)
    b = flow.add(charge, 4007, after=[a])
    c = flow.add(ship, 4007, after=[a])
    flow.add(notify, 4007, after=[b, c])
    flow.on_success(receipt, 4007)
    flow.enqueue()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from django_jobretry.exceptions import InvalidFlow
from django_jobretry.flows.steps import Call, Step, call
from django_jobretry.models.flow import FLOW_NAME_MAX_LENGTH, OnDead, StepRole

if TYPE_CHECKING:
    from django_jobretry.models import Flow

__all__ = ["Call", "Step", "Workflow", "batch", "call", "chain", "parent_results"]

#: A step's parents: a list (every edge with the step's ``on_dead``) or each parent with its own.
type Parents = Iterable[Step] | Mapping[Step, str]


class Workflow:
    """A flow being declared: steps, the edges between them and callbacks; :meth:`enqueue` stores it."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.strip() or len(name) > FLOW_NAME_MAX_LENGTH:
            raise InvalidFlow(
                f"a flow's name must be a non-empty string of at most {FLOW_NAME_MAX_LENGTH} characters, "
                f"not {name!r}"
            )
        self.name = name
        self.steps: list[Step] = []
        #: The names taken, and per default name the next number to try: adding stays O(1) a step.
        self._taken: set[str] = set()
        self._numbers: dict[str, int] = {}
        self.enqueued: Flow | None = None

    def add(
        self,
        task: Any,
        /,
        *args: Any,
        after: Parents = (),
        on_dead: str = OnDead.BLOCK,
        name: str | None = None,
        results: bool = False,
        **kwargs: Any,
    ) -> Step:
        """A step running ``task(*args, **kwargs)`` once every step in ``after`` has succeeded.

        ``on_dead`` says what a dead parent does to this step: "block" (wait
        for the dead letter's requeue), "run" (run anyway) or "skip" (cancel
        this step); a mapping ``after={step: "run"}`` says it per parent.
        ``results=True``: the step reads its parents' return values with
        :func:`parent_results`, so they must be JSON. ``task`` may be a
        :func:`call` instead, with ``args`` and ``kwargs`` in it.
        """
        return self._add(_as_call(task, args, kwargs), StepRole.STEP, _parents(after, on_dead), name, results)

    def on_success(self, task: Any, /, *args: Any, **kwargs: Any) -> Step:
        """Run ``task`` once, after every step succeeded (a dead step delays it until its requeue does)."""
        return self._callback(StepRole.ON_SUCCESS, _as_call(task, args, kwargs))

    def on_complete(self, task: Any, /, *args: Any, **kwargs: Any) -> Step:
        """Run ``task`` once, after every step ended however: succeeded, dead, cancelled or discarded."""
        return self._callback(StepRole.ON_COMPLETE, _as_call(task, args, kwargs))

    def on_death(self, task: Any, /, *args: Any, **kwargs: Any) -> Step:
        """Run ``task`` once, when a step of this flow first becomes a dead letter."""
        return self._callback(StepRole.ON_DEATH, _as_call(task, args, kwargs))

    def enqueue(self) -> Flow:
        """Store the flow, its steps and their jobs in one transaction (inside the caller's, if any)."""
        from django_jobretry.flows.build import store

        if self.enqueued is not None:
            raise InvalidFlow(f"flow {self.name!r} was enqueued already, as flow {self.enqueued.pk}")
        self.enqueued = store(self.name, self.steps)
        return self.enqueued

    def _callback(self, role: str, target: Call) -> Step:
        """A callback: a step whose edges, from every ordinary step, build.py adds (by its role)."""
        if any(step.role == role for step in self.steps):
            raise InvalidFlow(f"flow {self.name!r} has a {role} callback already; a flow has at most one")
        return self._add(target, role, (), None, False)

    def _add(
        self, target: Call, role: str, parents: tuple[tuple[Step, str], ...], name: str | None, results: bool
    ) -> Step:
        if self.enqueued is not None:
            raise InvalidFlow(f"flow {self.name!r} was enqueued already: add its steps before enqueue()")
        for parent, _ in parents:
            if not isinstance(parent, Step) or parent.flow is not self:
                raise InvalidFlow(f"after= takes steps this flow's add() returned, not {parent!r}")
            if parent.role != StepRole.STEP:
                raise InvalidFlow(f"a step cannot wait for the {parent.role} callback {parent.name!r}")
        step = Step(self, self._name(name, target), target, role, parents, results)
        self.steps.append(step)
        self._taken.add(step.name)
        return step

    def _name(self, name: str | None, target: Call) -> str:
        """The given name, checked, or the task's short name, numbered from its second use ("noop-2")."""
        taken = self._taken
        if name is not None:
            if not isinstance(name, str) or not name or len(name) > FLOW_NAME_MAX_LENGTH or name in taken:
                raise InvalidFlow(
                    f"step name {name!r} in flow {self.name!r}: give a unique non-empty name of at most "
                    f"{FLOW_NAME_MAX_LENGTH} characters"
                )
            return name
        named = getattr(target.task, "name", None) or getattr(target.task, "__name__", "step")
        base = (str(named).rpartition(".")[2] or "step")[: FLOW_NAME_MAX_LENGTH - 12]
        n = self._numbers.get(base, 1)
        candidate = base if n == 1 else f"{base}-{n}"
        while candidate in taken:
            n += 1
            candidate = f"{base}-{n}"
        self._numbers[base] = n + 1
        return candidate


def chain(name: str, *calls: Call) -> Workflow:
    """A flow of ``calls`` run one after another, each once the one before succeeded."""
    flow = Workflow(name)
    previous: list[Step] = []
    for each in calls:
        previous = [flow.add(each, after=previous)]
    return flow


def batch(
    name: str,
    calls: Iterable[Call],
    *,
    on_success: Call | None = None,
    on_complete: Call | None = None,
    on_death: Call | None = None,
) -> Workflow:
    """A flow of ``calls`` run side by side, with the callbacks given."""
    flow = Workflow(name)
    for each in calls:
        flow.add(each)
    for callback, register in (
        (on_success, flow.on_success),
        (on_complete, flow.on_complete),
        (on_death, flow.on_death),
    ):
        if callback is not None:
            register(callback)
    return flow


def parent_results() -> dict[str, Any]:
    """Inside a step: its parents' return values by step name (those that succeeded; JSON as stored)."""
    from django_jobretry.flows.results import read_parent_results

    return read_parent_results()


def _as_call(task: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Call:
    if isinstance(task, Call):
        if args or kwargs:
            raise InvalidFlow("give a call()'s arguments inside it, not again beside it")
        return task
    return Call(task, tuple(args), dict(kwargs))


def _parents(after: Parents, on_dead: str) -> tuple[tuple[Step, str], ...]:
    """``after`` as (parent, rule) pairs, each rule known and no parent twice.

    ``on_dead`` is checked even when ``after`` is a mapping (its rules are
    the mapping's) or empty, so a misspelt rule is refused wherever it is.
    """
    _check_rule(on_dead)
    pairs = list(after.items()) if isinstance(after, Mapping) else [(parent, on_dead) for parent in after]
    seen: set[int] = set()
    for parent, rule in pairs:
        _check_rule(rule)
        if id(parent) in seen:
            raise InvalidFlow(f"step {getattr(parent, 'name', parent)!r} is named twice in after=")
        seen.add(id(parent))
    return tuple(pairs)


def _check_rule(rule: str) -> None:
    if rule not in OnDead.values:
        raise InvalidFlow(f"on_dead must be one of {', '.join(OnDead.values)}, not {rule!r}")
