"""The flows' checks of the chaos harness (chaos/flows.py) hold for flows run to their end, and fail.

The harness's ledger and audit are installed in the test database (rolled
back with the test); flows are enqueued as its feeder enqueues them and run
by ``testing.run_jobs`` (the worker's own claim, run and record, in this
thread). Nothing is reported for flows run to their end; the exact violation
for a flow never run, a step started before its parents succeeded, a
callback that succeeded twice (its job handed out again after its success,
as a broken fence would) and a run of another step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from django.db import connection
from django.db.models.functions import Now

from django_jobretry.registry import registry
from tests.declarations import forgotten_afterwards

# The chaos tasks (chaos/jobs.py) register when chaos is imported, here at collection: kept out of
# the registry the other tests of this process see (their policies are not the tests', so `manage.py
# check` would report them), and registered again for each test of this module by the harness.
with forgotten_afterwards():
    from chaos import flows, schema
    from chaos import settings as chaos_settings

    CHAOS_TASKS = [registry.get(name) for name in registry.names() if name.startswith("chaos.")]
from django_jobretry.models import FlowStep, Job, JobStatus
from django_jobretry.testing import run_jobs

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("harness")]


@pytest.fixture
def harness(settings: Any) -> Iterator[None]:
    """The ledger and the audit; the chaos tasks and their policy (chaos/settings.py) beside the tests'."""
    schema.install()
    settings.JOBRETRY = {
        **settings.JOBRETRY,
        "POLICIES": {**settings.JOBRETRY["POLICIES"], "chaos": chaos_settings.JOBRETRY["POLICIES"]["chaos"]},
    }
    with forgotten_afterwards():
        for task in CHAOS_TASKS:
            if task is not None:
                registry.register(task)
        yield


def enqueue(*keys: str) -> None:
    """Flows as the feeder enqueues them, every step instant and succeeding at once."""
    for key in keys:
        labels = [name for name, _ in flows.SHAPE] + list(flows.CALLBACKS)
        arguments = {label: (key, label, 0.0, 0) for label in labels}
        flows.enqueue_flow(key, arguments, deadline=time.monotonic() + 30)


def step(flow: str, name: str) -> FlowStep:
    return FlowStep.objects.get(flow__name=flow, name=name)


def success_at(flow_step: FlowStep) -> datetime:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT min(at) FROM chaos_audit WHERE flow_step_id = %s AND new_status = 'succeeded'",
            [flow_step.pk],
        )
        at: datetime = cursor.fetchone()[0]
    return at


def ledger_row(flow_step: FlowStep, label: str, started: datetime) -> None:
    job_id = Job.objects.filter(flow_step=flow_step).values_list("pk", flat=True).get()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_attempt (job_id, attempt, pid, started_at, flow_step_id, step) "
            "VALUES (%s, 9, 1, %s, %s, %s)",
            [job_id, started, flow_step.pk, label],
        )


def violations() -> dict[str, list[str]]:
    checks, _ = flows.evaluate(2, None)
    return {check.name: check.violations for check in checks if check.violations}


def test_flows_run_to_their_end_keep_every_flow_invariant() -> None:
    enqueue("flow-0", "flow-1")
    assert run_jobs(include_scheduled=True).succeeded == 14

    checks, figures = flows.evaluate(2, None)

    assert [(check.checked, check.violations) for check in checks] == [(2, []), (14, []), (14, []), (30, [])]
    assert figures == {
        "flows completed / enqueued": "2 / 2",
        "flow step runs (ledger) / steps": "14 / 14",
        "flow steps run more than once (retried, or a run lost to a fault)": 0,
    }


def test_a_flow_never_run_is_incomplete_its_steps_lost_and_unsucceeded() -> None:
    enqueue("flow-0")

    checks, _ = flows.evaluate(2, RuntimeError("database gone"))

    flow, lost, once, order = checks
    assert flow.violations == [
        "the flow feeder failed: RuntimeError('database gone')",
        "1 flows recorded as enqueued, 2 fed",
        "flow-0: running with 7 open steps, finished: False",
    ]
    assert lost.violations[:2] == [
        "flow-0 A: live, 1 jobs left, 0 dead letters",
        "flow-0 B: waiting, 1 jobs left, 0 dead letters",
    ]
    assert len(lost.violations) == 7
    assert len(once.violations) == 14  # no success and no run, for each of the 7 steps
    assert order.violations == []  # nothing started, so nothing started early


def test_a_step_started_before_its_parents_succeeded_is_reported() -> None:
    enqueue("flow-0", "flow-1")
    run_jobs(include_scheduled=True)
    d = step("flow-0", "D")
    # D's handler "started" before B (and C) succeeded: as if a worker ran it while it waited.
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::timestamptz - interval '1 millisecond'", [success_at(step("flow-0", "A"))])
        early = cursor.fetchone()[0]
    ledger_row(d, "flow-0:D", early)

    found = violations()

    assert list(found) == ["no flow step started before its parents succeeded"]
    assert [v.split(" started ")[0] for v in found["no flow step started before its parents succeeded"]] == [
        "flow-0 D",
        "flow-0 D",
    ]
    assert [v.rsplit("its parent ", 1)[1].split()[0] for v in found[next(iter(found))]] == ["B", "C"]


def test_a_callback_that_succeeded_twice_and_a_run_of_another_step_are_reported() -> None:
    enqueue("flow-0", "flow-1")
    run_jobs(include_scheduled=True)
    callback = FlowStep.objects.get(flow__name="flow-1", role="on_success")
    # Its job handed out again after its success, as a broken fence would: a second accepted success.
    again = Job.objects.filter(flow_step=callback).update(
        status=JobStatus.READY, run_at=Now(), started_at=None, finished_at=None, attempts=0
    )
    assert again == 1
    assert run_jobs(include_scheduled=True).succeeded == 1
    ledger_row(step("flow-0", "C"), "flow-0:B", success_at(step("flow-0", "E")))

    found = violations()

    assert found == {
        "each flow step succeeded exactly once (each callback once per flow)": [
            "flow-0 C: 2 runs recorded, 1 of another step",
            f"flow-1 {callback.name} (on_success): 2 accepted successes",
        ]
    }
