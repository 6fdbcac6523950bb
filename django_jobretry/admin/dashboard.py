"""The operator's overview: what is dying, each queue's backlog and delay, the workers, deaths over time.

One page answers the first questions of an incident before anyone opens a
list: which tasks are dying and of what error (admin/dying.py), what is
retrying, how late is each queue, what runs longest, which workers are
alive. It must stay cheap when the tables hold millions of rows (it is
opened exactly then), so every figure is an index walk (services/status.py,
services/deaths.py): counts stop at COUNT_LIMIT ("10,000+"; a chart bar at
BAR_LIMIT), and nothing counts succeeded jobs per queue. Deaths are counted
as they happen, so a requeue or a discard never lowers an hour's count. The
retrying and dead jobs over time come from the samples the workers take once
a minute (services/status_samples.py): the highest sample of each hour, an
hour without one drawn as a gap, never as a zero. The charts are inline SVG
drawn server-side: no JavaScript, no CDN, nothing for a CSP to block. An
optional ``?refresh=N`` reloads the page every N seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from django_jobretry.admin import dying
from django_jobretry.admin.base import holds
from django_jobretry.humanize import humanize_delay
from django_jobretry.models import DeadLetter, DeadReason, Job, WorkerProcess
from django_jobretry.services import deaths, status, status_samples, workers

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Plot height of both charts, in SVG user units.
PLOT_HEIGHT = 120
#: The auto-refresh periods offered, in seconds; any other ``?refresh=`` means off.
REFRESH_CHOICES = (10, 30, 60, 300)
#: Workers listed on the page; the workers page lists them all.
WORKERS_SHOWN = 50


@dataclass(frozen=True)
class Bar:
    """One chart bar, positioned for the SVG template."""

    x: int
    center: float
    y: float
    height: float
    count: status.Count
    label: str
    tick: str
    #: No sample in this bar's time (samples charts only): drawn as a gap.
    missing: bool = False

    @property
    def value(self) -> str:
        """The bar's number, short enough to sit on a narrow bar: 950, 1k, 1k+ (past status.BAR_LIMIT)."""
        number = self.count.value or 0
        text = f"{number / 1000:.1f}k".replace(".0k", "k") if number >= 1000 else str(number)
        return f"{text}+" if self.count.more else text


@dataclass(frozen=True)
class Chart:
    """A bar chart: bars in time order, the drawing's size and the total it shows.

    A chart of samples (``peak=True``) shows levels, not events: its ``total``
    is its highest bar, and it is ``empty`` when no bar has a sample.
    """

    bars: list[Bar]
    slot: int
    total: status.Count
    peak_chart: bool = False

    @property
    def headline(self) -> str:
        return f"peak {self.total}" if self.peak_chart else str(self.total)

    @property
    def description(self) -> str:
        if self.peak_chart:
            sampled = sum(1 for bar in self.bars if not bar.missing)
            return f"at most {self.total} in one sample; {sampled} of {len(self.bars)} bars sampled"
        return f"{self.total} in all, at most {self.peak} in one bar"

    @property
    def empty(self) -> bool:
        return all(bar.missing for bar in self.bars)

    @property
    def width(self) -> int:
        return self.slot * len(self.bars)

    @property
    def bar_width(self) -> int:
        return bar_width(self.slot)

    @property
    def peak(self) -> int:
        return max((bar.count.value or 0 for bar in self.bars), default=0)


def bar_width(slot: int) -> int:
    """A bar fills its slot but for a gap, so neighbours stay apart."""
    return slot - max(slot // 6, 2)


def _bars(
    starts: list[datetime], counts: list[status.Count | None], *, slot: int, label: str, tick: str, every: int
) -> list[Bar]:
    """Bars ``slot`` SVG units apart, ``label`` naming each and ``tick`` every ``every``-th one.

    A count of None is a bar with no sample: no height, marked ``missing``.
    A chart is about as wide in SVG units as its half of the page in pixels,
    so its text is drawn at about the size the stylesheet gives it.
    """
    peak = max([*(count.value or 0 for count in counts if count is not None), 1])
    bars = []
    for index, (start, count) in enumerate(zip(starts, counts, strict=True)):
        shown_count = status.Count(0) if count is None else count
        height = PLOT_HEIGHT * (shown_count.value or 0) / peak
        local = timezone.localtime(start)
        shown = local.strftime(tick) if index % every == 0 else ""
        x = index * slot
        bars.append(
            Bar(
                x,
                x + bar_width(slot) / 2,
                PLOT_HEIGHT - height,
                height,
                shown_count,
                local.strftime(label),
                shown,
                missing=count is None,
            )
        )
    return bars


def _chart(
    starts: list[datetime], counts: list[status.Count], *, slot: int, label: str, tick: str, every: int
) -> Chart:
    """Deaths per bucket starting at each of ``starts``."""
    bars = _bars(starts, list(counts), slot=slot, label=label, tick=tick, every=every)
    return Chart(bars, slot, sum(counts, status.Count(0)))


def _hours(now: datetime) -> tuple[list[datetime], datetime]:
    """The starts of the last 24 hours (the current one last), and the end of the current one."""
    current = timezone.localtime(now).replace(minute=0, second=0, microsecond=0).astimezone(UTC)
    # Hour arithmetic in UTC: local wall-clock arithmetic breaks across DST changes.
    return [current - timedelta(hours=h) for h in range(23, -1, -1)], current + timedelta(hours=1)


def _days(now: datetime) -> tuple[list[datetime], datetime]:
    """The starts of the last 7 calendar days (the site's time zone; today last), and the end of today."""
    today = timezone.localtime(now).date()
    # Each local midnight built in the zone, so a DST change keeps days whole.
    starts = [
        timezone.make_aware(datetime.combine(today - timedelta(days=d), time.min)) for d in range(6, -1, -1)
    ]
    return starts, timezone.make_aware(datetime.combine(today + timedelta(days=1), time.min))


def deaths_read(now: datetime) -> tuple[Chart, Chart, deaths.Deaths]:
    """Deaths per hour (the last 24) and per day (the last 7), and per task and error class: one block."""
    hours, end_of_hour = _hours(now)
    days, end_of_day = _days(now)
    found = deaths.read([*hours, *days], [*hours[1:], end_of_hour, *days[1:], end_of_day])
    hourly = _chart(hours, found.buckets[:24], slot=20, label="%a %H:00", tick="%H:00", every=6)
    daily = _chart(days, found.buckets[24:], slot=64, label="%a %d %b", tick="%a %d", every=1)
    return hourly, daily, found


def sampled_hourly(now: datetime) -> dict[str, Chart]:
    """Retrying jobs and dead letters kept, the highest sample of each of the last 24 hours."""
    starts, until = _hours(now)
    buckets = status_samples.per_bucket(starts, [*starts[1:], until])
    charts = {}
    for name in ("retrying", "dead"):
        counts: list[status.Count | None] = [getattr(bucket, name) for bucket in buckets]
        bars = _bars(starts, counts, slot=20, label="%a %H:00", tick="%H:00", every=6)
        top = max((count for count in counts if count is not None), key=_order, default=status.Count(0))
        charts[name] = Chart(bars, 20, top, peak_chart=True)
    return charts


def _order(count: status.Count) -> tuple[int, bool]:
    return (count.value or 0, count.more)


def age(delay: timedelta | None) -> str:
    return "—" if delay is None else humanize_delay(delay)


def summary(site: str) -> dict[str, Any]:
    """Per queue: ready, retrying, running, dead, oldest due, longest running; dead per reason."""
    rows = status.queues()
    totals = status.totals(rows)
    labels = dict(DeadReason.choices)
    return {
        "now": totals.now,
        "queues": [
            {
                "row": row,
                "oldest_due": age(row.oldest_due),
                "longest_running": age(row.longest_running),
                "longest_running_url": (
                    reverse(f"{site}:django_jobretry_job_change", args=[row.longest_running_job])
                    if row.longest_running_job is not None
                    else None
                ),
            }
            for row in rows
        ],
        "totals": totals,
        "reasons": [
            {"value": reason, "label": labels[reason], "dead": count}
            for reason, count in totals.dead_by_reason.items()
        ],
        "count_limit": f"{status.COUNT_LIMIT:,}",
    }


def worker_panel(request: HttpRequest, site: str) -> dict[str, Any] | None:
    """The workers, for users who may view them (the workers page's own permission)."""
    if not holds(request, WorkerProcess._meta, "view"):
        return None
    rows = workers.listing(limit=WORKERS_SHOWN + 1)
    live = sum(1 for row in rows if row.live)
    return {
        "rows": [
            {
                "worker": row,
                "queues": workers.queue_list(row.queues),
                "heartbeat": f"{age(row.heartbeat_age)} ago",
            }
            for row in rows[:WORKERS_SHOWN]
        ],
        "live": live,
        "lost": len(rows) - live,
        "more": len(rows) > WORKERS_SHOWN,
        "url": reverse(f"{site}:django_jobretry_workerprocess_changelist"),
    }


def refresh_seconds(request: HttpRequest) -> int | None:
    """``?refresh=N`` for one of the offered periods; anything else (absent, "abc", "1") is off."""
    value = request.GET.get("refresh", "")
    return int(value) if value in {str(seconds) for seconds in REFRESH_CHOICES} else None


def refresh_links(current: int | None) -> list[dict[str, Any]]:
    """ "off" and each period ("30 s", "5 min"), with the query string that selects it."""
    choices: list[tuple[int | None, str]] = [(None, "off")]
    choices += [(n, f"{n // 60} min" if n >= 60 else f"{n} s") for n in REFRESH_CHOICES]
    return [
        {"label": label, "query": f"?refresh={seconds}" if seconds else "?", "current": seconds == current}
        for seconds, label in choices
    ]


def dashboard_view(admin: ModelAdmin[DeadLetter], request: HttpRequest) -> TemplateResponse:
    """The dashboard page; anyone who may view dead letters may see it."""
    if not admin.has_view_permission(request):
        raise PermissionDenied
    site = admin.admin_site.name
    figures = summary(site)
    now = figures["now"]
    refresh = refresh_seconds(request)
    hourly, daily, found = deaths_read(now)
    context = {
        **admin.admin_site.each_context(request),
        **figures,
        "title": "Jobs, workers and dead letters",
        "subtitle": None,
        "opts": admin.opts,
        "changelist_url": reverse(f"{site}:{admin.opts.app_label}_{admin.opts.model_name}_changelist"),
        "job_changelist_url": reverse(f"{site}:{Job._meta.app_label}_{Job._meta.model_name}_changelist"),
        "workers": worker_panel(request, site),
        "dying": dying.panel(found, site=site, now=now),
        "hourly": hourly,
        "sampled": sampled_hourly(now),
        "last_sample": status_samples.latest(),
        "samples_kept_days": status_samples.SAMPLES_KEPT.days,
        "daily": daily,
        "plot_height": PLOT_HEIGHT,
        "refresh": refresh,
        "refresh_links": refresh_links(refresh),
    }
    request.current_app = admin.admin_site.name
    return TemplateResponse(request, "admin/django_jobretry/deadletter/dashboard.html", context)
