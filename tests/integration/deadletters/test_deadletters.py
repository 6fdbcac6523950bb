"""The dead-letter service: listing, guarded requeue/discard, provenance, races."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from django_jobretry import FatalError, InvalidJob, NotDead, signals
from django_jobretry import deadletters as service
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.attempts import claim_one, fail_attempt, kill
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db


class TestList:
    def test_newest_dead_first_with_keyset_pages(self) -> None:
        dead = [kill(key=f"k{i}") for i in range(5)]
        first = service.list_dead(limit=2)
        assert [d.pk for d in first.items] == [dead[4].pk, dead[3].pk]
        second = service.list_dead(limit=2, after=first.next_cursor)
        third = service.list_dead(limit=2, after=second.next_cursor)
        assert [d.pk for d in second.items + third.items] == [dead[2].pk, dead[1].pk, dead[0].pk]
        assert third.next_cursor is None

    def test_a_page_iterates_over_its_dead_letters(self) -> None:
        dead = [kill(key=f"k{i}") for i in range(3)]
        page = service.list_dead(limit=2)
        assert list(page) == [dead[2], dead[1]]
        assert len(page) == 2
        assert [d.pk for d in page] == [d.pk for d in page.items]
        assert page.next_cursor is not None

    def test_filters(self) -> None:
        fatal = kill()
        exhausted = kill(key="x")
        DeadLetter.objects.filter(pk=exhausted.pk).update(reason="exhausted", queue_name="other")
        assert service.list_dead(task_name="nope").items == []
        assert service.list_dead(reason="fatal").items == [fatal]
        assert service.list_dead(queue_name="other").items == [exhausted]
        assert service.list_dead(task_name=jobs.fatal.name).items == [exhausted, fatal]
        with pytest.raises(ValueError, match="reason 'sad' is invalid"):
            service.list_dead(reason="sad")
        with pytest.raises(ValueError, match="limit 0 is invalid"):
            service.list_dead(limit=0)

    def test_since_takes_a_timedelta_or_an_aware_datetime(self) -> None:
        recent, old = kill(), kill(key="old")
        DeadLetter.objects.filter(pk=old.pk).update(dead_at=timezone.now() - timedelta(days=3))
        assert service.list_dead(since=timedelta(days=1)).items == [recent]
        assert service.list_dead(since=timezone.now() - timedelta(days=4)).items == [recent, old]
        with pytest.raises(
            ValueError, match="since '2025-01-31T00:00:00' is invalid: a datetime with a time zone"
        ):
            service.list_dead(since=datetime(2025, 1, 31))
        with pytest.raises(ValueError, match="since '1d' is invalid: a datetime or a timedelta"):
            service.filtered(since="1d")  # type: ignore[arg-type]

    def test_lists_attempts_and_last_error(self) -> None:
        dead = kill(key="payload")
        [listed] = service.list_dead().items
        assert (listed.pk, listed.attempts, listed.last_error) == (dead.pk, 1, "bad payload")

    def test_only_live_jobs_means_an_empty_list(self) -> None:
        jobs.record.enqueue("ready")
        jobs.record.enqueue("running")
        claim_one()
        assert service.list_dead().items == []


class TestRequeue:
    def test_requeue_makes_a_ready_job_with_provenance(self) -> None:
        dead = kill(key="again")
        job = service.requeue(dead.pk, actor="alice")
        assert (job.status, job.attempts, job.requeue_count, job.args, job.max_attempts) == (
            JobStatus.READY,
            0,
            1,
            ["again"],
            3,
        )
        [entry] = job.requeue_history
        assert (entry["dead_letter_id"], entry["by"], entry["reason"], entry["last_error"]) == (
            dead.pk,
            "alice",
            "fatal",
            "bad again",
        )
        assert "at" in entry
        assert not DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_a_job_that_dies_again_carries_its_history(self) -> None:
        first = kill(key="twice")
        service.requeue(first.pk, actor="alice")
        claimed = fail_attempt(FatalError("still bad"))
        second = DeadLetter.objects.get(job_id=claimed.id)
        assert second.requeue_count == 1
        assert [e["dead_letter_id"] for e in second.requeue_history] == [first.pk]

    def test_requeue_of_something_not_dead_fails_and_changes_nothing(self) -> None:
        dead = kill()
        service.discard(dead.pk)
        before = (Job.objects.count(), DeadLetter.objects.count())
        with pytest.raises(NotDead, match=f"dead letter {dead.pk} is not dead any more"):
            service.requeue(dead.pk)
        with pytest.raises(NotDead):
            service.requeue(10**9)
        assert (Job.objects.count(), DeadLetter.objects.count()) == before

    def test_requeue_with_run_after(self) -> None:
        job = service.requeue(kill().pk, run_after=timedelta(hours=1))
        assert job.run_at - job.enqueued_at > timedelta(minutes=59)

    @pytest.mark.parametrize("requeue", [service.requeue, lambda pk, **kw: service.requeue_many([pk], **kw)])
    def test_a_run_after_no_process_could_read_back_is_refused_and_changes_nothing(
        self, requeue: Callable[..., Any]
    ) -> None:
        dead = kill()
        with pytest.raises(InvalidJob, match=r"run_after .* is out of range: now plus this delay"):
            requeue(dead.pk, run_after=timedelta(days=10**8))
        assert DeadLetter.objects.filter(pk=dead.pk).exists()
        assert not Job.objects.filter(status=JobStatus.READY).exists()

    def test_requeue_refuses_to_duplicate_a_live_unique_key(self) -> None:
        dead = kill()
        DeadLetter.objects.filter(pk=dead.pk).update(unique_key="invoice-7")
        jobs.record.using(unique_key="invoice-7").enqueue("live")
        with pytest.raises(service.RequeueConflict, match="invoice-7"):
            service.requeue(dead.pk)
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_signal_is_sent(self) -> None:
        received: list[dict[str, Any]] = []

        def receiver(sender: Any, **kwargs: Any) -> None:
            received.append(kwargs)

        signals.job_requeued.connect(receiver)
        try:
            job = service.requeue(kill().pk, actor="bob")
        finally:
            signals.job_requeued.disconnect(receiver)
        assert [(r["job_id"], r["actor"], r["requeue_count"]) for r in received] == [(job.pk, "bob", 1)]


class TestDiscard:
    def test_discarded_is_gone_and_a_second_discard_says_so(self) -> None:
        dead = kill()
        service.discard(dead.pk, actor="alice")
        assert not DeadLetter.objects.filter(pk=dead.pk).exists()
        with pytest.raises(NotDead):
            service.discard(dead.pk)
        assert Job.objects.count() == 0


class TestBulk:
    def test_bulk_reports_what_was_already_handled(self) -> None:
        dead = [kill(key=f"k{i}") for i in range(4)]
        service.discard(dead[0].pk)
        result = service.requeue_many([d.pk for d in dead], actor="ops")
        assert result.done == [d.pk for d in dead[1:]]
        assert result.already_handled == [dead[0].pk]
        assert len(result.jobs) == 3
        assert service.discard_many([d.pk for d in dead]).already_handled == [d.pk for d in dead]

    def test_bulk_takes_a_queryset(self) -> None:
        for i in range(3):
            kill(key=f"k{i}")
        result = service.discard_many(service.filtered(reason="fatal"))
        assert len(result.done) == 3
        assert DeadLetter.objects.count() == 0


def race(first: Callable[[], object], second: Callable[[], object]) -> list[object]:
    """Run two actions at the same moment on two threads (two connections); results in order."""
    barrier = threading.Barrier(2, timeout=20)
    results: list[object] = [None, None]

    def run(index: int, action: Callable[[], object]) -> None:
        try:
            barrier.wait()
            results[index] = action()
        except Exception as exc:
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a racing action hung"
    return results


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(20))
def test_two_concurrent_requeues_make_exactly_one_job(round_: int) -> None:
    dead = kill(key=f"race-{round_}")
    results = race(lambda: service.requeue(dead.pk, actor="a"), lambda: service.requeue(dead.pk, actor="b"))
    winners = [r for r in results if isinstance(r, Job)]
    losers = [r for r in results if isinstance(r, NotDead)]
    assert (len(winners), len(losers)) == (1, 1), results
    assert Job.objects.filter(args=[f"race-{round_}"]).count() == 1
    assert DeadLetter.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(20))
def test_requeue_racing_discard_has_exactly_one_effect(round_: int) -> None:
    dead = kill(key=f"race-{round_}")
    results = race(lambda: service.requeue(dead.pk), lambda: service.discard(dead.pk))
    assert sum(isinstance(r, NotDead) for r in results) == 1, results
    requeued = isinstance(results[0], Job)
    assert Job.objects.count() == (1 if requeued else 0)
    assert DeadLetter.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_overlapping_bulk_requeues_split_the_work_without_duplicates() -> None:
    ids = [kill(key=f"bulk-{i}").pk for i in range(30)]
    results = race(lambda: service.requeue_many(ids), lambda: service.requeue_many(list(reversed(ids))))
    done = [pk for r in results for pk in r.done]  # type: ignore[attr-defined]
    handled = [pk for r in results for pk in r.already_handled]  # type: ignore[attr-defined]
    assert sorted(done) == sorted(ids)
    assert sorted(handled) == sorted(ids)
    assert Job.objects.count() == 30
