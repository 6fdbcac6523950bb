"""Retention and workflows: a flow's jobs go with the flow, once it finished, never before.

A step still to run reads its parents' results from their succeeded jobs,
so those are kept, however old, while the flow has not finished; a flow
finished before the cutoff goes with its jobs, steps and edges, unless a
dead letter of it is left for an operator. Jobs of no flow are pruned as
before (tests/integration/jobs/test_prunejobs.py, test_prune_plan.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import DurationField, Value
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now

from django_jobretry import deadletters
from django_jobretry.flows import call, chain
from django_jobretry.flows.service import cancel_flow
from django_jobretry.jobs import retention
from django_jobretry.models import DeadLetter, Flow, FlowEdge, FlowStep, Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.integration.conftest import run_command
from tests.integration.flows.test_failure_rules import blocked_diamond
from tests.jobs_app import flow_jobs, jobs

pytestmark = pytest.mark.django_db

WEEK = timedelta(days=7)


def days_ago(days: float) -> CombinedExpression:
    return Now() - Value(timedelta(days=days), output_field=DurationField())


def age(flow: Flow, *, jobs_days: float, flow_days: float | None = None) -> None:
    """Move a flow's succeeded jobs (and its end, if it has one) back in time."""
    Job.objects.filter(flow_step__flow=flow, status=JobStatus.SUCCEEDED).update(
        finished_at=days_ago(jobs_days)
    )
    if flow_days is not None:
        Flow.objects.filter(pk=flow.pk).update(finished_at=days_ago(flow_days))


def rows_of(flow: Flow) -> tuple[int, int, int, int]:
    """The flow's jobs, steps, edges and its own row, counted."""
    return (
        Job.objects.filter(flow_step__flow=flow).count(),
        FlowStep.objects.filter(flow=flow).count(),
        FlowEdge.objects.filter(child__flow=flow).count(),
        Flow.objects.filter(pk=flow.pk).count(),
    )


def finished_chain(name: str) -> Flow:
    flow = chain(name, call(flow_jobs.step, f"{name}-1"), call(flow_jobs.step, f"{name}-2")).enqueue()
    run_jobs(include_scheduled=True)
    return Flow.objects.get(pk=flow.pk)


def test_an_unfinished_flows_old_succeeded_jobs_are_kept() -> None:
    flow, _ = blocked_diamond()
    age(flow, jobs_days=30)
    before = rows_of(flow)
    assert before == (6, 7, 12, 1)  # B is a dead letter; 3 jobs succeeded, 3 wait
    assert retention.prune_succeeded(WEEK) == 0
    assert retention.prune_flows(WEEK) == 0
    assert rows_of(flow) == before


def test_a_flow_finished_before_the_cutoff_goes_with_its_jobs_steps_and_edges() -> None:
    old, recent = finished_chain("old"), finished_chain("recent")
    age(old, jobs_days=30, flow_days=30)
    age(recent, jobs_days=30, flow_days=1)  # its jobs are old, the flow's end is not: kept together
    alone = jobs.record.enqueue("no flow")
    Job.objects.filter(pk=alone.pk).update(status=JobStatus.SUCCEEDED, finished_at=days_ago(30))
    assert rows_of(old) == rows_of(recent) == (2, 2, 1, 1)
    assert retention.prune_succeeded(WEEK, dry_run=True) == 3
    assert retention.prune_flows(WEEK, dry_run=True) == 1
    assert rows_of(old) == (2, 2, 1, 1)  # the dry run deleted nothing
    assert retention.prune_succeeded(WEEK) == 3
    assert not Job.objects.filter(pk=alone.pk).exists()
    assert retention.prune_flows(WEEK) == 1
    assert rows_of(old) == (0, 0, 0, 0)
    assert rows_of(recent) == (2, 2, 1, 1)


def test_a_finished_flow_with_a_dead_letter_left_is_kept_until_it_is_gone() -> None:
    flow, dead = blocked_diamond()
    assert cancel_flow(flow.pk, "ops") is not None
    age(flow, jobs_days=30, flow_days=30)
    assert retention.prune_succeeded(WEEK) == 3  # A, C and the on-death callback
    assert retention.prune_flows(WEEK, dry_run=True) == 0
    assert retention.prune_flows(WEEK) == 0
    assert rows_of(flow)[1:] == (7, 12, 1)
    deadletters.discard(dead.pk, actor="ops")
    assert not DeadLetter.objects.exists()
    assert retention.prune_flows(WEEK) == 1
    assert rows_of(flow) == (0, 0, 0, 0)


def test_prunejobs_says_how_many_flows_went_only_when_some_did() -> None:
    old = finished_chain("old")
    age(old, jobs_days=30, flow_days=30)
    assert run_command("prunejobs", "--older-than", "7d", "--dry-run").splitlines() == [
        "would delete 2 succeeded job(s) finished more than 7 days, 0:00:00 ago",
        "would delete 1 workflow(s) finished more than 7 days, 0:00:00 ago, with their steps",
    ]
    assert run_command("prunejobs", "--older-than", "7d").splitlines()[1] == (
        "deleted 1 workflow(s) finished more than 7 days, 0:00:00 ago, with their steps"
    )
    assert rows_of(old) == (0, 0, 0, 0)
    assert (
        run_command("prunejobs", "--older-than", "7d")
        == "deleted 0 succeeded job(s) finished more than 7 days, 0:00:00 ago\n"
    )
