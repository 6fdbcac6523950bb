"""FEATURES: the one list of capabilities, and what each adds to the faces every capability shares.

Schedules, holds (pauses and circuit breakers) and limits work differently
(a row insert, a per-row predicate, a lane walk), so they share no base
class. What they share is their outward shape: a periodic duty on each
worker's heartbeat, a `jobstatus` section with its JSON, metrics, a dashboard
panel and admin pages. Each face iterates :data:`FEATURES` for its part, so
a new capability adds its own modules and one :class:`Feature` here; no face
names a capability. A dashboard panel is built for a :class:`Page`, defined
here beside :class:`Panel` so that the capabilities' panels and the dashboard
that iterates them import it from below both.

Every part is a dotted path, imported by the face that uses it when it uses
it: this module imports nothing of the package, so the worker never imports
an admin page through it, nor settings a service. Each path stays within its
face's layer; tests/unit/test_import_graph.py checks that, and counts each
path as an import of the face for its cycle check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from django.http import HttpRequest
from django.utils.module_loading import import_string


@dataclass(frozen=True)
class Section:
    """A capability's part of `jobstatus`: one JSON key, and a text section when it has something to show."""

    #: The JSON key, always present (an empty list or object when nothing is there): scripts read it.
    key: str
    #: ``() -> report``: one read of the capability's state.
    read: str
    #: ``(report) -> JSON value``.
    as_json: str
    #: ``(report) -> list[str]``: the text section; an empty list shows none.
    lines: str


@dataclass(frozen=True)
class Panel:
    """A capability's panel on the admin dashboard."""

    #: Its name in the dashboard's template context (None there when the panel is not shown).
    key: str
    #: ``(page: Page) -> dict | None``: the include's context; None hides it.
    build: str
    #: The template included with the page's context.
    template: str
    #: Shown above the dying tasks (what holds work back now), not in the row of panels below them.
    first: bool = False


@dataclass
class Page:
    """What a dashboard panel is built for: the request, the admin site's name, the database's now.

    admin/dashboard.py builds one per page and calls each :class:`Panel`'s
    ``build`` with it. A panel changes nothing on a GET.
    """

    request: HttpRequest
    site: str
    now: datetime
    _reads: dict[Callable[[], object], object] = field(default_factory=dict)

    def read[T](self, reader: Callable[[], T]) -> T:
        """``reader()``, once per page: panels showing the same report share one read of it."""
        if reader not in self._reads:
            self._reads[reader] = reader()
        return cast(T, self._reads[reader])


@dataclass(frozen=True)
class Feature:
    """One capability's faces; each part is optional and names what the face imports and calls."""

    name: str
    #: A class shaped as a ``worker.lifecycle.Duty`` (``failure`` and its four steps), run every beat;
    #: built for each heartbeat by its ``serving(shift)`` if it has one (None: not on this worker), else
    #: without arguments.
    duty: str | None = None
    status: Section | None = None
    #: ``() -> Iterator[prometheus_client Metric]``, called at each scrape.
    collect: str | None = None
    panel: Panel | None = None
    #: ``(model, ModelAdmin)`` pairs that ``admin/__init__.py`` registers on Django's admin site.
    admins: tuple[tuple[str, str], ...] = ()


def load(path: str) -> Any:
    """The object at a dotted path of a :class:`Feature` (imported now, on first use by a face)."""
    return import_string(path)


#: Every capability, in the order each face shows them (jobstatus' sections and JSON keys, metrics,
#: the heartbeat's duties, the dashboard's panels).
FEATURES: tuple[Feature, ...] = (
    Feature(
        "schedules",
        duty="django_jobretry.schedules.runs.Scheduler",
        status=Section(
            "schedules",
            "django_jobretry.schedules.cli.read",
            "django_jobretry.schedules.cli.list_json",
            "django_jobretry.schedules.cli.status_lines",
        ),
        collect="django_jobretry.schedules.status.collect",
        panel=Panel(
            "schedules",
            "django_jobretry.schedules.admin.schedules_panel",
            "admin/django_jobretry/includes/panel_schedules.html",
        ),
        admins=(("django_jobretry.models.Schedule", "django_jobretry.schedules.admin.ScheduleAdmin"),),
    ),
    Feature(
        "holds",
        duty="django_jobretry.holds.pauses.Holds",
        status=Section(
            "held",
            "django_jobretry.holds.holds_report",
            "django_jobretry.holds.cli.as_json",
            "django_jobretry.holds.cli.status_lines",
        ),
        collect="django_jobretry.holds.cli.collect",
        panel=Panel(
            "held",
            "django_jobretry.holds.panel.held_panel",
            "admin/django_jobretry/includes/panel_held.html",
            first=True,
        ),
        admins=(
            ("django_jobretry.models.Pause", "django_jobretry.holds.admin.PauseAdmin"),
            ("django_jobretry.models.Circuit", "django_jobretry.holds.admin.CircuitAdmin"),
        ),
    ),
    Feature(
        "limits",
        status=Section(
            "limits",
            "django_jobretry.limits.status.limits_report",
            "django_jobretry.limits.status.as_json",
            "django_jobretry.limits.status.status_lines",
        ),
        collect="django_jobretry.limits.status.collect",
        panel=Panel(
            "limits",
            "django_jobretry.limits.status.limits_panel",
            "admin/django_jobretry/includes/panel_limits.html",
        ),
    ),
    Feature(
        "flows",
        status=Section(
            "flows",
            "django_jobretry.flows.status.flows_report",
            "django_jobretry.flows.status.as_json",
            "django_jobretry.flows.status.status_lines",
        ),
        collect="django_jobretry.flows.status.collect",
        admins=(("django_jobretry.models.Flow", "django_jobretry.flows.admin.FlowAdmin"),),
    ),
    Feature(
        "progress",
        status=Section(
            "progress",
            "django_jobretry.console.progress.running_progress",
            "django_jobretry.console.progress.as_json",
            "django_jobretry.console.progress.status_lines",
        ),
    ),
)
