"""The dead-letter admin in a real browser: log in, filter, requeue two, discard one.

An operator with exactly the rights the job needs (view dead letters and
jobs, requeue, discard; not a superuser) works through the admin the way a
person would: the login form, a filter link, row checkboxes, the action menu
and the confirmation page, with the admin's own JavaScript and CSRF checks.
The database is then checked for what the clicks must have done.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from playwright.sync_api import Locator, Page, expect

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.factories import DeadLetterFactory

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

    # Requeue two: one success message, back on the filtered list without them.
    run_action(page, [dead.pk for dead in requeued], REQUEUE)
    expect(messages(page)).to_have_text(["2 dead letters requeued."])
    expect(page.locator("ul.messagelist li.success")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"[?&]queue_name=mail(&|$)"))
    expect(rows(page)).to_have_count(2)
    assert listed(page) == {kept.pk, discarded.pk}

    # Discard one: the confirmation page names it; confirming discards it.
    run_action(page, [discarded.pk], DISCARD)
    expect(page.locator("#content h1")).to_have_text("Are you sure?")
    confirm_rows = page.locator("table.jobretry-confirm tbody tr")
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
