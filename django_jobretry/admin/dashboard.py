"""The operator's overview: job counts, dead letters by queue and reason, recent deaths.

One page answers "is something dying right now, and where?" before anyone
opens a list. Counts are GROUP BY queries; the two charts read only the last
7 days of dead letters through the (dead_at, id) index. The charts are inline
SVG drawn server-side: no JavaScript, no CDN, nothing for a CSP to block.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.db import connections, router
from django.db.models import Count
from django.db.models.functions import TruncDay, TruncHour
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from django_jobretry.models import DeadLetter, DeadReason, Job, JobStatus

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Plot height of both charts, in SVG user units.
PLOT_HEIGHT = 120


@dataclass(frozen=True)
class Bar:
    """One chart bar, positioned for the SVG template."""

    x: int
    center: float
    y: float
    height: float
    count: int
    label: str
    tick: str


@dataclass(frozen=True)
class Chart:
    """A bar chart: bars in time order, the drawing's size and the total it shows."""

    bars: list[Bar]
    slot: int
    total: int

    @property
    def width(self) -> int:
        return self.slot * len(self.bars)

    @property
    def bar_width(self) -> int:
        return bar_width(self.slot)

    @property
    def peak(self) -> int:
        return max((bar.count for bar in self.bars), default=0)


def bar_width(slot: int) -> int:
    """A bar fills its slot but for a gap, so neighbours stay apart."""
    return slot - max(slot // 6, 2)


def database_now() -> datetime:
    """The database's clock, which stamped dead_at; the app server's may drift."""
    with connections[router.db_for_read(DeadLetter)].cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        now: datetime = cursor.fetchone()[0]
    return now


def _chart(counts: dict[datetime, int], starts: list[datetime], slot: int, label: str, every: int) -> Chart:
    peak = max([*counts.values(), 1])
    bars = []
    for index, start in enumerate(starts):
        count = counts.get(start, 0)
        height = PLOT_HEIGHT * count / peak
        text = timezone.localtime(start).strftime(label)
        tick = text if index % every == 0 else ""
        x = index * slot
        bars.append(Bar(x, x + bar_width(slot) / 2, PLOT_HEIGHT - height, height, count, text, tick))
    return Chart(bars, slot, sum(counts.get(start, 0) for start in starts))


def _counts(since: datetime, until: datetime, trunc: type[TruncHour] | type[TruncDay]) -> dict[datetime, int]:
    # Bounded on both sides: a row dead at 'infinity' (which Python cannot load) is in no bar.
    rows = (
        DeadLetter.objects.filter(dead_at__gte=since, dead_at__lt=until)
        .annotate(bucket=trunc("dead_at"))
        .values_list("bucket")
        .annotate(n=Count("id"))
        .order_by()
    )
    return dict(rows)


def hourly(now: datetime) -> Chart:
    """Dead letters per hour over the last 24 hours, oldest first, empty hours included."""
    current = timezone.localtime(now).replace(minute=0, second=0, microsecond=0).astimezone(UTC)
    # Hour arithmetic in UTC: local wall-clock arithmetic breaks across DST changes.
    starts = [current - timedelta(hours=h) for h in range(23, -1, -1)]
    until = current + timedelta(hours=1)
    return _chart(_counts(starts[0], until, TruncHour), starts, slot=24, label="%H:00", every=6)


def daily(now: datetime) -> Chart:
    """Dead letters per calendar day (the site's time zone) over the last 7 days."""
    today = timezone.localtime(now).date()
    # Each local midnight built in the zone, so a DST change keeps days whole.
    starts = [
        timezone.make_aware(datetime.combine(today - timedelta(days=d), time.min)) for d in range(6, -1, -1)
    ]
    until = timezone.make_aware(datetime.combine(today + timedelta(days=1), time.min))
    return _chart(_counts(starts[0], until, TruncDay), starts, slot=72, label="%a %d %b", every=1)


def summary() -> dict[str, Any]:
    """Job counts per queue and status, dead-letter counts per queue and per reason."""
    jobs = Counter(
        {
            (queue, status): n
            for queue, status, n in Job.objects.values_list("queue_name", "status")
            .annotate(n=Count("id"))
            .order_by()
        }
    )
    # One pass over the dead letters for both breakdowns: the table may be large.
    dead_by_queue: Counter[str] = Counter()
    dead_by_reason: Counter[str] = Counter()
    for queue, reason, n in (
        DeadLetter.objects.values_list("queue_name", "reason").annotate(n=Count("id")).order_by()
    ):
        dead_by_queue[queue] += n
        dead_by_reason[reason] += n
    queues = sorted({queue for queue, _ in jobs} | set(dead_by_queue))
    statuses = list(JobStatus.values)
    rows = [
        {
            "queue": queue,
            "counts": [jobs[queue, status] for status in statuses],
            "dead": dead_by_queue.get(queue, 0),
        }
        for queue in queues
    ]
    totals = {
        "counts": [sum(jobs[queue, status] for queue in queues) for status in statuses],
        "dead": sum(dead_by_queue.values()),
    }
    reasons = [
        {"value": value, "label": label, "dead": dead_by_reason.get(value, 0)}
        for value, label in DeadReason.choices
    ]
    return {
        "statuses": [JobStatus(status).label for status in statuses],
        "queues": rows,
        "totals": totals,
        "reasons": reasons,
    }


def dashboard_view(admin: ModelAdmin[DeadLetter], request: HttpRequest) -> TemplateResponse:
    """The dashboard page; anyone who may view dead letters may see it."""
    if not admin.has_view_permission(request):
        raise PermissionDenied
    now = database_now()
    context = {
        **admin.admin_site.each_context(request),
        **summary(),
        "title": "Jobs and dead letters",
        "subtitle": None,
        "opts": admin.opts,
        "changelist_url": reverse(f"admin:{admin.opts.app_label}_{admin.opts.model_name}_changelist"),
        "job_changelist_url": reverse(f"admin:{Job._meta.app_label}_{Job._meta.model_name}_changelist"),
        "now": now,
        "hourly": hourly(now),
        "daily": daily(now),
        "plot_height": PLOT_HEIGHT,
    }
    request.current_app = admin.admin_site.name
    return TemplateResponse(request, "admin/django_jobretry/deadletter/dashboard.html", context)
