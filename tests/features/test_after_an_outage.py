"""Step definitions for after_an_outage.feature: failure groups, search by arguments, repair.

The operator is a staff account with the rights an on-call operator gets
(view, requeue, repair, read arguments), through Django's test client with
CSRF checks on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.jobs.history import AttemptEnd, attempt_entry
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.policy import ErrorKind
from tests.factories import DeadLetterFactory
from tests.integration.conftest import PASSWORD, Operator, hidden_inputs, messages_of

pytestmark = pytest.mark.django_db

scenarios("after_an_outage.feature")

RIGHTS = ("view_job", "view_deadletter", "requeue_deadletter", "repair_deadletter", "view_job_payload")
#: A registered task taking (key, **kwargs): the repair's call check passes for any keyword.
TASK = "tests.jobs_app.jobs.takes_anything"


@dataclass
class Desk:
    operator: Operator
    page: Any = None
    dead: DeadLetter | None = None
    url: str = ""


@pytest.fixture
def desk(django_user_model: Any) -> Desk:
    user = django_user_model.objects.create_user(username="on-call", password=PASSWORD, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="django_jobretry", codename__in=RIGHTS)
    )
    return Desk(Operator(user))


def died_of(error_class: str, message: str, **fields: Any) -> DeadLetter:
    entry = attempt_entry(
        1, AttemptEnd.ERROR, ErrorKind.RETRYABLE, "w1", error_class=error_class, message=message
    )
    return DeadLetterFactory.create(task_name=TASK, errors=[entry], **fields)


@given(parsers.parse("{count:d} dead letters that timed out on orders with different numbers"))
def timeouts(count: int) -> None:
    for n in range(count):
        died_of("partner.PartnerTimeout", f"order {1000 + n * 37} timed out after {n + 1}.5 s")


@given(parsers.parse("{count:d} dead letters that died of a missing key"))
def missing_keys(count: int) -> None:
    for n in range(count):
        died_of("builtins.KeyError", f"'sku-{n}'")


@given(parsers.parse('a dead letter of customer {customer:d} that died of a bad address "{address}"'))
def bad_address(desk: Desk, customer: int, address: str) -> None:
    desk.dead = died_of(
        "shop.InvalidAddress",
        f"invalid e-mail address: '{address}'",
        reason="fatal",
        args=[],
        kwargs={"customer_id": customer, "email": address},
    )


@when("the operator opens the failure groups")
def open_groups(desk: Desk) -> None:
    desk.page = desk.operator.get(reverse("admin:django_jobretry_deadletter_groups"))


@then(parsers.parse('the groups are {first:d} "{first_class}" and {second:d} "{second_class}"'))
def groups_are(desk: Desk, first: int, first_class: str, second: int, second_class: str) -> None:
    shown = [(row["group"].count, row["error_name"]) for row in desk.page.context["groups"]]
    assert shown == [(first, first_class), (second, second_class)]


@when(parsers.parse('the operator requeues the "{error_name}" group and confirms'))
def requeue_group(desk: Desk, error_name: str) -> None:
    (row,) = [row for row in desk.page.context["groups"] if row["error_name"] == error_name]
    url = row["links"]["requeue"]
    confirmation = desk.operator.get(url)
    desk.page = desk.operator.post(url, hidden_inputs(confirmation.text), follow=True)


@then(parsers.parse('the operator is told "{message}"'))
def told(desk: Desk, message: str) -> None:
    assert messages_of(desk.page) == [message]


@then(parsers.parse('{count:d} jobs are ready and the {left:d} "{error_name}" dead letters are left'))
def ready_and_left(count: int, left: int, error_name: str) -> None:
    assert Job.objects.filter(status=JobStatus.READY, requeue_count=1).count() == count
    classes = list(DeadLetter.objects.values_list("last_error_class", flat=True))
    assert [name.rsplit(".", 1)[-1] for name in classes] == [error_name] * left


@when(parsers.parse('the operator searches the dead letters by arguments for "{search}"'))
def search(desk: Desk, search: str) -> None:
    desk.page = desk.operator.get(
        reverse("admin:django_jobretry_deadletter_changelist"), {"arguments": search}
    )


@then("exactly that dead letter is listed")
def listed(desk: Desk) -> None:
    assert desk.dead is not None
    assert [row.pk for row in desk.page.context["cl"].result_list] == [desk.dead.pk]


@when(parsers.parse('the operator repairs its address to "{address}" and reviews the changes'))
def repair(desk: Desk, address: str) -> None:
    assert desk.dead is not None
    desk.url = reverse("admin:django_jobretry_deadletter_repair", args=[desk.dead.pk])
    form = desk.operator.get(desk.url)
    kwargs = {**json.loads(form.context["kwargs_text"]), "email": address}
    fields = {**hidden_inputs(form.text), "args": form.context["args_text"], "kwargs": json.dumps(kwargs)}
    desk.page = desk.operator.post(desk.url, {**fields, "step": "review"})


@then(parsers.parse('the review shows the address changing from "{old}" to "{new}"'))
def reviewed(desk: Desk, old: str, new: str) -> None:
    assert desk.page.context["review"] == [
        {"path": "kwargs['email']", "change": "changed", "old": json.dumps(old), "new": json.dumps(new)}
    ]


@when("the operator confirms the repair")
def confirm_repair(desk: Desk) -> None:
    desk.page = desk.operator.post(
        desk.url, {**hidden_inputs(desk.page.text), "step": "confirm"}, follow=True
    )


@then(parsers.parse('a ready job has the address "{address}"'))
def job_has(address: str) -> None:
    (job,) = Job.objects.filter(status=JobStatus.READY, kwargs__email=address)
    assert job.kwargs["customer_id"] == 42


@then("its requeue history records the change by the operator")
def history_records() -> None:
    (job,) = Job.objects.filter(kwargs__customer_id=42)
    repair = job.requeue_history[-1]["repair"]
    assert repair["by"] == "on-call"
    assert [change["path"] for change in repair["changes"]] == ["kwargs['email']"]
