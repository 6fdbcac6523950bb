"""The job list as an operator reads it at 3 a.m. (issue 11): what is retrying, why, and when it runs next.

Through Django's test client, as real staff accounts (tests/integration/conftest.py).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_jobretry.admin import rendering
from django_jobretry.models import Job
from tests.factories import JobFactory, history_entry
from tests.integration.conftest import Operator, change_url

pytestmark = pytest.mark.django_db

JOBS = "admin:django_jobretry_job_changelist"
#: A date and its time are marked up apart (a narrow column may wrap between them).
SPLIT = '</span> <span class="jobretry-time">'


def rows(response: Any) -> list[Job]:
    assert response.status_code == 200, response
    return list(response.context["cl"].result_list)


def local_time(moment: datetime) -> str:
    return timezone.localtime(moment).strftime("%H:%M:%S")


@pytest.fixture
def every_state() -> dict[str, Job]:
    return {
        "ready": JobFactory.create(),
        "retrying": JobFactory.create(retrying=True, max_attempts=4),
        "running": JobFactory.create(running=True),
        "succeeded": JobFactory.create(succeeded=True),
    }


class TestRetrying:
    def test_a_job_waiting_for_a_retry_shows_as_retrying(
        self, viewer: Operator, every_state: dict[str, Job]
    ) -> None:
        job = Job.objects.get(pk=every_state["retrying"].pk)
        html = viewer.get(reverse(JOBS)).text
        expected = f"retrying</span> (attempt 3 of 4, next at {local_time(job.run_at)})"
        assert expected in html
        assert html.count("retrying</span>") == 1  # the fresh ready job is plain "ready"

    def test_a_retry_due_another_day_shows_the_date(self, viewer: Operator) -> None:
        later = timezone.now() + timedelta(days=2)
        JobFactory.create(retrying=True, run_at=later)
        html = viewer.get(reverse(JOBS)).text
        assert f"next at {rendering.time_text(later)})" in html

    @pytest.mark.parametrize("state", ["ready", "retrying", "running", "succeeded"])
    def test_the_status_filter_tells_retrying_from_ready(
        self, viewer: Operator, every_state: dict[str, Job], state: str
    ) -> None:
        assert rows(viewer.get(reverse(JOBS), {"status": state})) == [every_state[state]]

    def test_retrying_is_what_the_model_calls_retrying(
        self, viewer: Operator, every_state: dict[str, Job]
    ) -> None:
        listed = {job.pk for job in rows(viewer.get(reverse(JOBS), {"status": "retrying"}))}
        assert listed == set(Job.objects.retrying().values_list("pk", flat=True))

    def test_the_filter_offers_retrying_and_an_unknown_status_is_refused(self, viewer: Operator) -> None:
        listing = viewer.get(reverse(JOBS)).text
        assert "?status=retrying" in listing
        assert "Retrying (waiting for its next attempt)" in listing
        response = viewer.get(reverse(JOBS), {"status": "dead"})
        assert response.status_code == 302
        assert response["Location"].endswith("?e=1")  # Django's answer to a lookup it cannot apply

    def test_running_and_succeeded_say_which_attempt(
        self, viewer: Operator, every_state: dict[str, Job]
    ) -> None:
        html = viewer.get(reverse(JOBS)).text
        assert html.count('<span class="jobretry-quiet">attempt 1 of 3</span>') == 2


class TestLastError:
    def test_class_name_and_first_line_truncated(self, viewer: Operator) -> None:
        entry = {
            **history_entry(1, "exhausted", last=True),
            "error_class": "shop.partner.errors.PartnerTimeout",
            "message": "\n  partner did not answer " + "x" * 300 + "\nsecond line",
        }
        JobFactory.create(retrying=True, errors=[history_entry(1, "exhausted", last=False), entry])
        html = viewer.get(reverse(JOBS)).text
        path = "shop.partner.errors.PartnerTimeout"
        tag = f'<span class="jobretry-error-class" title="{path}">PartnerTimeout</span>'
        assert f"{tag}: partner did not answer xxx" in html
        assert "x" * 120 not in html  # cut to 120 characters
        assert "…" in html
        assert "second line" not in html

    def test_never_the_arguments(self, viewer: Operator) -> None:
        JobFactory.create(retrying=True, args=["card-4242"], kwargs={"password": "hunter2"})
        html = viewer.get(reverse(JOBS)).text
        assert "ConnectionResetError</span>: upstream reset for k" in html
        assert "card-4242" not in html
        assert "hunter2" not in html

    def test_a_job_that_never_failed_and_odd_histories_show_nothing(self, viewer: Operator) -> None:
        JobFactory.create()
        JobFactory.create(errors=["a string", 3])
        assert len(rows(viewer.get(reverse(JOBS)))) == 2

    def test_read_in_sql_for_the_page_only(self, viewer: Operator) -> None:
        JobFactory.create_batch(3, retrying=True)
        with CaptureQueriesContext(connection) as queries:
            rows(viewer.get(reverse(JOBS)))
        job_queries = [q["sql"] for q in queries if '"django_jobretry_job"' in q["sql"]]
        page = [sql for sql in job_queries if "#>>" in sql]
        assert len(page) == 1  # the histories are not loaded: the last entry is read in SQL
        assert not [sql for sql in job_queries if "COUNT(" in sql.upper() and "#>>" in sql]


class TestTimesToTheSecond:
    def test_list_and_detail(self, viewer: Operator) -> None:
        job = Job.objects.get(
            pk=JobFactory.create(running=True, errors=[history_entry(1, "fatal", last=True)]).pk
        )
        listing = viewer.get(reverse(JOBS)).text
        assert rendering.time_text(job.run_at) in listing.replace(SPLIT, " ")
        detail = viewer.get(change_url(job)).text
        for moment in (job.run_at, job.enqueued_at, job.started_at, job.lease_expires_at):
            assert moment is not None
            assert rendering.time_text(moment) in detail.replace(SPLIT, " ")
        # The attempt history's times too (stored as ISO text in the JSON).
        at = datetime.fromisoformat(job.errors[0]["at"])
        assert f'<span class="nowrap">{rendering.time_text(at)}</span>' in detail
        assert not re.search(r"\b(a\.m\.|p\.m\.)", detail)  # never Django's minute-precision format

    def test_the_heading_names_the_job(self, viewer: Operator) -> None:
        job = JobFactory.create(retrying=True)
        detail = viewer.get(change_url(job)).text
        assert f"<h1>Job {job.pk}</h1>" in detail
        assert f"<h2>{job.task_name} · retrying (attempt 3 of 3, next at " in detail
