"""``@task(queue_name="partner")``, with a TASKS entry whose QUEUES does not list "partner"."""

from django.tasks import task


@task(queue_name="partner")
def call_partner(order_id: int) -> int:
    return order_id
