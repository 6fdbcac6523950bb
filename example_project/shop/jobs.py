"""The shop's background jobs, as a Django team would write them.

They fail on purpose in the demo, each in a different way: that is the point.
"""

from __future__ import annotations

import logging

from django_jobretry import FatalError, current_job, job
from example_project.shop import partner
from example_project.shop.errors import InvalidAddress

logger = logging.getLogger(__name__)


@job(policy="demo", queue_name="demo")
def send_receipt(order_id: int) -> None:
    """Succeeds first time."""
    logger.debug("receipt for order %s sent", order_id)


@job(policy="demo", queue_name="demo")
def sync_inventory(sku: str) -> None:
    """The warehouse API resets the connection twice, then answers."""
    context = current_job()
    if context is not None and context.attempt < 3:
        raise ConnectionResetError("warehouse API reset the connection")


@job(policy="demo", queue_name="demo")
def notify_partner(order_id: int) -> None:
    """The partner is down for the whole demo: retried, then a dead letter (exhausted)."""
    raise TimeoutError("partner webhook timed out after 10s")


@job(policy="demo", queue_name="demo")
def charge_card(order_id: int, amount_cents: int) -> None:
    """A negative amount can never succeed: fatal, dead at once."""
    if amount_cents <= 0:
        raise FatalError(f"order {order_id}: amount {amount_cents} is not chargeable")


@job(policy="emails", queue_name="demo")
def send_welcome_email(address: str) -> None:
    """InvalidAddress is listed as fatal in the "emails" policy (settings.py)."""
    if "@" not in address:
        raise InvalidAddress(f"{address!r} is not an email address")


@job(policy="demo", queue_name="demo")
def refresh_exchange_rates() -> None:
    """Run by the demo's periodic schedule (shop/demo/schedule.py), which declares it for its run only."""
    logger.debug("exchange rates refreshed")


@job(policy="partner", queue_name="demo")
def sync_order(order_id: int) -> None:
    """The partner is down for a few seconds of the demo: its policy's circuit breaker holds the task."""
    partner.post_order(order_id)
