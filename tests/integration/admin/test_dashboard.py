"""The admin dashboard and the workers page, through Django's test client.

What an operator sees at 3 a.m.: per queue ready, retrying, running and dead
jobs, the oldest due job and the longest-running one, the workers (live and
lost), dead letters per reason and over time, and never a job's arguments.
The query plans behind these figures are in test_status_plans.py; real
workers in tests/features/operators.feature.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from django_jobretry import console
from django_jobretry.admin import dashboard
from django_jobretry.admin.dashboard import _hours
from django_jobretry.models import DeadLetter, Death, WorkerProcess
from tests.factories import (
    DeadLetterFactory,
    JobFactory,
    StatusSampleFactory,
    WorkerProcessFactory,
    error_history,
)
from tests.integration.admin.test_admin_security import HOSTILE_QUERIES
from tests.integration.conftest import CHANGELIST, Operator

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:django_jobretry_deadletter_dashboard"
WORKERS = "admin:django_jobretry_workerprocess_changelist"
SECRET = "hunter2"  # noqa: S105


def retrying(**fields: Any) -> Any:
    """A job waiting for its second attempt, in a minute."""
    return JobFactory.create(
        attempts=1,
        errors=error_history(1, "exhausted"),
        run_at=timezone.now() + timedelta(minutes=1),
        **fields,
    )


@pytest.fixture
def incident() -> dict[str, Any]:
    """Two queues: default with a backlog, a retry, a running job and dead letters; mail almost idle."""
    JobFactory.create_batch(2, run_at=timezone.now() - timedelta(minutes=2))
    retrying()
    running = JobFactory.create(running=True, started_at=timezone.now() - timedelta(minutes=5))
    JobFactory.create(succeeded=True, queue_name="mail")
    dead = [
        *DeadLetterFactory.create_batch(2),
        DeadLetterFactory.create(exhausted=True, queue_name="mail"),
        DeadLetterFactory.create(queue_name="mail", dead_at=timezone.now() - timedelta(days=3)),
    ]
    record_deaths(dead)
    return {"running": running}


def record_deaths(dead: list[DeadLetter]) -> None:
    """The Death rows the burials of ``dead`` would have written (factories write none)."""
    Death.objects.bulk_create(
        Death(
            died_at=row.dead_at,
            task_name=row.task_name,
            queue_name=row.queue_name,
            reason=row.reason,
            error_class=row.last_error_class,
        )
        for row in DeadLetter.objects.filter(pk__in=[row.pk for row in dead])
    )


@pytest.fixture
def page_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[datetime], None]:
    """Pins the instant the dashboard draws its hours from to the one the test placed its rows by.

    The page reads it from the database with its figures (``summary()["now"]``): left alone, a
    row placed in "this hour" fell in the bar before the last whenever an hour turned in between.
    """
    figures = dashboard.summary

    def pin(now: datetime) -> None:
        monkeypatch.setattr(dashboard, "summary", lambda site: {**figures(site), "now": now})

    return pin


@pytest.fixture
def watcher(make_user: Any) -> Operator:
    """May see the dashboard and the workers."""
    return Operator(make_user("view_deadletter", "view_workerprocess", name="watcher"))


class TestDashboard:
    def test_counts_latency_and_charts(self, viewer: Operator, incident: dict[str, Any]) -> None:
        response = viewer.get(reverse(DASHBOARD))
        assert response.status_code == 200
        context = response.context
        rows = {queue["row"].queue: queue["row"] for queue in context["queues"]}
        default, mail = rows["default"], rows["mail"]
        assert [str(c) for c in (default.ready, default.retrying, default.dead)] == ["2", "1", "2"]
        assert default.running == 1
        assert [str(c) for c in (mail.ready, mail.retrying, mail.dead)] == ["0", "0", "2"]
        assert default.oldest_due is not None
        assert default.oldest_due >= timedelta(minutes=2)  # the backlog's run_at, not the retry's
        assert mail.oldest_due is None  # nothing due
        assert default.longest_running_job == incident["running"].pk
        assert default.longest_running is not None
        assert default.longest_running >= timedelta(minutes=5)
        totals = context["totals"]
        assert [str(totals.ready), str(totals.retrying), totals.running, str(totals.dead)] == [
            "2",
            "1",
            1,
            "4",
        ]
        assert str(totals.succeeded_last_hour) == "1"
        assert {r["value"]: r["dead"].value for r in context["reasons"]}["fatal"] == 3
        assert (str(context["hourly"].total), len(context["hourly"].bars)) == ("3", 24)
        assert str(context["daily"].total) == "4"
        html = response.text
        job_url = reverse("admin:django_jobretry_job_change", args=[incident["running"].pk])
        assert f'href="{job_url}"' in html
        assert "?queue_name=default&amp;status=retrying" in html  # the job list's retrying filter
        assert "<svg" in html
        assert "<script" not in html.split('id="content-main"')[1]
        assert 'http-equiv="refresh"' not in html  # off by default

    def test_counts_stop_at_the_limit(self, viewer: Operator, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(console, "COUNT_LIMIT", 2)
        JobFactory.create_batch(3)
        for _ in range(3):
            retrying(queue_name="storm")
        retrying(queue_name="storm-done")
        context = viewer.get(reverse(DASHBOARD)).context
        rows = {queue["row"].queue: queue["row"] for queue in context["queues"]}
        assert (str(rows["default"].ready), str(rows["default"].retrying)) == ("2+", "0")
        # More retrying jobs than the limit: how many were never attempted is not counted.
        assert (str(rows["storm"].ready), str(rows["storm"].retrying)) == ("?", "2+")
        assert str(context["totals"].retrying) == "3+"
        assert str(context["totals"].ready) == "?"

    def test_chart_bars_stop_at_their_limit(
        self, viewer: Operator, monkeypatch: pytest.MonkeyPatch, page_clock: Callable[[datetime], None]
    ) -> None:
        monkeypatch.setattr(console, "BAR_LIMIT", 2)
        died = timezone.now()
        record_deaths(DeadLetterFactory.create_batch(3, dead_at=died))
        page_clock(died)  # the last bar is the hour they died in
        response = viewer.get(reverse(DASHBOARD))
        hourly = response.context["hourly"]
        assert (str(hourly.total), str(hourly.bars[-1].count), hourly.bars[-1].value) == ("2+", "2+", "2+")
        assert "Deaths per hour, last 24 hours: 2+" in response.text

    def test_shows_the_workers_to_those_who_may_see_them(self, watcher: Operator, viewer: Operator) -> None:
        live = WorkerProcessFactory.create(queues=["default", "mail"], running_jobs=3)
        lost = WorkerProcessFactory.create(lost=True)
        html = watcher.get(reverse(DASHBOARD)).text
        assert "Workers: 1 live, 1 lost" in html
        assert live.worker_id in html
        assert lost.worker_id in html
        assert "default, mail" in html
        assert "3/4" in html  # running of concurrency
        assert f'href="{reverse(WORKERS)}"' in html
        assert "Workers:" not in viewer.get(reverse(DASHBOARD)).text  # no view_workerprocess

    def test_never_shows_arguments(self, superuser: Operator) -> None:
        JobFactory.create(args=[SECRET], kwargs={"password": SECRET})
        JobFactory.create(running=True, args=[SECRET])
        DeadLetterFactory.create(args=[SECRET], kwargs={"password": SECRET})
        assert SECRET not in superuser.get(reverse(DASHBOARD)).text

    @pytest.mark.parametrize(("query", "seconds"), [("refresh=30", "30"), ("refresh=300", "300")])
    def test_auto_refresh_on_request(self, viewer: Operator, query: str, seconds: str) -> None:
        html = viewer.get(f"{reverse(DASHBOARD)}?{query}").text
        assert f'<meta http-equiv="refresh" content="{seconds}">' in html
        assert '<a href="?">off</a>' in html

    @pytest.mark.parametrize("value", ["abc", "1", "-30", "0", "30.0", "%00", "9" * 40, ""])
    def test_any_other_refresh_is_off(self, viewer: Operator, value: str) -> None:
        response = viewer.get(f"{reverse(DASHBOARD)}?refresh={value}")
        assert response.status_code == 200
        assert 'http-equiv="refresh"' not in response.text

    def test_needs_view_permission(self, make_user: Any, superuser: Operator) -> None:
        nobody = Operator(make_user("view_job"))
        assert nobody.get(reverse(DASHBOARD)).status_code == 403
        empty = superuser.get(reverse(DASHBOARD)).text
        assert "No jobs and no dead letters yet." in empty
        assert "No worker has registered" in empty

    def test_linked_from_the_changelist(self, superuser: Operator) -> None:
        page = superuser.get(reverse(CHANGELIST)).text
        assert f'href="{reverse(DASHBOARD)}"' in page


EMPTY = "No samples yet: samples are taken by running workers once a minute."


class TestSampledCharts:
    """Retrying jobs and dead letters kept over time, from the workers' samples (console/trends.py)."""

    def test_each_hour_shows_its_highest_sample_and_unsampled_hours_are_gaps(
        self, viewer: Operator, page_clock: Callable[[datetime], None]
    ) -> None:
        now = timezone.now()
        page_clock(now)
        starts, _ = _hours(now)
        three_hours_ago, this_hour = starts[-4], starts[-1]
        StatusSampleFactory.create(taken_at=three_hours_ago + timedelta(minutes=10), retrying=12, dead=7)
        StatusSampleFactory.create(taken_at=three_hours_ago + timedelta(minutes=20), retrying=5, dead=8)
        StatusSampleFactory.create(taken_at=this_hour, retrying=3, dead=9)
        StatusSampleFactory.create(
            taken_at=starts[0] - timedelta(minutes=1), retrying=99
        )  # before the window
        response = viewer.get(reverse(DASHBOARD))
        retrying, dead = response.context["sampled"]["retrying"], response.context["sampled"]["dead"]
        assert [(str(bar.count), bar.missing) for bar in retrying.bars[-4:]] == [
            ("12", False),
            ("0", True),
            ("0", True),
            ("3", False),
        ]
        assert [str(bar.count) for bar in dead.bars if not bar.missing] == ["8", "9"]
        assert sum(bar.missing for bar in retrying.bars) == 22
        html = response.text
        assert "Retrying jobs, last 24 hours: peak 12" in html
        assert "Dead letters kept, last 24 hours: peak 9" in html
        label = timezone.localtime(three_hours_ago).strftime("%a %H:00")
        assert f"<title>{label}: 12</title>" in html
        assert f"<title>{label}: 8</title>" in html
        assert html.count(": no sample</title>") == 2 * 22
        assert timezone.localtime(this_hour).strftime("%H:00") in html  # a tick label
        assert f"Last sample: {timezone.localtime(this_hour):%Y-%m-%d %H:%M}." in html
        assert EMPTY not in html

    def test_a_count_past_the_limit_shows_as_more(self, viewer: Operator) -> None:
        StatusSampleFactory.create(count_limit=10_000, retrying=10_001)
        response = viewer.get(reverse(DASHBOARD))
        assert "Retrying jobs, last 24 hours: peak 10,000+" in response.text
        assert response.context["sampled"]["retrying"].bars[-1].value == "10k+"

    def test_no_samples_yet(self, viewer: Operator) -> None:
        html = viewer.get(reverse(DASHBOARD)).text
        assert html.count(EMPTY) == 2
        assert "Retrying jobs, last 24 hours</h2>" in html
        assert "Last sample" not in html


class TestWorkersPage:
    def test_live_first_then_lost_with_status_from_the_database_clock(self, watcher: Operator) -> None:
        lost = WorkerProcessFactory.create(lost=True)
        live = WorkerProcessFactory.create(queues=["mail"])
        response = watcher.get(reverse(WORKERS))
        assert response.status_code == 200
        assert [row.worker_id for row in response.context["cl"].result_list] == [
            live.worker_id,
            lost.worker_id,
        ]
        html = response.text
        assert '<span class="jobretry-dead">lost</span>' in html
        assert '<td class="field-queue_list">mail</td>' in html
        only_lost = watcher.get(reverse(WORKERS), {"status": "lost"}).context["cl"].result_list
        assert [row.worker_id for row in only_lost] == [lost.worker_id]

    def test_read_only_and_behind_its_view_permission(
        self, watcher: Operator, superuser: Operator, viewer: Operator
    ) -> None:
        worker = WorkerProcessFactory.create()
        assert viewer.get(reverse(WORKERS)).status_code == 403
        detail = reverse("admin:django_jobretry_workerprocess_change", args=[worker.pk])
        assert watcher.get(detail).status_code == 200
        assert superuser.get(reverse("admin:django_jobretry_workerprocess_add")).status_code == 403
        delete = reverse("admin:django_jobretry_workerprocess_delete", args=[worker.pk])
        assert superuser.get(delete).status_code == 403
        assert superuser.post(detail, {"host": "elsewhere"}).status_code == 403
        assert WorkerProcess.objects.get().host == "factory-host"

    @pytest.mark.parametrize("query", [*HOSTILE_QUERIES, "status=%00", "status=dead", "host=%00"])
    def test_no_query_string_makes_a_server_error(self, superuser: Operator, query: str) -> None:
        WorkerProcessFactory.create()
        url = reverse(WORKERS)
        response = superuser.get(f"{url}?{query}")
        assert response.status_code in {200, 302, 400}, response
        if response.status_code == 302:
            assert response["Location"] == f"{url}?e=1"
