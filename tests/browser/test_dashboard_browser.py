"""The dashboard in a real browser, at 1280 px with the sidebar open (issue 11's acceptance).

An operator who may view dead letters, jobs and workers opens the dashboard:
the queues panel counts the retrying job, the workers panel shows the live
and the lost worker, the chart of retrying jobs over time shows the workers'
samples, nothing is wider than the page, and the retrying count leads to the
job list filtered to exactly that job.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import Page, expect

from tests.browser.test_admin_browser import OPERATOR, OPERATOR_PERMISSIONS, log_in, make_staff, rows
from tests.factories import DeadLetterFactory, JobFactory, StatusSampleFactory, WorkerProcessFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_dashboard_shows_queues_retrying_and_workers_and_fits_1280px(
    page: Page, live_server: Any, django_user_model: Any, shots: Path
) -> None:
    make_staff(django_user_model, OPERATOR, (*OPERATOR_PERMISSIONS, "view_workerprocess"))
    retrying = JobFactory.create(retrying=True, queue_name="mail")
    JobFactory.create(queue_name="mail")
    DeadLetterFactory.create(queue_name="mail")
    WorkerProcessFactory.create(queues=["mail"], running_jobs=1)
    WorkerProcessFactory.create(lost=True)
    StatusSampleFactory.create(retrying=42, dead=5)

    log_in(page, OPERATOR)
    page.goto(reverse("admin:django_jobretry_deadletter_dashboard"))
    expect(page.locator("#nav-sidebar")).to_be_visible()
    page.screenshot(path=shots / "dashboard-1280.png", full_page=True)
    mail = page.locator("#queues tbody tr", has_text="mail")
    expect(mail.locator("td.num")).to_have_text(["1", "1", "0", "1", re.compile(r".+"), re.compile(r".*")])
    expect(page.locator("#workers h2")).to_have_text("Workers: 1 live, 1 lost")
    retrying_chart = page.locator("#chart-retrying")
    expect(retrying_chart.locator("h2")).to_have_text("Retrying jobs, last 24 hours: peak 42")
    expect(retrying_chart.locator("svg text.jobretry-value")).to_have_text(["42"])
    expect(retrying_chart.locator("svg")).to_be_visible()
    widths = page.evaluate(
        "() => ({page: document.documentElement.clientWidth, content: document.documentElement.scrollWidth})"
    )
    assert widths["content"] <= widths["page"], widths  # no horizontal scrolling

    mail.locator("a.jobretry-retrying").click()
    expect(page).to_have_url(re.compile(r"status=retrying"))
    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_contain_text(str(retrying.pk))
