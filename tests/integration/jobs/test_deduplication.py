"""Deduplication v2 (issue 24): keys from arguments, unique_for windows and conflict modes, on PostgreSQL.

Windows are moved by the database clock (a job's ``finished_at`` set back),
never by sleeping.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.db.models.functions import Now

from django_jobretry import deadletters, job
from django_jobretry.conf.uniqueness import Uniqueness
from django_jobretry.exceptions import InvalidJob, JobConflict, RequeueConflict
from django_jobretry.jobs import retention
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.testing import run_jobs
from django_jobretry.validation import UNIQUE_KEY_MAX
from tests.jobs_app import jobs, unique_jobs

pytestmark = pytest.mark.django_db


def succeed_all() -> None:
    run_jobs()
    assert not Job.objects.exclude(status=JobStatus.SUCCEEDED).exists()


def finished_ago(job_id: int, ago: timedelta) -> None:
    """Move a succeeded job's end back by ``ago`` on the database clock."""
    Job.objects.filter(pk=job_id).update(finished_at=Now() - ago)


class TestKeysFromArguments:
    def test_one_order_is_one_live_job_however_the_call_is_written(self) -> None:
        first = unique_jobs.receipt.enqueue(7)
        digest = hashlib.sha256(b'tests.jobs_app.unique_jobs.receipt\0{"order_id":7}').hexdigest()
        assert first.unique_key == f"tests.jobs_app.unique_jobs.receipt:{digest}"
        same = [
            unique_jobs.receipt.enqueue(order_id=7),
            unique_jobs.receipt.enqueue(7, "accounting"),  # another copy: not part of the key
            unique_jobs.receipt.enqueue(7, note="again"),
        ]
        assert {job.pk for job in same} == {first.pk}
        assert Job.objects.get().args == [7]  # the first call's arguments, untouched
        other = unique_jobs.receipt.enqueue(8)
        assert other.pk != first.pk
        assert Job.objects.count() == 2

    def test_a_key_shows_no_argument_and_fits_the_column_whatever_the_values(self) -> None:
        """Keys are shown to every viewer of jobs; arguments only to those who may read them."""
        secret = "jane.doe@example.com " * 30
        long = unique_jobs.receipt.enqueue(secret)
        assert long.unique_key is not None
        assert "jane" not in long.unique_key
        assert len(long.unique_key) == len("tests.jobs_app.unique_jobs.receipt:") + 64
        assert unique_jobs.receipt.enqueue(order_id=secret).pk == long.pk
        assert unique_jobs.receipt.enqueue(secret[:-1]).pk != long.pk

    def test_a_long_task_name_is_cut_in_the_key_not_in_the_digest(self) -> None:
        unique = Uniqueness(args=("a",))
        name, other = "t" * 199 + "1", "t" * 199 + "2"
        key = unique.key_for(name, lambda a: None, (1,), {})
        assert key is not None
        assert len(key) == UNIQUE_KEY_MAX
        assert key != unique.key_for(other, lambda a: None, (1,), {})

    def test_a_fixed_key_wins_over_the_arguments(self) -> None:
        keyed = unique_jobs.receipt.using(unique_key="all-receipts")
        assert keyed.enqueue(1).pk == keyed.enqueue(2).pk
        assert Job.objects.get().unique_key == "all-receipts"

    def test_once_the_job_succeeded_the_key_is_free_without_a_window(self) -> None:
        first = unique_jobs.receipt.enqueue(7)
        succeed_all()
        assert unique_jobs.receipt.enqueue(7).pk != first.pk


class TestDeclarations:
    @pytest.mark.parametrize(
        ("options", "message"),
        [
            (
                {"unique_args": ("order",)},
                r"unique_args \['order'\] names 'order', which f\(\) does not take",
            ),
            ({"unique_args": "1x"}, r"unique_args '1x' is invalid: a tuple of argument names"),
            ({"unique_args": ("a", "a")}, r"unique_args \('a', 'a'\) names an argument twice"),
            ({"unique_args": ("a",), "unique_for": timedelta(0)}, r"unique_for datetime.timedelta\(0\) is"),
            ({"unique_args": ("a",), "unique_for": "1h"}, r"unique_for '1h' is invalid: a timedelta"),
            (
                {"on_conflict": "ignore"},
                r"on_conflict 'ignore' is invalid: one of 'return_existing', 'raise'",
            ),
            ({"unique_for": 60}, r"unique_for and on_conflict apply to a keyed enqueue: give unique_args"),
            ({"on_conflict": "raise"}, r"unique_for and on_conflict apply to a keyed enqueue"),
        ],
    )
    def test_a_bad_option_is_refused_at_import_naming_the_job(
        self, options: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(InvalidJob, match=rf"^@job dedup\.f: {message}"):

            @job(name="dedup.f", **options)
            def f(a: int) -> None: ...

    def test_using_checks_its_options_too(self) -> None:
        with pytest.raises(InvalidJob, match=r"^on_conflict 'skip' is invalid"):
            unique_jobs.receipt.using(on_conflict="skip")  # type: ignore[arg-type]
        with pytest.raises(InvalidJob, match=r"^unique_for -5 is invalid"):
            unique_jobs.receipt.using(unique_for=-5)
        with pytest.raises(InvalidJob, match=r"^unique_for and on_conflict apply to a keyed enqueue"):
            jobs.record.using(unique_for=60)
        assert jobs.record.using(unique_key="k", unique_for=60).unique.window == timedelta(minutes=1)

    def test_bulk_enqueue_refuses_keyed_jobs_and_stores_nothing(self) -> None:
        with pytest.raises(InvalidJob, match=r"bulk_enqueue does not take unique_key or unique_args"):
            unique_jobs.receipt.bulk_enqueue([((1,), {}), ((2,), {})])
        assert not Job.objects.exists()

    def test_a_default_that_is_not_json_is_a_clear_error(self) -> None:
        @job(name="dedup.g", unique_args=("when",))
        def g(when: object = object()) -> None: ...

        with pytest.raises(InvalidJob, match=r"unique_args \['when'\] take a value that is not JSON"):
            g.enqueue()
        assert not Job.objects.exists()


class TestConflictModes:
    def test_raise_names_the_job_holding_the_key_and_stores_nothing(self) -> None:
        first = unique_jobs.refund.enqueue(5)
        with pytest.raises(
            JobConflict, match=rf"is held by job {first.pk} \(ready\): nothing was enqueued"
        ) as e:
            unique_jobs.refund.enqueue(5)
        assert (e.value.job_id, e.value.status) == (first.pk, "ready")
        assert Job.objects.count() == 1

    def test_raise_inside_a_transaction_keeps_the_transaction(self) -> None:
        first = unique_jobs.refund.enqueue(5)
        with transaction.atomic():
            with pytest.raises(JobConflict):
                unique_jobs.refund.enqueue(5)
            other = unique_jobs.refund.enqueue(6)  # the transaction is still usable
        assert set(Job.objects.values_list("pk", flat=True)) == {first.pk, other.pk}

    def test_replace_gives_a_ready_job_the_new_call(self) -> None:
        first = unique_jobs.sync.enqueue(3, "monday")
        later = unique_jobs.sync.using(run_after=timedelta(hours=2)).enqueue(3, since="tuesday")
        assert later.pk == first.pk
        stored = Job.objects.get()
        assert (stored.args, stored.kwargs) == ([3], {"since": "tuesday"})
        assert stored.run_at > first.run_at + timedelta(hours=1)
        assert (later.args, later.kwargs, later.run_at) == (stored.args, stored.kwargs, stored.run_at)

    def test_replace_leaves_a_running_job_alone(self) -> None:
        first = unique_jobs.sync.enqueue(3, "monday")
        running = {"status": JobStatus.RUNNING, "lease_token": uuid.uuid4(), "lease_expires_at": Now()}
        Job.objects.filter(pk=first.pk).update(**running)
        again = unique_jobs.sync.enqueue(3, "tuesday")
        assert again.pk == first.pk
        assert Job.objects.get().kwargs == {}  # still monday, positional
        assert Job.objects.get().args == [3, "monday"]


class TestWindows:
    def test_a_succeeded_job_holds_its_key_for_unique_for(self) -> None:
        first = unique_jobs.invoice.enqueue(9)
        succeed_all()
        again = unique_jobs.invoice.enqueue(9)
        assert again.pk == first.pk
        assert again.status == JobStatus.SUCCEEDED
        assert Job.objects.count() == 1
        with pytest.raises(JobConflict, match=rf"held by job {first.pk} \(succeeded\)"):
            unique_jobs.invoice.using(on_conflict="raise").enqueue(9)
        assert unique_jobs.invoice.enqueue(9, "accounting").pk != first.pk  # another key

    def test_once_the_window_passed_the_key_is_free(self) -> None:
        first = unique_jobs.invoice.enqueue(9)
        succeed_all()
        finished_ago(first.pk, timedelta(minutes=59))
        assert unique_jobs.invoice.enqueue(9).pk == first.pk
        finished_ago(first.pk, timedelta(minutes=61))
        assert unique_jobs.invoice.enqueue(9).pk != first.pk

    def test_the_live_holder_comes_before_a_succeeded_one(self) -> None:
        first = unique_jobs.invoice.enqueue(9)
        succeed_all()
        live = jobs.record.using(unique_key=first.unique_key).enqueue("no window")  # another task, no window
        assert live.pk != first.pk
        assert unique_jobs.invoice.enqueue(9).pk == live.pk

    def test_the_window_is_the_enqueues(self) -> None:
        first = unique_jobs.invoice.enqueue(9)
        succeed_all()
        finished_ago(first.pk, timedelta(minutes=30))
        assert unique_jobs.invoice.using(unique_for=timedelta(minutes=10)).enqueue(9).pk != first.pk

    def test_a_windowed_enqueue_rolled_back_leaves_nothing_and_frees_the_key(self) -> None:
        def order_not_saved() -> None:
            with transaction.atomic():
                unique_jobs.invoice.enqueue(9)
                raise RuntimeError("the order was not saved")

        with pytest.raises(RuntimeError):
            order_not_saved()
        assert not Job.objects.exists()
        assert unique_jobs.invoice.enqueue(9).status == JobStatus.READY

    def test_retention_keeps_a_job_until_its_window_is_over(self) -> None:
        first = unique_jobs.invoice.enqueue(9)
        plain = unique_jobs.receipt.enqueue(9)
        succeed_all()
        Job.objects.update(finished_at=Now() - timedelta(minutes=30))
        assert retention.prune_succeeded(timedelta(minutes=1)) == 1  # the receipt; the invoice holds its key
        assert list(Job.objects.values_list("pk", flat=True)) == [first.pk]
        assert plain.pk != first.pk
        finished_ago(first.pk, timedelta(minutes=61))
        assert retention.prune_succeeded(timedelta(minutes=1)) == 1
        assert not Job.objects.exists()


class TestRequeue:
    def dead_invoice(self) -> DeadLetter:
        """A dead letter of an invoice job, as a job that ran out of attempts leaves it."""
        enqueued = unique_jobs.invoice.enqueue(9)
        dead = DeadLetter.objects.create(
            job_id=enqueued.pk,
            task_name=enqueued.task_name,
            queue_name="default",
            policy_name="three",
            reason="exhausted",
            attempts=3,
            max_attempts=3,
            enqueued_at=enqueued.enqueued_at,
            unique_key=enqueued.unique_key,
            unique_for=timedelta(hours=1),
        )
        Job.objects.filter(pk=enqueued.pk).delete()
        return dead

    def test_a_dead_letter_whose_work_succeeded_within_its_window_is_refused(self) -> None:
        dead = self.dead_invoice()
        done = unique_jobs.invoice.enqueue(9)  # the work was enqueued again and succeeded
        succeed_all()
        with pytest.raises(
            RequeueConflict, match=r"unique key '.*' is taken until .* UTC \(unique_for\)"
        ) as caught:
            deadletters.requeue(dead.pk, actor="ops")
        assert caught.value.until is not None
        assert DeadLetter.objects.filter(pk=dead.pk).exists()
        assert deadletters.predicted_conflicts([dead]) == {dead.pk}
        finished_ago(done.pk, timedelta(minutes=61))
        assert deadletters.predicted_conflicts([DeadLetter.objects.get(pk=dead.pk)]) == set()
        revived = deadletters.requeue(dead.pk, actor="ops")
        assert isinstance(revived, Job)
        assert (revived.unique_key, revived.unique_for) == (done.unique_key, timedelta(hours=1))
