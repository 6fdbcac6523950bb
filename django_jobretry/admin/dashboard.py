"""The operator's overview: what is dying, each capability's panel, each queue's backlog, workers.

One page answers the first questions of an incident before anyone opens a list:
which tasks are dying and of what error (deadletters/admin_pages.py), what each capability
of features.py shows (what is held back since when and by whom, with its Resume
or Close beside it, which scheduled work is late, which declared limit is full:
each built for a features.Page), what is retrying, how late is each queue, what runs
longest, which workers are alive. It must stay cheap when the tables hold
millions of rows (it is opened exactly then), so every figure is an index walk
(console/__init__.py, console/trends.py): counts stop at
COUNT_LIMIT ("10,000+"; a chart bar at BAR_LIMIT), and nothing counts succeeded
jobs per queue. Deaths are counted as they happen, so a requeue or a discard
never lowers an hour's count. The retrying and dead jobs over time come from
the samples the workers take once a minute
(console/trends.py): the highest sample of each hour, an hour
without one drawn as a gap, never as a zero. The charts are inline SVG drawn
server-side (admin/charts.py): no JavaScript, no CDN, nothing for a CSP to
block. An optional ``?refresh=N`` reloads the page every N seconds.

Django's admin index lists registered models only, so the dashboard, a page
of the dead-letter admin, reaches the index and the sidebar through the
``Dashboard`` proxy (models/dead_letter.py): :class:`DashboardLinkAdmin` puts
a "Dashboard: what is dying" row under "Jobs and dead letters", for the
users who may view dead letters, and its list redirects to the dashboard.
The app's own index page (templates/admin/django_jobretry/app_index.html)
adds what is dying now.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from django_jobretry import console, features
from django_jobretry.admin import charts
from django_jobretry.admin.base import NoWritesAdmin, holds
from django_jobretry.console import trends, workers
from django_jobretry.deadletters import admin_pages
from django_jobretry.display import humanize_delay
from django_jobretry.models import DeadLetter, DeadReason, Job, WorkerProcess

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _Base = admin.ModelAdmin[DeadLetter]
else:
    _Base = admin.ModelAdmin

#: The auto-refresh periods offered, in seconds; any other ``?refresh=`` means off.
REFRESH_CHOICES = (10, 30, 60, 300)
#: Workers listed on the page; the workers page lists them all.
WORKERS_SHOWN = 50


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


def deaths_read(now: datetime) -> tuple[charts.Chart, charts.Chart, trends.Deaths]:
    """Deaths per hour (the last 24) and per day (the last 7), and per task and error class: one block."""
    hours, end_of_hour = _hours(now)
    days, end_of_day = _days(now)
    found = trends.read_deaths([*hours, *days], [*hours[1:], end_of_hour, *days[1:], end_of_day])
    hourly = charts.chart(hours, found.buckets[:24], slot=20, label="%a %H:00", tick="%H:00", every=6)
    daily = charts.chart(days, found.buckets[24:], slot=64, label="%a %d %b", tick="%a %d", every=1)
    return hourly, daily, found


def sampled_hourly(now: datetime) -> dict[str, charts.Chart]:
    """Retrying jobs and dead letters kept, the highest sample of each of the last 24 hours."""
    starts, until = _hours(now)
    buckets = trends.samples_per_bucket(starts, [*starts[1:], until])
    sampled = {}
    for name in ("retrying", "dead"):
        counts: list[console.Count | None] = [getattr(bucket, name) for bucket in buckets]
        bars = charts.bars(starts, counts, slot=20, label="%a %H:00", tick="%H:00", every=6)
        top = max((count for count in counts if count is not None), key=_order, default=console.Count(0))
        sampled[name] = charts.Chart(bars, 20, top, peak_chart=True)
    return sampled


def _order(count: console.Count) -> tuple[int, bool]:
    return (count.value or 0, count.more)


def age(delay: timedelta | None) -> str:
    return "—" if delay is None else humanize_delay(delay)


def summary(site: str) -> dict[str, Any]:
    """Per queue: ready, retrying, running, dead, oldest due, longest running; dead per reason."""
    rows = console.queues()
    totals = console.totals(rows)
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
        "count_limit": f"{console.COUNT_LIMIT:,}",
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


def capability_panels(page: features.Page) -> dict[str, Any]:
    """Each capability's panel by its key (None: not shown), and the includes of those shown, in two rows."""
    built = [
        (feature.panel, features.load(feature.panel.build)(page))
        for feature in features.FEATURES
        if feature.panel is not None
    ]
    shown = [panel for panel, found in built if found is not None]
    return {
        **{panel.key: found for panel, found in built},
        "first_panels": [panel.template for panel in shown if panel.first],
        "row_panels": [panel.template for panel in shown if not panel.first],
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


class DashboardPage(_Base):
    """The dashboard as a page of the dead-letter admin: anyone who may view dead letters may see it."""

    def dashboard_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.dashboard_view)
        return [path("dashboard/", view, name="{}_{}_dashboard".format(*info))]

    def dashboard_view(self, request: HttpRequest) -> TemplateResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        site = self.admin_site.name
        figures = summary(site)
        now = figures["now"]
        refresh = refresh_seconds(request)
        hourly, daily, found = deaths_read(now)
        context = {
            **self.admin_site.each_context(request),
            **figures,
            "title": "Jobs, workers and dead letters",
            "subtitle": None,
            "opts": self.opts,
            "changelist_url": reverse(f"{site}:{self.opts.app_label}_{self.opts.model_name}_changelist"),
            "job_changelist_url": reverse(f"{site}:{Job._meta.app_label}_{Job._meta.model_name}_changelist"),
            "workers": worker_panel(request, site),
            **capability_panels(features.Page(request, site, now)),
            "dying": admin_pages.panel(found, site=site, now=now),
            "groups": admin_pages.top_groups(site),
            "groups_url": reverse(f"{site}:django_jobretry_deadletter_groups") + "?since=24h",
            "hourly": hourly,
            "sampled": sampled_hourly(now),
            "last_sample": trends.latest_sample(),
            "samples_kept_days": trends.SAMPLES_KEPT.days,
            "daily": daily,
            "plot_height": charts.PLOT_HEIGHT,
            "refresh": refresh,
            "refresh_links": refresh_links(refresh),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/django_jobretry/deadletter/dashboard.html", context)


class DashboardLinkAdmin(NoWritesAdmin):
    """Only a list URL, which leads to the dashboard; visible to those who may view dead letters."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return holds(request, DeadLetter._meta, "view")

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.changelist_view)
        return [path("", view, name="{}_{}_changelist".format(*info))]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:django_jobretry_deadletter_dashboard"))
