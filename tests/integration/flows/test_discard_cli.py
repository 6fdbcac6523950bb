"""`manage.py deadletters discard` of a flow step's dead letter names the waiting steps it cancels.

On the blocked diamond of test_failure_rules.py (B dead; D and the success
callback, "step", wait on it): the dry run predicts them and changes
nothing, the discard reports them and they are cancelled; a dead letter
outside any flow is reported as before.
"""

from __future__ import annotations

import pytest

from django_jobretry.models import DeadLetter, FlowState, FlowStep, Job, StepState
from django_jobretry.testing import run_jobs
from tests.factories import DeadLetterFactory
from tests.integration.conftest import cli_run
from tests.integration.flows.test_failure_rules import blocked_diamond, runs

pytestmark = pytest.mark.django_db


def waiting_on_b(flow_id: int) -> dict[str, str]:
    return dict(FlowStep.objects.filter(flow_id=flow_id, name__in=["D", "step"]).values_list("name", "state"))


def test_the_dry_run_names_the_steps_the_discard_would_cancel_and_changes_nothing() -> None:
    flow, dead = blocked_diamond()
    plain = DeadLetterFactory.create()

    out, err = cli_run("discard", str(dead.pk), str(plain.pk), "--dry-run")

    lines = out.splitlines()
    assert lines[-2:] == [
        f"  dead letter {dead.pk} would cancel, in flow {flow.pk}: D, step",
        "dry run: would discard 2 dead letters; would cancel 2 flow steps waiting on them; "
        "nothing was changed",
    ]
    assert err == ""
    assert DeadLetter.objects.count() == 2
    assert waiting_on_b(flow.pk) == {"D": StepState.WAITING, "step": StepState.WAITING}


def test_the_discard_names_the_steps_it_cancelled_and_the_flow_completes() -> None:
    flow, dead = blocked_diamond()

    out, err = cli_run("discard", str(dead.pk), "--actor", "ops")

    assert (out.splitlines(), err) == (
        [
            f"discarded dead letter {dead.pk}; cancelled, in flow {flow.pk}: D, step",
            "discarded 1 of 1 dead letter; cancelled 2 flow steps waiting on them",
        ],
        "",
    )
    assert waiting_on_b(flow.pk) == {"D": StepState.CANCELLED, "step": StepState.CANCELLED}
    assert not Job.objects.filter(flow_step__name__in=["D", "step"]).exists()
    run_jobs(include_scheduled=True)
    assert sorted(runs()) == ["A", "C", "complete", "death"]
    flow.refresh_from_db()
    assert flow.state == FlowState.COMPLETED


def test_a_discard_of_all_counts_the_cancelled_steps_and_a_plain_dead_letter_says_nothing_more() -> None:
    flow, dead = blocked_diamond()
    plain = DeadLetterFactory.create()

    out, _ = cli_run("discard", "--all", "--yes")
    assert out == "discarded 2 of 2 dead letters; cancelled 2 flow steps waiting on them\n"

    other = DeadLetterFactory.create()
    out, _ = cli_run("discard", str(other.pk))
    assert out.splitlines() == [f"discarded dead letter {other.pk}", "discarded 1 of 1 dead letter"]
    assert not DeadLetter.objects.filter(pk__in=[dead.pk, plain.pk, other.pk]).exists()
    assert waiting_on_b(flow.pk) == {"D": StepState.CANCELLED, "step": StepState.CANCELLED}
