"""A ``@task(...)`` with an option its backend refuses (Django 6.1): start-up does not register it."""

from django.tasks import task


@task(policy="no-such-policy")  # type: ignore[call-overload]
def charge(order_id: int) -> int:
    return order_id
