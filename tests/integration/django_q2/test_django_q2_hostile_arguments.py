"""A django-q2 task whose arguments cannot be rendered plainly still becomes exactly one dead letter.

Each delivery goes through the adapter's real hooks and monitor, in process
(as tests/integration/django_q2/test_django_q2_adapter.py does); the arguments are
pickled into the queue row by ``async_task`` like any others. Before
``json_safe`` was total, burying such a task raised, rolled back, and left the
queue row to be delivered again forever.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django_q.models import OrmQ
from django_q.tasks import async_task

from django_jobretry import FatalError
from django_jobretry.contrib.django_q2 import hooks, monitor
from django_jobretry.contrib.django_q2.rendering import MAX_CHARS, json_safe
from django_jobretry.models import DeadLetter
from tests.jobs_app import q2_tasks
from tests.q2_asserts import pushed

pytestmark = pytest.mark.django_db
TASKS = "tests.jobs_app.q2_tasks"


class Unprintable:
    """An argument whose ``__repr__`` and ``__str__`` raise (module level: it pickles)."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    __str__ = __repr__


class ExitingRepr:
    def __repr__(self) -> str:
        raise SystemExit(3)


def deliver_fatally() -> dict[str, Any]:
    """One delivery of the only queued task, failing with a FatalError: the burial path."""
    task = pushed()
    hooks.on_pre_execute("django_q", func=q2_tasks.fatal, task=task)
    try:
        raise FatalError("bad")
    except FatalError as exc:
        task["result"], task["success"] = f"{exc} : Traceback", False
        hooks.Reporter(None).report()
    hooks.on_post_execute_in_worker("django_q", func=q2_tasks.fatal, task=task)
    monitor.on_post_execute("django_q", task=task)
    return task


HOSTILE: dict[str, tuple[tuple[object, ...], dict[str, object]]] = {
    "raising __repr__": ((Unprintable(),), {"also": Unprintable()}),
    "SystemExit from __repr__": ((ExitingRepr(),), {}),
    "lone surrogate": (("report-\udcff.csv",), {"name\udcfe": "x\x00y"}),
    "NaN and a huge int": ((float("nan"), 10**5000), {}),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_task_with_hostile_arguments_is_buried_once_and_leaves_the_queue(case: str) -> None:
    args, kwargs = HOSTILE[case]
    task_id = async_task(f"{TASKS}.fatal", *args, task_name="n\udcff", **kwargs)
    deliver_fatally()
    dead = DeadLetter.objects.get()  # exactly one
    assert (dead.external_id, dead.reason, dead.attempts) == (task_id, "fatal", 1)
    assert not OrmQ.objects.exists()  # django-q2 has nothing left to deliver
    assert dead.external_name == "n\\udcff"
    text = json.dumps([dead.args, dead.kwargs], allow_nan=False)
    assert "\\u0000" not in text
    text.encode("utf-8")  # strict: no lone surrogate was stored


def test_the_surrogate_is_shown_escaped_not_replaced() -> None:
    async_task(f"{TASKS}.fatal", "report-\udcff.csv", note="x\x00y")
    deliver_fatally()
    dead = DeadLetter.objects.get()
    assert (dead.args, dead.kwargs) == (["report-\\udcff.csv"], {"note": "x\\0y"})
    assert dead.args[0] != "report-?.csv"


def test_json_safe_is_total_and_bounded() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    deep: list[Any] = []
    cursor = deep
    for _ in range(10_000):
        cursor.append([])
        cursor = cursor[0]
    many = list(range(1_000_000))
    for value in (cycle, deep, many, "x" * 5_000_000, {Unprintable(): Unprintable()}, b"\0" * 10**6):
        text = json.dumps(json_safe(value), allow_nan=False)
        text.encode("utf-8")
        assert len(text) < 2 * MAX_CHARS
