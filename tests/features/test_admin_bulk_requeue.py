"""Step definitions for admin_bulk_requeue.feature: "Requeue all matching…", posted as a browser does.

The operator is a staff account with exactly the rights this needs, using
Django's test client with CSRF checks on (tests/integration/conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.factories import DeadLetterFactory
from tests.integration.conftest import PASSWORD, Operator, hidden_inputs, messages_of

pytestmark = pytest.mark.django_db

scenarios("admin_bulk_requeue.feature")

RIGHTS = ("view_deadletter", "requeue_deadletter")


@dataclass
class Desk:
    """The operator's browser, and the last page it was shown."""

    operator: Operator
    url: str = ""
    page: Any = None


@pytest.fixture
def desk(django_user_model: Any) -> Desk:
    user = django_user_model.objects.create_user(username="night-operator", password=PASSWORD, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="django_jobretry", codename__in=RIGHTS)
    )
    return Desk(Operator(user))


@given(parsers.parse('{mail:d} dead letters in queue "mail" and {billing:d} in queue "billing"'))
def dead_letters(mail: int, billing: int) -> None:
    DeadLetterFactory.create_batch(mail, queue_name="mail")
    DeadLetterFactory.create_batch(billing, queue_name="billing")


@when(parsers.parse('the operator asks to requeue all dead letters of queue "{queue}"'))
def ask(desk: Desk, queue: str) -> None:
    url = reverse("admin:django_jobretry_deadletter_requeue_matching")
    desk.url = f"{url}?{urlencode({'_changelist_filters': urlencode({'queue_name': queue})})}"
    desk.page = desk.operator.get(desk.url)
    assert desk.page.status_code == 200


@when(parsers.parse('another job of queue "{queue}" dies'))
def another_dies(queue: str) -> None:
    DeadLetterFactory.create(queue_name=queue)


@when("the operator confirms")
def confirm(desk: Desk) -> None:
    desk.page = desk.operator.post(desk.url, hidden_inputs(desk.page.text), follow=True)


@then(parsers.parse('the confirmation asks "{question}" and counts {jobs:d} new ready jobs'))
def asks(desk: Desk, question: str, jobs: int) -> None:
    assert question in desk.page.text
    assert desk.page.context["counts"].new_jobs == jobs


@then("nothing has been requeued yet")
def nothing_yet() -> None:
    assert not Job.objects.exists()


@then(parsers.parse('the operator is told "{message}"'))
def told(desk: Desk, message: str) -> None:
    assert messages_of(desk.page) == [message]


@then(parsers.parse('there are {count:d} ready jobs and the only dead letter left is in queue "{queue}"'))
def left(count: int, queue: str) -> None:
    assert Job.objects.filter(status=JobStatus.READY, requeue_count=1).count() == count
    assert list(DeadLetter.objects.values_list("queue_name", flat=True)) == [queue]
