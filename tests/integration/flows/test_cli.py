"""`manage.py flows list | show | cancel`, in process on real flows, and as a shell runs it.

Flows are built with ``Workflow`` and driven by ``testing.run_jobs``; every
listing is checked line by line, every cancel on the rows it changed, and
every mistake by its exit code and one clear line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from django_jobretry.flows import Workflow, call, chain
from django_jobretry.models import DeadLetter, Flow, FlowState, FlowStep, Job, StepState
from django_jobretry.testing import run_jobs
from tests.integration.conftest import refused, run_command
from tests.integration.flows.test_failure_rules import blocked_diamond
from tests.jobs_app import flow_jobs
from tests.processes import ROOT, test_database_url

pytestmark = pytest.mark.django_db


def three() -> list[Flow]:
    """A completed chain, then a blocked diamond, then a flow not run yet: oldest first."""
    completed = chain("nightly", call(flow_jobs.step, "n1"), call(flow_jobs.step, "n2")).enqueue()
    run_jobs(include_scheduled=True)
    blocked, _ = blocked_diamond()
    running = chain("later", call(flow_jobs.step, "l1")).enqueue()
    return [completed, blocked, running]


# -- list -----------------------------------------------------------------------------------------


def test_list_shows_the_newest_first_with_state_and_steps_done() -> None:
    completed, blocked, running = three()
    dead = DeadLetter.objects.get()
    lines = run_command("flows", "list").splitlines()
    assert lines[0].split() == ["flow", "name", "state", "steps", "done", "created", "finished"]
    assert [line.split()[:2] for line in lines[1:]] == [
        [str(running.pk), "later"],
        [str(blocked.pk), "order-4007"],
        [str(completed.pk), "nightly"],
    ]
    assert f"blocked by dead letter {dead.pk}  " in lines[2]
    assert "3/7" in lines[2].split()
    assert "2/2" in lines[3].split()


def test_list_filters_by_state_and_stops_at_the_limit() -> None:
    _, blocked, running = three()

    def listed(*args: str) -> list[str]:
        return [line.split()[0] for line in run_command("flows", "list", *args).splitlines()[1:]]

    assert listed("--state", "blocked") == [str(blocked.pk)]
    assert listed("--limit", "1") == [str(running.pk)]
    assert run_command("flows", "list", "--state", "cancelled") == "No cancelled flows.\n"


def test_list_without_flows_says_so() -> None:
    assert run_command("flows", "list") == "No flows.\n"
    assert json.loads(run_command("flows", "list", "--json")) == {"flows": []}


def test_list_json_has_every_field_of_each_flow() -> None:
    completed, _, _ = three()
    found = json.loads(run_command("flows", "list", "--json"))["flows"]
    assert [row["id"] for row in found][::-1][0] == completed.pk
    row = found[-1]
    completed.refresh_from_db()
    assert row == {
        "id": completed.pk,
        "name": "nightly",
        "state": "completed",
        "steps": 2,
        "open_steps": 0,
        "blocked_by": None,
        "blocked_at": None,
        "created_at": completed.created_at.isoformat(),
        "finished_at": completed.finished_at.isoformat(),
        "cancelled_by": "",
    }


# -- show -----------------------------------------------------------------------------------------


def test_show_lists_each_step_its_job_or_dead_letter_and_what_a_requeue_resumes() -> None:
    flow, dead = blocked_diamond()
    lines = run_command("flows", "show", str(flow.pk)).splitlines()
    assert lines[0] == f"Flow {flow.pk}: order-4007"
    assert lines[1].startswith(f"  state:    blocked by dead letter {dead.pk} since ")
    assert lines[2] == "  steps:    3 of 7 done"
    table = lines[lines.index("") + 1 :]
    assert table[0].split() == ["step", "role", "task", "state", "job"]
    rows = {line.split()[0]: line.split()[1:] for line in table[1:8]}
    job = {
        name: Job.objects.get(flow_step__flow=flow, flow_step__name=name).pk for name in ("A", "D", "step")
    }
    assert rows["A"] == ["step", flow_jobs.step.name, "succeeded", "job", str(job["A"]), "(succeeded)"]
    assert rows["B"] == ["step", flow_jobs.step_unless.name, "dead", "dead", "letter", str(dead.pk)]
    assert rows["D"] == ["step", flow_jobs.step.name, "waiting", "job", str(job["D"]), "(waiting)"]
    assert rows["step"][:3] == ["on_success", flow_jobs.step.name, "waiting"]
    assert rows["step-2"][:3] == ["on_complete", flow_jobs.step.name, "waiting"]
    assert rows["step-3"][:3] == ["on_death", flow_jobs.step.name, "succeeded"]
    assert table[8:] == [
        f"A requeue of dead letter {dead.pk} runs B again, then the steps waiting for it: D, step, step-2"
    ]


def test_show_tells_apart_the_steps_that_wait_for_another_dead_letter_too() -> None:
    flow = Workflow("two-dead")
    a = flow.add(flow_jobs.step_unless, "a", True, name="a")
    b = flow.add(flow_jobs.step_unless, "b", True, name="b")
    flow.add(flow_jobs.step, "c", after=[a, b], name="c")
    flow.add(flow_jobs.step, "lone", after=[a], name="lone")
    stored = flow.enqueue()
    run_jobs(include_scheduled=True)
    dead_a, dead_b = (DeadLetter.objects.get(flow_step__name=name).pk for name in ("a", "b"))
    steps = {
        row["name"]: row
        for row in json.loads(run_command("flows", "show", str(stored.pk), "--json"))["steps"]
    }
    assert (steps["a"]["requeue_resumes"], steps["a"]["also_behind_other_dead_letters"]) == (["lone"], ["c"])
    assert (steps["b"]["requeue_resumes"], steps["b"]["also_behind_other_dead_letters"]) == ([], ["c"])
    assert (steps["a"]["dead_letter_id"], steps["b"]["dead_letter_id"]) == (dead_a, dead_b)
    assert run_command("flows", "show", str(stored.pk)).splitlines()[-2:] == [
        f"A requeue of dead letter {dead_a} runs a again, then the steps waiting for it: lone; "
        "waiting for another dead letter too: c",
        f"A requeue of dead letter {dead_b} runs b again; waiting for another dead letter too: c",
    ]


def test_show_json_has_the_flow_and_every_step() -> None:
    flow, dead = blocked_diamond()
    found = json.loads(run_command("flows", "show", str(flow.pk), "--json"))
    assert (found["flow"]["id"], found["flow"]["state"], found["flow"]["blocked_by"]) == (
        flow.pk,
        "blocked",
        dead.pk,
    )
    assert [step["name"] for step in found["steps"]] == ["A", "B", "C", "D", "step", "step-2", "step-3"]
    b = found["steps"][1]
    assert b == {
        "name": "B",
        "role": "step",
        "task": flow_jobs.step_unless.name,
        "state": "dead",
        "waiting_on": 0,
        "job_id": None,
        "job_status": None,
        "dead_letter_id": dead.pk,
        "requeue_resumes": ["D", "step", "step-2"],
        "also_behind_other_dead_letters": [],
        "ended_at": FlowStep.objects.get(flow=flow, name="B").ended_at.isoformat(),
    }


def test_show_of_an_unknown_flow_exits_1() -> None:
    assert refused("flows", "show", "999999") == (1, "no flow has id 999999 (see `manage.py flows list`)")


# -- cancel ---------------------------------------------------------------------------------------


def test_cancel_cancels_the_waiting_and_ready_steps_and_records_who() -> None:
    flow, _ = blocked_diamond()
    out = run_command("flows", "cancel", str(flow.pk), "--actor", "alice")
    assert out == (
        f"flow {flow.pk} cancelled by alice: 3 waiting or ready steps cancelled, "
        "0 running steps asked to stop (its dead letters stay: requeue or discard them)\n"
    )
    flow.refresh_from_db()
    assert (flow.state, flow.cancelled_by) == (FlowState.CANCELLED, "alice")
    assert flow.finished_at is not None
    waiting = FlowStep.objects.filter(flow=flow, name__in=["D", "step", "step-2"])
    assert set(waiting.values_list("state", flat=True)) == {StepState.CANCELLED}
    assert not Job.objects.filter(flow_step__in=waiting).exists()
    assert DeadLetter.objects.filter(flow_step__flow=flow).count() == 1


def test_cancelling_an_ended_or_unknown_flow_exits_1_and_changes_nothing() -> None:
    completed = chain("nightly", call(flow_jobs.step, "n1")).enqueue()
    run_jobs(include_scheduled=True)
    assert refused("flows", "cancel", str(completed.pk)) == (
        1,
        f"flow {completed.pk} (nightly) has ended already (completed): nothing cancelled",
    )
    assert Flow.objects.get(pk=completed.pk).state == FlowState.COMPLETED
    assert refused("flows", "cancel", "999999") == (1, "no flow has id 999999: nothing cancelled")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "0"), "argument ID: 0 is not >= 1"),
        (("cancel", "seven"), "argument ID: 'seven' is not an integer"),
        (("list", "--state", "stuck"), "argument --state: invalid choice: 'stuck'"),
        (("list", "--limit", "0"), "argument --limit: 0 is not between 1 and 1000"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(args: tuple[str, ...], message: str) -> None:
    _, text = refused("flows", *args)
    assert message in text


class TestProcess:
    """As a shell runs it: the exit code, one line on stderr, never a traceback."""

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"DATABASE_URL": test_database_url(), "DJANGO_SETTINGS_MODULE": "tests.settings"}
        return subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "flows", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def test_a_bad_id_exits_2_and_an_unknown_flow_1_without_a_traceback(self) -> None:
        bad = self.run("show", "-3")
        assert bad.returncode == 2, bad.stderr
        assert "argument ID: -3 is not >= 1" in bad.stderr
        unknown = self.run("cancel", "999999")
        assert unknown.returncode == 1, unknown.stderr
        assert unknown.stderr == "CommandError: no flow has id 999999: nothing cancelled\n"
        for result in (bad, unknown):
            assert "Traceback" not in result.stderr
