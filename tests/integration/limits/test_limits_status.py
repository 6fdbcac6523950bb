"""Limits as operators see them (`jobstatus`), and the limited claim's own guarantees, in process."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from django_jobretry.jobs import claim
from django_jobretry.models import Job, JobStatus
from django_jobretry.worker import lifecycle
from tests.integration.conftest import run_command
from tests.jobs_app import limited_jobs

pytestmark = pytest.mark.django_db(transaction=True)

LIMITS = {
    "tasks": {limited_jobs.one_per_tenant.name: {"c": 1, "k": True, "r": None, "b": None}},
    "queues": {},
}


def test_jobstatus_shows_running_over_limit_and_held_per_declared_limit() -> None:
    limited_jobs.one_per_tenant.bulk_enqueue([((tenant, 0), {}) for tenant in (1, 1, 1, 2)])
    claimed, _ = claim.claim_limited("w", 10, 30, None, LIMITS)
    assert sorted(job.attempt for job in claimed) == [1, 1]  # one per tenant: 1 and 2
    lines = {line["name"]: line for line in json.loads(run_command("jobstatus", "--json"))["limits"]}
    line = lines[limited_jobs.one_per_tenant.name]
    assert (line["running"], line["concurrency"], line["per_key"], line["held"]) == (2, 1, True, 2)
    assert (line["keys_running"], line["keys_held"], line["top_keys"]) == (2, 1, [["tenant:1", 2]])
    assert lines[limited_jobs.three_at_once.name]["concurrency"] == 3
    text = run_command("jobstatus")
    assert f"task {limited_jobs.one_per_tenant.name}: 2 / 1 per key, 2 held" in text
    # Held jobs spent nothing: the two waiting behind tenant 1 have no attempt.
    assert list(Job.objects.filter(status=JobStatus.READY).values_list("attempts", flat=True)) == [0, 0]


def test_the_ordinary_claim_leaves_limited_jobs_to_the_limited_claim() -> None:
    limited_jobs.three_at_once.bulk_enqueue([((f"o-{n}", 0), {}) for n in range(5)])
    assert claim.claim("w", 10, 30, None, skip_lanes=True) == []
    three = {
        "tasks": {limited_jobs.three_at_once.name: {"c": 3, "k": False, "r": None, "b": None}},
        "queues": {},
    }
    claimed, _ = claim.claim_limited("w", 10, 30, None, three)
    assert len(claimed) == 3
    assert len(claim.claim("w", 10, 30, None)) == 2  # with no limit declared, lanes are ignored


def test_a_worker_whose_connection_is_cut_while_starting_starts_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real, calls = lifecycle.warn_unknown_queues, []

    def cut_once(queues: Any) -> list[str]:
        calls.append(queues)
        if len(calls) == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return real(queues)

    monkeypatch.setattr("django_jobretry.management.commands.runworker.warn_unknown_queues", cut_once)
    with caplog.at_level(logging.WARNING, logger="django_jobretry"):
        call_command("runworker", "--burst", "--no-schedules", "--concurrency", "1")
    assert len(calls) == 2
    assert any("starting again" in record.getMessage() for record in caplog.records)


def test_the_time_a_retry_waited_for_its_slot_is_left_out_of_retry_for() -> None:
    """Due 60 s ago, first tried 100 s ago: claimed now, 60 s were held, not spent on retry_for."""
    [job] = limited_jobs.three_at_once.bulk_enqueue([(("w-1", 0), {})])
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Job._meta.db_table} SET attempts = 1, first_attempt_at = statement_timestamp() - "
            "interval '100 seconds', run_at = statement_timestamp() - interval '60 seconds' WHERE id = %s",
            [job.pk],
        )
    three = {
        "tasks": {limited_jobs.three_at_once.name: {"c": 3, "k": False, "r": None, "b": None}},
        "queues": {},
    }
    [claimed], _ = claim.claim_limited("w", 10, 30, None, three)
    held = Job.objects.get(pk=claimed.id).held_seconds
    assert 60 <= held < 70, held


def test_a_queue_limit_gives_its_jobs_a_lane_for_as_long_as_the_setting_says(settings: Any) -> None:
    from tests.jobs_app import jobs

    settings.JOBRETRY = {**settings.JOBRETRY, "QUEUE_LIMITS": {"other": {"concurrency": 2}}}
    assert jobs.other_queue.enqueue("q-1").limit_lane == "queue:other"
    settings.JOBRETRY = {**settings.JOBRETRY, "QUEUE_LIMITS": {}}
    assert jobs.other_queue.enqueue("q-2").limit_lane is None
    assert list(Job.objects.order_by("pk").values_list("limit_lane", flat=True)) == ["queue:other", None]
