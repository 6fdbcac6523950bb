"""The admin in a real browser: log in, filter, requeue two (confirmed), discard one; the lists' layout.

An operator with exactly the rights the job needs (view dead letters and
jobs, requeue, discard; not a superuser) works through the admin the way a
person would: the login form, a filter link, row checkboxes, the action menu
and the confirmation pages, with the admin's own JavaScript and CSRF checks.
The database is then checked for what the clicks must have done. Issue 11
adds the job list's "retrying" filter and the dead-letter list at 1280 px
with Django's navigation sidebar open, measured from the rendered boxes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Locator, Page, expect

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.factories import DeadLetterFactory, JobFactory

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-for-browser-tests"  # noqa: S105
OPERATOR = "night-operator"
OPERATOR_PERMISSIONS = ("view_deadletter", "requeue_deadletter", "discard_deadletter", "view_job")
REQUEUE = "Requeue selected dead letters"
DISCARD = "Discard selected dead letters"


def changelist_url() -> str:
    return reverse("admin:django_jobretry_deadletter_changelist")


def make_staff(django_user_model: Any, username: str, codenames: tuple[str, ...]) -> Any:
    user = django_user_model.objects.create_user(username=username, password=PASSWORD, is_staff=True)
    perms = Permission.objects.filter(content_type__app_label="django_jobretry", codename__in=codenames)
    assert perms.count() == len(codenames), codenames
    user.user_permissions.add(*perms)
    return user


def log_in(page: Page, username: str) -> None:
    """Through the admin's login form, landing on the dead-letter list."""
    page.goto(f"{reverse('admin:login')}?next={changelist_url()}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#content h1")).to_have_text("Select dead letter to view")


def listed(page: Page) -> set[int]:
    """Ids of the dead letters on the list, read from the rows' checkboxes."""
    values = page.locator("#result_list input.action-select").evaluate_all("boxes => boxes.map(b => b.value)")
    return {int(value) for value in values}


def rows(page: Page) -> Locator:
    return page.locator("#result_list tbody tr")


def messages(page: Page) -> Locator:
    return page.locator("ul.messagelist li")


def run_action(page: Page, ids: list[int], action: str) -> None:
    """Tick the rows of ``ids``, pick ``action`` in the menu and press the action bar's button."""
    for pk in ids:
        page.locator(f"#result_list input.action-select[value='{pk}']").check()
    expect(page.locator(".action-counter")).to_contain_text(f"{len(ids)} of ")
    page.locator("#changelist-form select[name='action']").select_option(label=action)
    page.locator("#changelist-form button[name='index']").click()


def test_operator_filters_requeues_two_and_discards_one(
    page: Page, live_server: Any, django_user_model: Any, shots: Path
) -> None:
    make_staff(django_user_model, OPERATOR, OPERATOR_PERMISSIONS)
    mail = [DeadLetterFactory.create(queue_name="mail", args=[f"m{i}"]) for i in range(1, 5)]
    billing = DeadLetterFactory.create(queue_name="billing", args=["b1"])
    requeued, kept, discarded = mail[:2], mail[2], mail[3]

    log_in(page, OPERATOR)
    expect(rows(page)).to_have_count(5)

    # Filter by queue with the sidebar's link; the choice shows as selected.
    queue_filter = page.locator("#changelist-filter details[data-filter-title='queue']")
    queue_filter.get_by_role("link", name="mail", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]queue_name=mail(&|$)"))
    expect(queue_filter.locator("li.selected")).to_have_text("mail")
    expect(rows(page)).to_have_count(4)
    assert listed(page) == {dead.pk for dead in mail}

    # Requeue two: a confirmation page counts them first; Yes requeues, back on the filtered list.
    run_action(page, [dead.pk for dead in requeued], REQUEUE)
    expect(page.locator("#content h1")).to_have_text("Are you sure?")
    expect(page.locator(".jobretry-question")).to_contain_text("Requeue 2 dead letters?")
    expect(page.locator(".jobretry-outcomes li")).to_have_text(["2 become new ready jobs"])
    expect(page.locator("table.jobretry-items tbody tr")).to_have_count(2)
    assert DeadLetter.objects.count() == 5  # nothing requeued before Yes
    page.screenshot(path=shots / "requeue-confirmation.png", full_page=True)
    page.get_by_role("button", name="Yes, requeue them").click()
    expect(messages(page)).to_have_text(["2 dead letters requeued."])
    expect(page.locator("ul.messagelist li.success")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"[?&]queue_name=mail(&|$)"))
    expect(rows(page)).to_have_count(2)
    assert listed(page) == {kept.pk, discarded.pk}

    # Discard one: the confirmation page names it; confirming discards it.
    run_action(page, [discarded.pk], DISCARD)
    expect(page.locator("#content h1")).to_have_text("Are you sure?")
    confirm_rows = page.locator("table.jobretry-items tbody tr")
    expect(confirm_rows).to_have_count(1)
    expect(confirm_rows.locator("td").first).to_have_text(str(discarded.pk))
    expect(confirm_rows).to_contain_text("mail")
    page.screenshot(path=shots / "discard-confirmation.png", full_page=True)
    page.get_by_role("button", name="Yes, discard it").click()
    expect(messages(page)).to_have_text(["1 dead letter discarded."])
    expect(page.locator("ul.messagelist li.success")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"[?&]queue_name=mail(&|$)"))
    expect(rows(page)).to_have_count(1)
    assert listed(page) == {kept.pk}
    page.screenshot(path=shots / "after-discard.png", full_page=True)

    # Without the filter: the untouched billing letter and the kept mail one.
    page.goto(changelist_url())
    expect(rows(page)).to_have_count(2)
    assert listed(page) == {kept.pk, billing.pk}

    # The database agrees: two new ready jobs with their provenance, one letter gone.
    jobs = sorted(Job.objects.filter(requeue_count=1), key=lambda job: job.args)
    assert [job.args for job in jobs] == [["m1"], ["m2"]]
    for job, dead in zip(jobs, requeued, strict=True):
        assert (job.status, job.queue_name, job.task_name) == (JobStatus.READY, "mail", dead.task_name)
        assert job.requeue_history[-1]["dead_letter_id"] == dead.pk
        assert job.requeue_history[-1]["by"] == OPERATOR
    assert Job.objects.count() == 2
    assert set(DeadLetter.objects.values_list("pk", flat=True)) == {kept.pk, billing.pk}


def test_viewer_sees_the_list_but_no_actions(page: Page, live_server: Any, django_user_model: Any) -> None:
    """Without requeue/discard rights the page offers no action at all (the server refuses them too)."""
    make_staff(django_user_model, "viewer", ("view_deadletter", "view_job"))
    dead = DeadLetterFactory.create(queue_name="mail")

    log_in(page, "viewer")
    expect(rows(page)).to_have_count(1)
    expect(page.locator("#changelist-form select[name='action']")).to_have_count(0)
    assert listed(page) == set()  # no checkbox column without an action to tick rows for
    expect(rows(page).first).to_contain_text(str(dead.pk))


def test_the_job_list_filters_retrying_jobs(page: Page, live_server: Any, django_user_model: Any) -> None:
    make_staff(django_user_model, OPERATOR, OPERATOR_PERMISSIONS)
    retrying = JobFactory.create(retrying=True)
    JobFactory.create()
    JobFactory.create(running=True)
    next_at = timezone.localtime(Job.objects.get(pk=retrying.pk).run_at).strftime("%H:%M:%S")

    log_in(page, OPERATOR)
    page.goto(reverse("admin:django_jobretry_job_changelist"))
    expect(rows(page)).to_have_count(3)
    status = page.locator("#changelist-filter details[data-filter-title='status']")
    status.get_by_role("link", name="Retrying (waiting for its next attempt)").click()
    expect(page).to_have_url(re.compile(r"[?&]status=retrying(&|$)"))
    expect(rows(page)).to_have_count(1)
    expect(rows(page).locator("td.field-state_display")).to_have_text(
        f"retrying (attempt 3 of 3, next at {next_at})"
    )
    expect(rows(page).locator("td.field-last_error")).to_have_text(
        "ConnectionResetError: upstream reset for k"
    )


#: Long enough to have overflowed the list before issue 11 (a task path, a URL in the error).
LONG_TASK = "shop.integrations.partner.sync_order_to_partner"
LONG_ERROR = "partner API did not answer within 30 s (POST https://partner.example/api/v2/orders/12345)"
#: The last-error column's least width at 1280 px (its CSS min-width is 12em, 156 px).
LEAST_ERROR_WIDTH = 150


def test_the_dead_letter_list_fits_1280px_with_the_sidebar_open(
    page: Page, live_server: Any, django_user_model: Any, shots: Path
) -> None:
    make_staff(django_user_model, OPERATOR, OPERATOR_PERMISSIONS)
    for count in range(3):
        DeadLetterFactory.create(
            task_name=LONG_TASK,
            queue_name="partner-sync",
            reason="lease_expired",
            attempts=3,
            requeue_count=count,
            last_error_class="shop.integrations.partner.errors.PartnerTimeout",
            last_error=LONG_ERROR,
        )

    log_in(page, OPERATOR)  # the page fixture's viewport is 1280 x 800
    expect(page.locator("#nav-sidebar")).to_be_visible()  # Django's default: the sidebar open
    expect(page.locator("#changelist-filter")).to_be_visible()
    page.screenshot(path=shots / "dead-letters-1280.png", full_page=True)
    boxes = page.evaluate(
        """() => {
            const table = document.querySelector('#result_list');
            const box = table.closest('.results').getBoundingClientRect();
            const cells = [...table.querySelectorAll('td.field-last_error_line')];
            return {
                table: table.getBoundingClientRect().right,
                container: box.right,
                filter: document.querySelector('#changelist-filter').getBoundingClientRect().left,
                widths: cells.map(cell => cell.getBoundingClientRect().width),
                clipped: cells.filter(cell => cell.scrollWidth > cell.clientWidth).length,
            };
        }"""
    )
    assert boxes["table"] <= boxes["container"] + 0.5, boxes  # no horizontal scrolling of the list
    assert boxes["container"] <= boxes["filter"], boxes  # nor under the filter
    assert len(boxes["widths"]) == 3
    assert min(boxes["widths"]) >= LEAST_ERROR_WIDTH, boxes
    assert boxes["clipped"] == 0, boxes
    expect(rows(page).locator("td.field-last_error_line")).to_have_text([f"PartnerTimeout: {LONG_ERROR}"] * 3)
