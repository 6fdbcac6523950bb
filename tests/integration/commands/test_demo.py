"""The example project's `manage.py demo`, what `make demo` runs: each chapter ends where its story says.

One run (about ten seconds): the mix of jobs, a schedule, a partner outage
ridden out by the circuit breaker, and a repaired dead letter. The
assertions are counts and final states, read from the database and from
the lines the demo prints, never how long anything took.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection

from django_jobretry.models import Circuit, CircuitState, DeadLetter, Job, Schedule
from example_project.shop import jobs
from example_project.shop.demo import outage, repair, schedule
from tests.integration.conftest import run_command

pytestmark = pytest.mark.django_db(transaction=True)


def test_demo_runs_each_chapter_to_its_final_states() -> None:
    text = run_command("demo")
    assert connection.vendor == "postgresql"

    # 2-5: the mix of jobs, before any repair.
    assert "Policy 'demo'" in text
    assert "succeeded: 3 (of which retried: 1)   dead letters: 3 (exhausted: 1, fatal: 2)" in text
    summary = text[text.index("5. Summary") :]
    assert [line.split()[1:4] for line in summary.splitlines()[2:8]] == [
        ["send_receipt", "1", "succeeded"],
        ["send_receipt", "1", "succeeded"],
        ["sync_inventory", "3", "succeeded"],
        ["notify_partner", "3", "dead"],
        ["charge_card", "1", "dead"],
        ["send_welcome_email", "1", "dead"],
    ]

    # 6: the schedule's runs happened, one a slot, each succeeded, and `schedules` lists it.
    runs = Job.objects.filter(schedule_name=schedule.NAME)
    assert runs.count() >= schedule.RUNS
    assert set(runs.values_list("status", flat=True)) == {"succeeded"}
    assert set(runs.values_list("task_name", flat=True)) == {jobs.refresh_exchange_rates.name}
    assert len(set(runs.values_list("schedule_slot", flat=True))) == runs.count()
    assert f"schedule runs: {runs.count()}, succeeded: {runs.count()}" in text
    assert Schedule.objects.get(name=schedule.NAME).runs == runs.count()
    assert re.search(
        rf"^{schedule.NAME} +{re.escape(jobs.refresh_exchange_rates.name)} +every 1s ", text, re.M
    )

    # 7: every order synced, none died; the breaker opened, probed after each opening, and closed.
    orders = Job.objects.filter(task_name=jobs.sync_order.name)
    assert sorted(orders.values_list("args", "status")) == [([n], "succeeded") for n in outage.ORDERS]
    assert max(orders.values_list("attempts", flat=True)) < 4, "the policy's 4 attempts: none was near death"
    assert not DeadLetter.objects.filter(task_name=jobs.sync_order.name).exists()
    assert Circuit.objects.get(task_name=jobs.sync_order.name).state == CircuitState.CLOSED
    told = text[text.index("What the breaker did") :].split("\n\n")[0]
    events = [
        line.split(maxsplit=1)[1].split(" (")[0].split(":")[0]
        for line in told.splitlines()[1:]
        if line.strip() and "partner answers again" not in line
    ]
    openings = events.count("open")
    assert openings >= 1
    assert events == ["open", "half-open"] * openings + ["closed"]
    attempts = sum(orders.values_list("attempts", flat=True))
    assert (
        f"orders synced: 6 of 6   dead letters: 0   attempts spent: {attempts}   breaker openings: {openings}"
        in text
    )

    # 8: the wrong repair changed nothing; the right one ran, and the welcome e-mail was sent.
    assert "refused, nothing changed" in text
    welcome = Job.objects.get(task_name=jobs.send_welcome_email.name)
    assert (welcome.args, welcome.kwargs, welcome.status, welcome.attempts) == (
        [repair.ADDRESS],
        {},
        "succeeded",
        1,
    )
    assert welcome.requeue_history[-1]["repair"] == {
        "by": repair.ACTOR,
        "changes": [{"path": "args[0]", "change": "changed", "old": "not-an-address", "new": repair.ADDRESS}],
    }
    assert f"job {welcome.pk}: succeeded after 1 attempt(s)" in text
    # The dead letters left are the mix's two that no repair can save; the chapters added none.
    assert sorted(DeadLetter.objects.values_list("task_name", "reason")) == [
        (jobs.charge_card.name, "fatal"),
        (jobs.notify_partner.name, "exhausted"),
    ]
