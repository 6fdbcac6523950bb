"""Every page of ours at 1280 x 800 with the sidebar open: nothing off-screen (issue 36).

The Circuit breakers and Schedules lists once hid their last columns ("Jobs
held", "Paused") in the list's sideways scroller at 1280 px. Each page is
opened by a superuser (every column and action shown) with rows whose
names, reasons and errors are long, and measured from the boxes the browser
drew (tests/browser/fit.py). The check is itself checked: a planted wide
table makes it fail, on the page and inside a list's scroller.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Page, expect

from django_jobretry.holds import breakers, pauses
from django_jobretry.jobs import claim
from django_jobretry.models import Pause
from tests.browser.fit import overflow, plant_wide_table
from tests.browser.test_admin_browser import LONG_ERROR, LONG_TASK, PASSWORD, changelist_url
from tests.factories import DeadLetterFactory, JobFactory, WorkerProcessFactory
from tests.integration.schedules.schedule_story import story
from tests.jobs_app import limited_jobs

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN = "night-admin"
LONG_REASON = (
    "partner-api.example.com answers 503 since the 04:10 deploy; waiting for their on-call "
    "(ticket OPS-123456789) before anything is sent again"
)
LIMITS = {
    "tasks": {limited_jobs.one_per_tenant.name: {"c": 1, "k": True, "r": None, "b": None}},
    "queues": {},
}


@dataclass(frozen=True)
class Rows:
    dead_letter: int
    job: int
    worker: int
    pause: int


def populate(settings: Any) -> Rows:
    """One of everything a page lists, with long names, reasons and errors."""
    story(settings)  # schedules: failing (a dead run), succeeded, paused, not declared
    dead = DeadLetterFactory.create(
        task_name=LONG_TASK,
        queue_name="partner-sync",
        last_error_class="shop.integrations.partner.errors.PartnerTimeout",
        last_error=LONG_ERROR,
    )
    job = JobFactory.create(task_name=LONG_TASK, queue_name="partner-sync", retrying=True)
    JobFactory.create(task_name=LONG_TASK, queue_name="partner-sync", running=True)
    worker = WorkerProcessFactory.create(queues=["partner-sync", "default", "mail", "reports"])
    WorkerProcessFactory.create(lost=True)
    pauses.pause(
        queue="partner-sync", actor=ADMIN, reason=LONG_REASON, until=timezone.now() + timedelta(hours=2)
    )
    pauses.pause(task=LONG_TASK + "_nightly_reconciliation", actor=ADMIN, reason=LONG_REASON, undeployed=True)
    breakers.hold_task(LONG_TASK, timedelta(hours=1), None, job_id=job.pk)
    limited_jobs.one_per_tenant.bulk_enqueue([((tenant, 0), {}) for tenant in (1, 1, 1, 2)])
    claim.claim_limited("w", 10, 30, None, LIMITS)
    return Rows(dead.pk, job.pk, worker.pk, Pause.objects.filter(queue_name="partner-sync").get().pk)


def pages(rows: Rows) -> list[str]:
    """Our admin pages: the dashboard, each list, and a change page of each with data."""
    name = "admin:django_jobretry_{}".format
    return [
        reverse("admin:app_list", args=["django_jobretry"]),
        reverse(name("deadletter_dashboard")),
        reverse(name("deadletter_changelist")),
        reverse(name("deadletter_change"), args=[rows.dead_letter]),
        reverse(name("deadletter_groups")),
        reverse(name("job_changelist")),
        reverse(name("job_change"), args=[rows.job]),
        reverse(name("schedule_changelist")),
        reverse(name("schedule_change"), args=["nightly"]),
        reverse(name("circuit_changelist")),
        reverse(name("circuit_change"), args=[quote(LONG_TASK)]),
        reverse(name("pause_changelist")),
        reverse(name("pause_change"), args=[rows.pause]),
        reverse(name("pause_add")),
        reverse(name("workerprocess_changelist")),
        reverse(name("workerprocess_change"), args=[rows.worker]),
    ]


def log_in_as_superuser(page: Page, django_user_model: Any) -> None:
    django_user_model.objects.create_superuser(username=ADMIN, password=PASSWORD)
    page.goto(f"{reverse('admin:login')}?next={changelist_url()}")
    page.get_by_label("Username").fill(ADMIN)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#content h1")).to_have_text("Select dead letter to view")


def test_every_page_of_ours_fits_1280px(
    page: Page, live_server: Any, django_user_model: Any, settings: Any, shots: Path
) -> None:
    rows = populate(settings)
    log_in_as_superuser(page, django_user_model)
    too_wide = {}
    index = reverse("admin:app_list", args=["django_jobretry"])
    for url in pages(rows):
        response = page.goto(url)
        assert response is not None, url
        assert response.status == 200, url
        if url != index:  # Django's index pages have no sidebar
            expect(page.locator("#nav-sidebar")).to_be_visible()
        page.screenshot(path=shots / f"{url.strip('/').replace('/', '_')}.png", full_page=True)
        found = overflow(page)
        if not found["fits"]:
            too_wide[url] = found
    assert not too_wide, too_wide


def test_the_check_sees_a_wide_table_on_the_page_and_in_a_list(
    page: Page, live_server: Any, django_user_model: Any, settings: Any
) -> None:
    populate(settings)
    log_in_as_superuser(page, django_user_model)
    page.goto(reverse("admin:django_jobretry_deadletter_dashboard"))
    assert overflow(page)["fits"]
    plant_wide_table(page, "#content-main")
    found = overflow(page)
    assert not found["fits"]
    assert found["content"] > found["page"], found

    page.goto(reverse("admin:django_jobretry_circuit_changelist"))
    assert overflow(page)["fits"]
    plant_wide_table(page, "#changelist .results")
    found = overflow(page)
    assert not found["fits"]
    assert found["content"] <= found["page"], found  # the page alone would have passed
    assert any(scroller.startswith("results") for scroller in found["scrollers"]), found
