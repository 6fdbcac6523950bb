"""showpolicies and runworker's option bounds; the demo command is tests/integration/commands/test_demo.py."""

from __future__ import annotations

import json
import logging
import threading

import pytest
from django.core.management.base import CommandError

from django_jobretry.management.commands.showpolicies import describe, render_rules
from django_jobretry.models import Job, WorkerProcess
from django_jobretry.policy import RetryPolicy
from django_jobretry.worker import WorkerOptions
from django_jobretry.worker.lifecycle import MAX_CONCURRENCY
from tests.integration.conftest import run_command
from tests.jobs_app import jobs


def test_showpolicies_prints_each_schedule_and_the_give_up_row() -> None:
    text = run_command("showpolicies", "demo")
    lines = text.splitlines()
    assert lines[0] == "Policy 'demo': 3 attempts, base 200ms x2, cap 1s, jitter +/-10%"
    header = ["after", "attempt", "nominal", "min", "(jitter)", "max", "(jitter)", "cumulative", "worst"]
    assert lines[1].split() == header
    assert lines[2].split() == ["1", "200ms", "180ms", "220ms", "220ms"]
    assert lines[3].split() == ["2", "400ms", "360ms", "440ms", "660ms"]
    assert lines[4].strip() == "attempt 3 fails -> dead letter (exhausted)"


def test_showpolicies_without_names_shows_all() -> None:
    text = run_command("showpolicies")
    assert [line.split(":")[0] for line in text.splitlines() if line.startswith("Policy")] == [
        "Policy 'default'",
        "Policy 'emails'",
        "Policy 'demo'",
        "Policy 'partner'",  # the demo's outage (example_project/shop/demo/outage.py)
        "Policy 'three'",
        "Policy 'q2'",  # the django-q2 adapter's tests (tests/settings.py)
        "Policy 'q2-two'",
    ]
    assert "gives up 2h00m after the first attempt" in text
    assert "more than 2h00m after the first attempt -> dead letter (deadline)" in text


def test_showpolicies_shows_error_rules_timeout_and_requeue_budget() -> None:
    lines = run_command("showpolicies", "demo").splitlines()
    assert [line.strip() for line in lines[5:12]] == [
        "fatal errors:      none listed; a FatalError always",
        "retryable errors:  none listed; a RetryableError always",
        "other errors:      retryable (unknown_errors)",
        "timeout:           none (a job's own timeout= may set one)",
        "requeue budget:    0 (dead letters wait for an operator)",
        "circuit breaker:   none (a job's CircuitOpen still holds its task)",
        "snoozes:           20 a job (Snooze, CircuitOpen), then dead (snooze_budget)",
    ]
    listed = RetryPolicy(
        fatal_errors=[ValueError, json.JSONDecodeError],
        retryable_errors=[ConnectionError],
        unknown_errors="fatal",
        timeout=90,
        requeue_budget=2,
        circuit={"failures": 20, "errors": [ConnectionError]},
        max_snoozes=3,
    )
    assert [line.strip() for line in render_rules(listed)] == [
        "fatal errors:      builtins.ValueError, json.decoder.JSONDecodeError; a FatalError always",
        "retryable errors:  builtins.ConnectionError; a RetryableError always",
        "other errors:      fatal: dead at once (unknown_errors)",
        "timeout:           1m30s",
        "requeue budget:    up to 2 automatic requeues after it dies",
        "circuit breaker:   open after 20 retryable failures of builtins.ConnectionError within 1m00s, "
        "for 30s doubling to 15m00s; then 10 held jobs a second",
        "snoozes:           3 a job (Snooze, CircuitOpen), then dead (snooze_budget)",
    ]
    assert render_rules(RetryPolicy(requeue_budget=1))[-3].endswith("up to 1 automatic requeue after it dies")
    timed, both = RetryPolicy(snooze_for=21600), RetryPolicy(snooze_for=60, max_snoozes=5)
    assert render_rules(timed)[-1].strip() == (
        "snoozes:           6h00m in all a job (Snooze, CircuitOpen), then dead (snooze_budget)"
    )
    assert render_rules(both)[-1].strip() == (
        "snoozes:           5 a job or 1m00s in all a job, the first spent (Snooze, CircuitOpen), "
        "then dead (snooze_budget)"
    )
    assert describe(RetryPolicy(max_attempts=1)).startswith("1 attempt, ")


def test_showpolicies_unknown_name_is_a_clear_error() -> None:
    with pytest.raises(CommandError, match="unknown retry policy 'nope'"):
        run_command("showpolicies", "nope")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
@pytest.mark.parametrize("concurrency", [0, MAX_CONCURRENCY + 1, 10**9])
def test_runworker_concurrency_out_of_range_is_refused_before_any_thread_starts(concurrency: int) -> None:
    # Before: no upper bound; 10**9 made runner threads until the machine ran out of memory.
    job = jobs.record.enqueue("untouched")
    threads = threading.active_count()
    with pytest.raises(CommandError) as caught:
        run_command("runworker", "--concurrency", str(concurrency), "--burst", "--no-listen")
    assert str(caught.value) == (
        f"Error: argument --concurrency: {concurrency} is invalid: an integer from 1 to "
        f"{MAX_CONCURRENCY} (runner threads in one worker process)"
    )
    assert threading.active_count() == threads
    assert not WorkerProcess.objects.exists()
    assert Job.objects.get(pk=job.pk).attempts == 0


@pytest.mark.parametrize("concurrency", [0, MAX_CONCURRENCY + 1, 10**9, True, 2.0])
def test_worker_options_refuse_the_same_concurrencies(concurrency: object) -> None:
    with pytest.raises(
        ValueError, match=rf"^concurrency {concurrency!r} is invalid: an integer from 1 to 1000"
    ):
        WorkerOptions(concurrency=concurrency)  # type: ignore[arg-type]
    assert WorkerOptions(concurrency=MAX_CONCURRENCY).concurrency == MAX_CONCURRENCY


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_runworker_names_a_queue_nothing_uses_and_starts_anyway(caplog: pytest.LogCaptureFixture) -> None:
    waiting = jobs.record.using(queue_name="partner").enqueue("waits")
    caplog.set_level(logging.INFO, logger="django_jobretry")
    run_command("runworker", "--queue", "parnter", "--queue", "other", "--burst", "--no-listen")
    [warning] = [r for r in caplog.records if getattr(r, "outcome", None) == "unknown_queue"]
    assert warning.getMessage() == (
        "--queue 'parnter': no job has this queue and no registered task declares it; "
        "the worker waits for its first job. Did you mean 'partner'?"
    )
    assert warning.queue == "parnter"  # type: ignore[attr-defined]
    # "other" is declared by a registered task: no warning. The worker ran, and found nothing due.
    messages = [r.getMessage() for r in caplog.records]
    assert messages.index(warning.getMessage()) < next(
        i for i, m in enumerate(messages) if m.endswith(" started")
    )
    assert Job.objects.get(pk=waiting.pk).attempts == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_runworker_is_quiet_about_queues_that_have_jobs(caplog: pytest.LogCaptureFixture) -> None:
    jobs.record.using(queue_name="partner").enqueue("runs")
    caplog.set_level(logging.WARNING, logger="django_jobretry")
    run_command("runworker", "--queue", "partner", "--burst", "--no-listen")
    assert [r for r in caplog.records if getattr(r, "outcome", None) == "unknown_queue"] == []
    assert Job.objects.get().status == "succeeded"
