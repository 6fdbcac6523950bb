"""The flows in `jobstatus` (text and JSON) and in the metrics, from real flows in each state.

One flow of each state, reached through the real paths: a diamond whose B
dies (blocked), a chain run to the end (completed), one enqueued and not run
(running), one cancelled through the service. Every face reads the one
report of flows/status.py, so each is checked on the same four.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from prometheus_client.core import Metric

from django_jobretry import console
from django_jobretry.flows import Workflow, call, chain, status
from django_jobretry.flows.service import cancel_flow
from django_jobretry.models import DeadLetter, Flow, FlowState
from django_jobretry.testing import run_jobs
from tests.integration.conftest import run_command
from tests.integration.flows.test_failure_rules import blocked_diamond
from tests.jobs_app import flow_jobs

pytestmark = pytest.mark.django_db


def samples(metrics: list[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in metrics
        for sample in family.samples
    }


def one_of_each() -> dict[str, Any]:
    """A blocked, a completed, a running and a cancelled flow; the blocked one's dead letter."""
    blocked, dead = blocked_diamond()
    completed = chain("nightly", call(flow_jobs.step, "n1"), call(flow_jobs.step, "n2")).enqueue()
    run_jobs(include_scheduled=True)
    running = chain("later", call(flow_jobs.step, "l1")).enqueue()
    cancelled = chain("dropped", call(flow_jobs.step, "d1")).enqueue()
    assert cancel_flow(cancelled.pk, "ops") is not None
    return {"blocked": blocked, "dead": dead, "completed": completed, "running": running}


def test_without_flows_the_json_has_zero_counts_and_the_text_no_section() -> None:
    found = json.loads(run_command("jobstatus", "--json"))["flows"]
    assert found == {
        "running": 0,
        "blocked": 0,
        "completed": 0,
        "cancelled": 0,
        "more_than_limit": [],
        "blocked_flows": [],
    }
    assert "Flows:" not in run_command("jobstatus")


def test_jobstatus_counts_each_state_and_names_the_blocked_flow_with_its_dead_letter() -> None:
    made = one_of_each()
    flow, dead = Flow.objects.get(pk=made["blocked"].pk), made["dead"]
    found = json.loads(run_command("jobstatus", "--json"))["flows"]
    assert found == {
        "running": 1,
        "blocked": 1,
        "completed": 1,
        "cancelled": 1,
        "more_than_limit": [],
        "blocked_flows": [
            {
                "flow_id": flow.pk,
                "name": "order-4007",
                "blocked_by": dead.pk,
                "blocked_at": flow.blocked_at.isoformat(),
            }
        ],
    }
    text = run_command("jobstatus")
    section = text[text.index("\nFlows:") + 1 :].splitlines()
    assert section[0] == "Flows: 1 running, 1 blocked, 1 completed, 1 cancelled"
    assert section[1].split() == ["flow", "name", "blocked", "by", "blocked", "since"]
    assert section[2].split()[:4] == [str(flow.pk), "order-4007", "dead", "letter"]
    assert section[2].split()[4] == str(dead.pk)


def test_only_the_oldest_blocked_flows_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    flows = []
    for n in range(3):
        declared = Workflow(f"stuck-{n}")
        declared.add(flow_jobs.step_unless, f"s{n}", True, name="s")
        flows.append(declared.enqueue())
    run_jobs(include_scheduled=True)
    for age, flow in zip((1, 3, 2), flows, strict=True):  # stuck-1 blocked longest, then stuck-2
        when = Now() - Value(timedelta(hours=age), output_field=DurationField())
        Flow.objects.filter(pk=flow.pk).update(blocked_at=when)
    monkeypatch.setattr(status, "BLOCKED_SHOWN", 2)
    report = status.flows_report()
    assert [line.name for line in report.blocked] == ["stuck-1", "stuck-2"]
    assert [line.blocked_by for line in report.blocked] == [
        DeadLetter.objects.get(flow_step__flow=flows[n]).pk for n in (1, 2)
    ]
    lines = status.status_lines(report)
    assert lines[0] == "Flows: 0 running, 3 blocked, 0 completed, 0 cancelled"
    assert lines[1] == "The 2 blocked longest (`manage.py flows list --state blocked`):"
    assert len(lines) == 2 + 1 + 2  # the counts, the note, the header, two flows


def test_counts_stop_at_the_count_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(3):
        chain(f"c{n}", call(flow_jobs.step, f"c{n}")).enqueue()
    monkeypatch.setattr(console, "COUNT_LIMIT", 2)
    found = status.as_json(status.flows_report())
    assert (found["running"], found["more_than_limit"]) == (2, ["running"])
    assert (
        status.status_lines(status.flows_report())[0]
        == "Flows: 2+ running, 0 blocked, 0 completed, 0 cancelled"
    )


def test_the_metric_is_a_series_per_state() -> None:
    assert samples(list(status.collect())) == {
        ("jobretry_flows", (("state", state),)): 0.0 for state in FlowState.values
    }
    one_of_each()
    assert samples(list(status.collect())) == {
        ("jobretry_flows", (("state", state),)): 1.0 for state in FlowState.values
    }


def test_the_counts_are_index_walks_that_stop_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    Flow.objects.bulk_create(
        Flow(name=f"f{n}", state=FlowState.COMPLETED, steps=1, open_steps=0) for n in range(2_000)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {status.FLOW}")
    monkeypatch.setattr(console, "COUNT_LIMIT", 100)
    with console.index_walks() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {status._COUNTS_SQL}", {"cap": 101})
        plan = "\n".join(row[0] for row in cursor.fetchall())
    scans = re.findall(
        r"(\w+ \w+ Scan|\w+ Scan)[^\n]* on django_jobretry_flow\b[^\n]* rows=(\d+) loops", plan
    )
    assert len(scans) == len(FlowState.values), plan
    assert all(kind == "Index Only Scan" and int(rows) <= 101 for kind, rows in scans), plan
    assert "jobretry_flow_state" in plan
    assert status.flows_report().counts[FlowState.COMPLETED] == console.Count(100, more=True)
