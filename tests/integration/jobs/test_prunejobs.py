"""prunejobs: deletes old succeeded jobs only; dead letters and live jobs stay."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from django_jobretry.jobs import retention
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.factories import DeadLetterFactory
from tests.integration.conftest import run_command
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db


def finished(days_ago: float) -> Job:
    job = jobs.record.enqueue(f"done-{days_ago}")
    when = Now() - Value(timedelta(days=days_ago), output_field=DurationField())
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, finished_at=when)
    return job


def test_prunes_only_old_succeeded_jobs() -> None:
    old, recent = finished(10), finished(1)
    live = jobs.record.enqueue("live")
    Job.objects.filter(pk=live.pk).update(finished_at=Now() - Value(timedelta(days=30)))
    dead = DeadLetterFactory.create()
    assert (
        run_command("prunejobs", "--older-than", "7d")
        == "deleted 1 succeeded job(s) finished more than 7 days, 0:00:00 ago\n"
    )
    assert set(Job.objects.values_list("pk", flat=True)) == {recent.pk, live.pk}
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert not Job.objects.filter(pk=old.pk).exists()


def test_default_age_comes_from_settings(settings: Any) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "SUCCEEDED_RETENTION_DAYS": 0.5}
    finished(1)
    finished(0.1)
    assert run_command("prunejobs").startswith("deleted 1 ")


def test_dry_run_deletes_nothing() -> None:
    finished(10)
    assert run_command("prunejobs", "--older-than", "12h", "--dry-run").startswith("would delete 1 ")
    assert Job.objects.count() == 1


@pytest.mark.parametrize("age", ["7", "7 days", "-1d", "1w"])
def test_bad_age_is_a_clear_error(age: str) -> None:
    with pytest.raises(CommandError, match="is not a duration like 30d"):
        run_command("prunejobs", f"--older-than={age}")


def dead(days_ago: float, reason: str = "fatal") -> DeadLetter:
    letter = DeadLetterFactory.create(reason=reason)
    when = Now() - Value(timedelta(days=days_ago), output_field=DurationField())
    DeadLetter.objects.filter(pk=letter.pk).update(dead_at=when)
    return letter


def test_dead_letters_are_kept_unless_retention_is_configured() -> None:
    dead(400)
    assert "dead letter" not in run_command("prunejobs")
    assert DeadLetter.objects.count() == 1


def test_dead_letter_retention_logs_and_signals_counts_before_deleting(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from django_jobretry import signals

    settings.JOBRETRY = {**settings.JOBRETRY, "DEAD_LETTER_RETENTION_DAYS": 30}
    old_fatal, old_exhausted, recent = dead(40), dead(31, "exhausted"), dead(2)
    seen: list[dict[tuple[str, str], int]] = []

    def receiver(sender: Any, counts: dict[tuple[str, str], int], **kwargs: Any) -> None:
        # Sent before deleting: the rows are still there.
        assert DeadLetter.objects.filter(pk=old_fatal.pk).exists()
        seen.append(counts)

    signals.dead_letters_pruning.connect(receiver)
    try:
        caplog.set_level("WARNING", "django_jobretry")
        text = run_command("prunejobs")
    finally:
        signals.dead_letters_pruning.disconnect(receiver)
    assert seen == [{("default", "fatal"): 1, ("default", "exhausted"): 1}]
    assert "deleted 2 dead letter(s)" in text
    assert "pruning 2 dead letters" in caplog.text
    assert list(DeadLetter.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not DeadLetter.objects.filter(pk__in=[old_fatal.pk, old_exhausted.pk]).exists()


def test_dead_letter_dry_run_counts_only() -> None:
    dead(40)
    assert "would delete 1 dead letter(s)" in run_command(
        "prunejobs", "--dead-letters-older-than=30d", "--dry-run"
    )
    assert DeadLetter.objects.count() == 1


@pytest.mark.parametrize("what", ["dead letters", "succeeded jobs"])
def test_pruning_goes_in_bounded_batches(monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    monkeypatch.setattr(retention, "PRUNE_BATCH", 2)
    for _ in range(5):
        if what == "dead letters":
            dead(40)
        else:
            finished(days_ago=40)
    with CaptureQueriesContext(connection) as captured:
        if what == "dead letters":
            assert sum(retention.prune_dead_letters(timedelta(days=30)).values()) == 5
        else:
            assert retention.prune_succeeded(timedelta(days=30)) == 5
    deletes = [q["sql"] for q in captured.captured_queries if "DELETE FROM" in q["sql"]]
    locks = [q["sql"] for q in captured.captured_queries if "FOR UPDATE SKIP LOCKED" in q["sql"]]
    # 2 + 2 + 1, then a lock that finds nothing; a succeeded job's prune looks for workflows' too.
    assert (len(deletes), len(locks)) == (3, 5 if what == "succeeded jobs" else 4)
    assert all("LIMIT 2" in sql for sql in locks)
    assert not DeadLetter.objects.exists()
    assert not Job.objects.exists()
