"""The shop's tasks for Django's task framework (Django 6+), run by ``runworker`` as jobs.

Imported at start-up because settings.TASKS uses JobRetryBackend; see
docs/django-tasks.md. Only imported on Django 6+, where django.tasks exists.
"""

from __future__ import annotations

from django.tasks import task

from django_jobretry.backends import retry_policy
from example_project.shop.errors import InvalidAddress


@task
@retry_policy("emails")
def send_shipping_notice(order_id: int, address: str) -> dict[str, int | str]:
    """InvalidAddress is fatal under the "emails" policy; the returned dict is the task's result."""
    if "@" not in address:
        raise InvalidAddress(f"{address!r} is not an email address")
    return {"order_id": order_id, "sent_to": address}
