"""The dashboard answers "what is dying" (issue 18.5): per task and per error class, deaths not rows kept.

Deaths are made the real way here (a worker's burial, a lease recovery, a
cancel, the django-q2 adapter's burial), so what is counted is what the
burial statements write (models/dead_letter.py). The dashboard's figures are
then checked after requeues and discards, which must not lower them, and
every count's link is followed to the list it promises.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_jobretry import FatalError
from django_jobretry import deadletters as service
from django_jobretry.console import trends
from django_jobretry.deadletters import admin_pages as dying
from django_jobretry.deadletters.external import (
    ExternalDeadLetter,
    bury_external,
    import_dead_letters,
)
from django_jobretry.jobs import recovery
from django_jobretry.jobs.recovery import cancel_jobs
from django_jobretry.models import DeadLetter, DeadReason, Death, Job
from tests.attempts import fail_attempt, kill, record_failure
from tests.factories import JobFactory, history_entry
from tests.integration.conftest import CHANGELIST, Operator
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:django_jobretry_deadletter_dashboard"
JOBS = "admin:django_jobretry_job_changelist"
#: The dashboard's round trips (a viewer, a queue, two dead letters): 30 before issue 18, when the
#: hourly and the daily chart were a block of their own each; one block reads every death figure now.
#: One more since issue 21: whether anything is held (the Held panel reads more only then).
#: One more since issue 22: the top failure groups of the last 24 hours, one statement.
#: Twelve more since issue 36: the Limits panel, `jobstatus`' statements - two per declared limit,
#: three per per-key limit; the test app declares four (one an ``async def`` job) and two.
ROUND_TRIPS = 43


class PartnerRejectedError(Exception):
    """A user exception, named by its own module path in the history."""


def die_fatally(count: int, key: str = "k") -> list[DeadLetter]:
    """``count`` jobs of tests.jobs_app.jobs.fatal, each dead of a FatalError after one attempt."""
    return [kill(jobs.fatal, key=f"{key}{n}") for n in range(count)]


class TestDeathsAreCountedWhereJobsDie:
    def test_each_burial_path_writes_one_death(self) -> None:
        dead = kill(jobs.fatal, "worker")
        # A lease lost on the last attempt: buried by recovery.
        lost = JobFactory.create(
            running=True, attempts=3, max_attempts=3, task_name="tests.jobs_app.jobs.record"
        )
        Job.objects.filter(pk=lost.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        recovery.recover_expired(10, 20)
        # A ready job cancelled by an operator: buried as cancelled.
        ready = JobFactory.create(task_name="tests.jobs_app.jobs.flaky", queue_name="mail")
        cancel_jobs([ready.pk], actor="alice")
        rows = sorted(Death.objects.values_list("task_name", "queue_name", "reason", "error_class"))
        assert rows == [
            ("tests.jobs_app.jobs.fatal", "default", "fatal", dead.last_error_class),
            ("tests.jobs_app.jobs.flaky", "mail", "cancelled", ""),
            ("tests.jobs_app.jobs.record", "default", "lease_expired", ""),
        ]
        assert dead.last_error_class == "django_jobretry.exceptions.FatalError"
        # Each death at its dead letter's time, to the microsecond (the same statement).
        kept = DeadLetter.objects.get(pk=dead.pk)
        assert Death.objects.get(reason="fatal").died_at == kept.dead_at

    def test_the_django_q2_adapters_burial_counts_and_an_import_does_not(self) -> None:
        entry: Any = {**history_entry(3, "exhausted", last=True), "error_class": "shop.Timeout"}

        def letter(external_id: str) -> ExternalDeadLetter:
            return ExternalDeadLetter(
                source="django_q2",
                external_id=external_id,
                task_name="shop.q2_task",
                queue_name="q2",
                policy_name="q2",
                args=[],
                kwargs={},
                reason=DeadReason.EXHAUSTED,
                attempts=3,
                max_attempts=3,
                errors=[entry],
                enqueued_at=timezone.now(),
                dead_at=None,
            )

        dead = bury_external(letter("a1"))
        import_dead_letters([letter("b2")])  # failures of the past, brought over: no death now
        assert DeadLetter.objects.count() == 2
        assert list(Death.objects.values_list("task_name", "reason", "error_class")) == [
            ("shop.q2_task", "exhausted", "shop.Timeout")
        ]
        assert dead.last_error_class == "shop.Timeout"

    def test_a_stale_burial_counts_nothing(self) -> None:
        jobs.fatal.enqueue("stale")
        claimed = fail_attempt(FatalError("first"))  # buried: the job row is gone
        assert Death.objects.count() == 1
        record_failure(claimed, FatalError("again"))  # the same attempt again: fenced out
        assert (Death.objects.count(), DeadLetter.objects.count()) == (1, 1)

    def test_old_deaths_are_pruned_with_the_samples(self) -> None:
        die_fatally(1)
        old = timezone.now() - trends.SAMPLES_KEPT - timedelta(minutes=1)
        Death.objects.create(died_at=old, task_name="t", queue_name="q", reason=DeadReason.FATAL)
        trends.take_sample()
        assert list(Death.objects.values_list("task_name", flat=True)) == ["tests.jobs_app.jobs.fatal"]


class TestWhatIsDying:
    def test_requeues_and_discards_do_not_lower_the_counts(self, viewer: Operator) -> None:
        dead = die_fatally(16)
        for letter in dead[:7]:
            service.requeue(letter.pk, actor="alice")
        service.discard(dead[7].pk, actor="alice")
        assert DeadLetter.objects.count() == 8
        context = viewer.get(reverse(DASHBOARD)).context
        assert str(context["hourly"].total) == "16"  # it was 8: the dead letters kept
        assert str(context["daily"].total) == "16"
        (task,) = context["dying"]["tasks"]["rows"]
        assert task["name"] == "tests.jobs_app.jobs.fatal"
        assert (str(task["last_hour"].count), str(task["last_day"].count)) == ("16", "16")
        # The requeued jobs are ready with no attempt made: not "retrying" (ready after a failed attempt).
        assert str(task["retrying"].count) == "0"

    def test_per_task_and_per_error_with_links_to_the_filtered_lists(self, viewer: Operator) -> None:
        die_fatally(2)
        long_ago = timezone.now() - timedelta(hours=5)
        Death.objects.create(
            died_at=long_ago,
            task_name="shop.sync",
            queue_name="q",
            reason="exhausted",
            error_class="shop.Timeout",
        )
        JobFactory.create(retrying=True, task_name="shop.sync")
        response = viewer.get(reverse(DASHBOARD))
        tasks = {row["name"]: row for row in response.context["dying"]["tasks"]["rows"]}
        assert list(tasks) == ["tests.jobs_app.jobs.fatal", "shop.sync"]  # most deaths in the last hour first
        sync = tasks["shop.sync"]
        assert [str(sync[k].count) for k in ("last_hour", "last_day", "retrying")] == ["0", "1", "1"]
        assert sync["last_hour"].url is None  # nothing to list
        # The 24-hour count opens the dead letters of that task since then (none kept: made by hand).
        query = parse_qs(urlsplit(sync["last_day"].url).query)
        assert query["task_name"] == ["shop.sync"]
        assert set(query) == {"task_name", "dead_at__gte"}
        # "Retrying now" opens the job list's retrying jobs of that task: exactly that job.
        retrying = viewer.get(sync["retrying"].url)
        assert retrying.status_code == 200
        assert [job.task_name for job in retrying.context["cl"].result_list] == ["shop.sync"]
        # The fatal task's last-hour link lists its two dead letters.
        fatal = viewer.get(tasks["tests.jobs_app.jobs.fatal"]["last_hour"].url)
        assert fatal.status_code == 200
        assert len(fatal.context["cl"].result_list) == 2
        errors = {row["name"]: row for row in response.context["dying"]["errors"]["rows"]}
        assert list(errors) == ["django_jobretry.exceptions.FatalError", "shop.Timeout"]
        by_class = viewer.get(errors["django_jobretry.exceptions.FatalError"]["last_hour"].url)
        assert by_class.status_code == 200
        assert len(by_class.context["cl"].result_list) == 2
        html = response.text
        assert html.index('id="dying"') < html.index('id="queues"')  # first on the page
        assert 'title="shop.Timeout">' in html

    def test_a_death_without_an_exception_is_listed_without_a_link(self, viewer: Operator) -> None:
        Death.objects.create(task_name="t", queue_name="q", reason=DeadReason.LEASE_EXPIRED)
        (row,) = viewer.get(reverse(DASHBOARD)).context["dying"]["errors"]["rows"]
        assert (row["name"], row["url"], row["last_hour"].url) == (dying.NO_EXCEPTION, None, None)

    def test_the_tables_show_the_most_dying_first_and_count_the_rest(self, viewer: Operator) -> None:
        shown = dying.ROWS_SHOWN
        Death.objects.bulk_create(
            Death(task_name=f"t{n:02}", queue_name="q", reason=DeadReason.FATAL, error_class=f"E{n:02}")
            for n in range(shown + 2)
            for _ in range(n + 1)  # task t05 died 6 times
        )
        response = viewer.get(reverse(DASHBOARD))
        tasks = response.context["dying"]["tasks"]
        assert [row["name"] for row in tasks["rows"]] == [f"t{n:02}" for n in range(shown + 1, 1, -1)]
        assert tasks["more"] == 2
        assert "… and 2 more tasks." in response.text
        assert "… and 2 more error classes." in response.text

    def test_nothing_dying(self, viewer: Operator) -> None:
        html = viewer.get(reverse(DASHBOARD)).text
        assert "No job died in the last 24 hours, and none is retrying." in html

    def test_round_trips_stay_at_most_as_before(self, viewer: Operator) -> None:
        die_fatally(2)
        JobFactory.create(retrying=True)
        viewer.get(reverse(DASHBOARD))  # sessions and permissions cached alike
        with CaptureQueriesContext(connection) as queries:
            assert viewer.get(reverse(DASHBOARD)).status_code == 200
        assert len(queries) <= ROUND_TRIPS, [q["sql"][:60] for q in queries]


class TestReachableFromTheAdminIndex:
    def test_the_index_and_the_sidebar_lead_to_the_dashboard(self, viewer: Operator) -> None:
        link = reverse("admin:django_jobretry_dashboard_changelist")
        assert f'href="{link}"' in viewer.get(reverse("admin:index")).text
        response = viewer.get(link)
        assert (response.status_code, response["Location"]) == (302, reverse(DASHBOARD))

    def test_the_app_index_says_what_is_dying(self, viewer: Operator) -> None:
        die_fatally(3)
        JobFactory.create(retrying=True)
        html = viewer.get(reverse("admin:app_list", args=["django_jobretry"])).text
        line = html[html.index('id="jobretry-dying-now"') :].split("</p>")[0]
        assert f'href="{reverse(DASHBOARD)}"' in line
        assert '<strong class="jobretry-dead">3</strong> died in the last hour' in line
        assert "3 in the last 24 hours; 1 retrying now." in line

    def test_hidden_without_the_dead_letter_view_permission(self, make_user: Any) -> None:
        jobs_only = Operator(make_user("view_job", name="jobs-only"))
        link = reverse("admin:django_jobretry_dashboard_changelist")
        assert link not in jobs_only.get(reverse("admin:index")).text
        assert jobs_only.get(link).status_code == 403
        app_index = jobs_only.get(reverse("admin:app_list", args=["django_jobretry"])).text
        assert "jobretry-dying-now" not in app_index


class TestErrorClassFilter:
    def test_filters_the_dead_letters_by_last_error_class(self, viewer: Operator) -> None:
        die_fatally(1)
        url = reverse(CHANGELIST)
        page = viewer.get(url)
        assert "?last_error_class=django_jobretry.exceptions.FatalError" in page.text
        assert len(viewer.get(url, {"last_error_class": "nope"}).context["cl"].result_list) == 0
