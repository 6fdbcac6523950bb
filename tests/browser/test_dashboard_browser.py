"""The dashboard in a real browser, at 1280 px with the sidebar open (issue 11's acceptance).

An operator who may view dead letters, jobs and workers opens the dashboard:
the queues panel counts the retrying job, the workers panel shows the live
and the lost worker, the chart of retrying jobs over time shows the workers'
samples, nothing is wider than the page, and the retrying count leads to the
job list filtered to exactly that job. Issue 36: what is held shows since
when (to the second) and by whom, with Resume and Close beside it for
holders of ``pause_work``, each asking first.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import Page, expect

from django_jobretry.admin import rendering
from django_jobretry.holds import breakers, pauses
from django_jobretry.models import Circuit, CircuitState, Pause
from tests.browser.fit import overflow
from tests.browser.test_admin_browser import OPERATOR, OPERATOR_PERMISSIONS, log_in, make_staff, rows
from tests.factories import DeadLetterFactory, JobFactory, StatusSampleFactory, WorkerProcessFactory
from tests.jobs_app import jobs

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


def test_the_dashboard_shows_held_since_and_resume_and_close_which_ask_first(
    page: Page, live_server: Any, django_user_model: Any, shots: Path
) -> None:
    make_staff(
        django_user_model, OPERATOR, (*OPERATOR_PERMISSIONS, "view_pause", "view_circuit", "pause_work")
    )
    JobFactory.create(queue_name="mail", task_name="shop.mail.send")
    waiting = JobFactory.create(task_name=jobs.record.name)
    pauses.pause(queue="mail", actor="alice", reason="smtp relay down")
    breakers.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=waiting.pk)
    paused_at = rendering.time_text(Pause.objects.get().paused_at)
    opened_at = rendering.time_text(Circuit.objects.get().opened_at)

    log_in(page, OPERATOR)
    page.goto(reverse("admin:django_jobretry_deadletter_dashboard"))
    held = page.locator("#held")
    expect(held.locator("h2")).to_have_text("Held: 1 paused, 1 circuit breaker open, 0 limits full")
    pause_row = held.locator("tbody tr", has_text="queue mail")
    breaker_row = held.locator("tbody tr", has_text=f"task {jobs.record.name}")
    expect(pause_row.locator("td.jobretry-since")).to_have_text(re.compile(rf"{paused_at}\s*\d+s ago"))
    expect(pause_row).to_contain_text("alice")
    expect(pause_row).to_contain_text("smtp relay down")
    expect(breaker_row.locator("td.jobretry-since")).to_have_text(re.compile(rf"{opened_at}\s*\d+s ago"))
    expect(pause_row.get_by_role("button", name="Resume…")).to_be_visible()
    expect(breaker_row.get_by_role("button", name="Close…")).to_be_visible()
    page.screenshot(path=shots / "dashboard-held-1280.png", full_page=True)
    assert overflow(page)["fits"], overflow(page)

    # Resume: a confirmation page first (nothing resumed yet), then Yes.
    pause_row.get_by_role("button", name="Resume…").click()
    expect(page.locator("#content h1")).to_have_text("Are you sure?")
    expect(page.locator(".jobretry-question")).to_contain_text("Resume 1 pause, releasing 1 due job?")
    expect(page.locator("table.jobretry-items tbody tr")).to_contain_text(["queue mail"])
    assert overflow(page)["fits"], overflow(page)
    assert Pause.objects.exists()
    page.get_by_role("button", name="Yes, resume").click()
    expect(page.locator("ul.messagelist li")).to_have_text(["Resumed: queue mail (1 job released)."])
    assert not Pause.objects.exists()

    # Close, from the dashboard again.
    page.goto(reverse("admin:django_jobretry_deadletter_dashboard"))
    page.locator("#held tbody tr", has_text=jobs.record.name).get_by_role("button", name="Close…").click()
    expect(page.locator(".jobretry-question")).to_contain_text("Close 1 breaker, releasing 1 due job?")
    assert overflow(page)["fits"], overflow(page)
    assert Circuit.objects.get().state == CircuitState.OPEN
    page.get_by_role("button", name="Yes, close").click()
    expect(page.locator("ul.messagelist li")).to_have_text(
        [f"Closed: {jobs.record.name} (1 job released, 10 a second)."]
    )
    assert Circuit.objects.get().state == CircuitState.CLOSED


def test_without_pause_work_the_dashboard_shows_what_is_held_but_no_button(
    page: Page, live_server: Any, django_user_model: Any
) -> None:
    make_staff(django_user_model, OPERATOR, OPERATOR_PERMISSIONS)
    pauses.pause(queue="mail", actor="alice", undeployed=True)
    log_in(page, OPERATOR)
    page.goto(reverse("admin:django_jobretry_deadletter_dashboard"))
    expect(page.locator("#held tbody tr", has_text="queue mail")).to_contain_text("alice")
    expect(page.locator("#held button")).to_have_count(0)
