"""The first screen an operator sees at 3 a.m., at 1280x900 with the sidebar open (issue 18.4, 18.5).

The dead-letter detail page shows what failed without scrolling: task,
reason, the rule that made the error fatal, the last error's class and
message, the attempts and when it died; the attempt history gives the
message room. The dashboard's first screen shows what is dying per task.
Everything is measured from the boxes the browser drew, never scrolled to.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import Locator, Page, ViewportSize, expect

from django_jobretry.models import Death
from tests.browser.test_admin_browser import (
    LONG_ERROR,
    LONG_TASK,
    OPERATOR,
    OPERATOR_PERMISSIONS,
    log_in,
    make_staff,
)
from tests.factories import DeadLetterFactory, JobFactory, history_entry

pytestmark = pytest.mark.django_db(transaction=True)

#: The screen of the issue's report.
VIEWPORT: ViewportSize = {"width": 1280, "height": 900}
#: The attempt history's message column at 1280 px, at least (it was 60 px).
LEAST_MESSAGE_WIDTH = 400
ERROR_CLASS = "shop.integrations.partner.errors.PartnerRejected"
RULE = "fatal_errors: shop.integrations.partner.errors.PartnerRejected"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def inside_first_screen(page: Page, locator: Locator) -> None:
    """``locator`` is drawn, whole, inside the viewport as loaded (nothing scrolled)."""
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box is not None
    assert page.evaluate("() => window.scrollY") == 0
    assert 0 <= box["y"] <= box["y"] + box["height"] <= VIEWPORT["height"], box
    assert 0 <= box["x"] <= box["x"] + box["width"] <= VIEWPORT["width"], box


def test_the_dead_letter_page_shows_what_failed_on_the_first_screen(
    page: Page, live_server: Any, django_user_model: Any, shots: Path
) -> None:
    make_staff(django_user_model, OPERATOR, OPERATOR_PERMISSIONS)
    retries = [
        {**history_entry(attempt, "exhausted", last=False), "worker": f"web-{attempt}.example:4242:0000abcd"}
        for attempt in (1, 2)
    ]
    last = {
        **history_entry(3, "fatal", last=True),
        "error_class": ERROR_CLASS,
        "message": LONG_ERROR,
        "rule": RULE,
    }
    dead = DeadLetterFactory.create(
        task_name=LONG_TASK,
        queue_name="partner-sync",
        reason="fatal",
        attempts=3,
        requeue_count=1,
        errors=[*retries, last],
        last_error_class=ERROR_CLASS,
        last_error=LONG_ERROR,
        # Traced: the enqueue's trace is one more fact, and what failed still fits the first screen.
        trace_context={"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01"},
    )

    log_in(page, OPERATOR)
    page.set_viewport_size(VIEWPORT)
    page.goto(reverse("admin:django_jobretry_deadletter_change", args=[dead.pk]))
    expect(page.locator("#nav-sidebar")).to_be_visible()
    page.screenshot(path=shots / "dead-letter-first-screen.png")
    page.screenshot(path=shots / "dead-letter-1280x900.png", full_page=True)

    expect(page.locator("#content h1")).to_have_text(f"Dead letter {dead.pk}")
    expect(page.locator(".breadcrumbs li").last).to_have_text(f"Dead letter {dead.pk}")
    failure = page.locator(".jobretry-failure")
    for part, text in (
        (".jobretry-task", LONG_TASK),
        (".jobretry-reason", "Fatal error"),
        (".jobretry-reason .jobretry-rule", f"rule: {RULE}"),
        (".jobretry-last-error code", "PartnerRejected"),
        (".jobretry-message", LONG_ERROR),
        (".jobretry-attempts", "3/3"),
        (".jobretry-died", ":"),
        (".jobretry-enqueue-trace code", TRACE_ID),
    ):
        shown = failure.locator(part)
        expect(shown).to_contain_text(text)
        inside_first_screen(page, shown)

    history = page.locator(".jobretry-attempts-section table.jobretry-history")
    expect(history.locator("tbody tr")).to_have_count(3)
    expect(history.locator("tbody tr").last.locator(".jobretry-rule")).to_have_text(f"rule: {RULE}")
    widths = history.locator("td.jobretry-message").evaluate_all(
        "cells => cells.map(cell => cell.getBoundingClientRect().width)"
    )
    assert min(widths) >= LEAST_MESSAGE_WIDTH, widths
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, overflow  # no horizontal scrolling


def test_the_dashboard_shows_what_is_dying_per_task_on_the_first_screen(
    page: Page, live_server: Any, django_user_model: Any, shots: Path
) -> None:
    make_staff(django_user_model, OPERATOR, OPERATOR_PERMISSIONS)
    for _ in range(3):
        Death.objects.create(
            task_name=LONG_TASK, queue_name="partner-sync", reason="fatal", error_class=ERROR_CLASS
        )
    DeadLetterFactory.create(task_name=LONG_TASK, queue_name="partner-sync")
    JobFactory.create(retrying=True, task_name=LONG_TASK, queue_name="partner-sync")

    log_in(page, OPERATOR)
    page.set_viewport_size(VIEWPORT)
    # From the admin index, as a new user would find it.
    page.goto(reverse("admin:index"))
    page.get_by_role("link", name="Dashboard: what is dying").first.click()
    expect(page).to_have_url(re.compile(r"/deadletter/dashboard/$"))
    page.screenshot(path=shots / "dashboard-first-screen.png")

    table = page.locator("#dying-tasks table")
    inside_first_screen(page, table)
    row = table.locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("th")).to_have_text("sync_order_to_partner")
    expect(row.locator("td.num")).to_have_text(["3", "3", "1"])
    inside_first_screen(page, page.locator("#dying-errors table"))
    row.locator("td.num a.jobretry-retrying").click()
    expect(page).to_have_url(re.compile(r"status=retrying"))
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
