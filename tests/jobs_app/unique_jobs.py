"""Deduplicated test jobs (docs/jobs.md#deduplication): keys from arguments, windows, conflict modes."""

from __future__ import annotations

import os
from datetime import timedelta

from django_jobretry import job
from tests.jobs_app.models import Execution


def _record(key: str) -> None:
    Execution.objects.create(key=key, attempt=1, pid=os.getpid())


@job(policy="three", unique_args=("order_id",))
def receipt(order_id: int | str, copy: str = "customer", note: str = "") -> None:
    """Keyed by order: any copy or note of one order is one job while it is live."""
    _record(f"receipt-{order_id}-{copy}")


@job(policy="three", unique_args=("order_id", "copy"), unique_for=timedelta(hours=1))
def invoice(order_id: int, copy: str = "customer") -> None:
    """Keyed by order and copy, and not run again for an hour after it succeeded."""
    _record(f"invoice-{order_id}-{copy}")


@job(policy="three", unique_args=("order_id",), on_conflict="raise")
def refund(order_id: int) -> None:
    _record(f"refund-{order_id}")


@job(policy="three", unique_args=("tenant",), on_conflict="replace")
def sync(tenant: int, since: str) -> None:
    """The latest call wins while the job waits: a sync of one tenant from the newest mark."""
    _record(f"sync-{tenant}-{since}")
