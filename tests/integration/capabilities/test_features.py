"""Every face takes its capabilities from features.FEATURES, and from nowhere else.

The negative control for "one list": a capability planted in FEATURES shows
up in `jobstatus` (text and JSON), the metrics, the heartbeat's duties, the
dashboard and the admin; with FEATURES emptied, no face shows schedules,
holds, limits or flows, so no face keeps a list of its own beside it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin import AdminSite, ModelAdmin
from django.urls import reverse
from prometheus_client.core import GaugeMetricFamily, Metric

import django_jobretry.admin
from django_jobretry import features
from django_jobretry.admin import register_capabilities
from django_jobretry.console.workers import Registration
from django_jobretry.features import FEATURES, Feature, Panel, Section
from django_jobretry.flows import status as flows_status
from django_jobretry.holds import cli as holds_cli
from django_jobretry.holds.admin import CircuitAdmin, PauseAdmin
from django_jobretry.limits import status as status_limits
from django_jobretry.metrics.collector import JobRetryCollector
from django_jobretry.models import Circuit, Flow, Job, Pause, Schedule
from django_jobretry.schedules import status as schedule_status
from django_jobretry.schedules.admin import ScheduleAdmin
from django_jobretry.schedules.runs import Scheduler
from django_jobretry.worker import heartbeat, lifecycle
from django_jobretry.worker.lifecycle import Shift, WorkerOptions
from tests.integration.conftest import Operator, run_command

HERE = __name__
DASHBOARD = reverse("admin:django_jobretry_deadletter_dashboard")
CAPABILITY_KEYS = {"schedules", "held", "limits", "flows", "progress"}


class PlantedDuty(lifecycle.Duty):
    failure = "do the planted duty"


def planted_read() -> list[str]:
    return ["one"]


def planted_json(report: list[str]) -> dict[str, Any]:
    return {"planted": report}


def planted_lines(report: list[str]) -> list[str]:
    return [f"Planted: {len(report)}"]


def planted_collect() -> Iterator[Metric]:
    yield GaugeMetricFamily("jobretry_planted", "A planted capability's figure.", value=1)


def planted_panel(page: Any) -> dict[str, Any]:
    return {"text": f"planted for {page.request.user.username}"}


PLANTED = Feature(
    "planted",
    duty=f"{HERE}.PlantedDuty",
    status=Section("planted", f"{HERE}.planted_read", f"{HERE}.planted_json", f"{HERE}.planted_lines"),
    collect=f"{HERE}.planted_collect",
    panel=Panel("planted", f"{HERE}.planted_panel", "planted_panel.html"),
    admins=(("django_jobretry.models.Job", "django.contrib.admin.ModelAdmin"),),
)


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch, settings: Any, tmp_path: Path) -> Feature:
    """FEATURES with the planted capability last, and its panel's template on the template path."""
    (tmp_path / "planted_panel.html").write_text('<section id="planted">{{ planted.text }}</section>')
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path, *settings.TEMPLATES[0]["DIRS"]]}]
    monkeypatch.setattr(features, "FEATURES", (*FEATURES, PLANTED))
    return PLANTED


@pytest.fixture
def emptied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(features, "FEATURES", ())


def shift(**options: Any) -> Shift:
    registration = Registration("w1", "host", 1, ["default"], 1, "thread", "0", 30.0)
    return Shift(registration, WorkerOptions(**options), threading.Event())


# -- every dotted path of the list names something ------------------------------------------------


def test_every_path_of_every_capability_imports() -> None:
    for feature in FEATURES:
        paths: list[str | None] = [path for pair in feature.admins for path in pair]
        paths += [feature.duty, feature.collect]
        if feature.status:
            paths += [feature.status.read, feature.status.as_json, feature.status.lines]
        if feature.panel:
            paths.append(feature.panel.build)
        for path in filter(None, paths):
            assert features.load(path) is not None, path


# -- the heartbeat ---------------------------------------------------------------------------------


def test_the_heartbeat_runs_each_capabilitys_duty_between_the_workers_own() -> None:
    kinds = [type(duty).__name__ for duty in heartbeat.console_duties(shift())]
    assert kinds == ["WorkerRow", "EventCounts", "Holds", "StatusSample"]


def test_a_worker_declaring_schedules_runs_the_scheduler_duty_unless_burst_or_told_not_to(
    settings: Any,
) -> None:
    settings.JOBRETRY = {"SCHEDULES": {"tick": {"task": "tests.jobs_app.jobs.noop", "every": 60}}}
    kinds = [type(duty).__name__ for duty in heartbeat.console_duties(shift())]
    assert kinds == ["WorkerRow", "EventCounts", "Scheduler", "Holds", "StatusSample"]
    scheduler = next(duty for duty in heartbeat.console_duties(shift()) if isinstance(duty, Scheduler))
    assert not scheduler.thread.is_alive()  # its thread starts with the heartbeat's duties, not before
    for options in ({"burst": True}, {"schedules": False}):
        assert "Scheduler" not in [type(duty).__name__ for duty in heartbeat.console_duties(shift(**options))]


@pytest.mark.usefixtures("planted")
def test_a_planted_capabilitys_duty_runs_on_the_heartbeat() -> None:
    kinds = [type(duty).__name__ for duty in heartbeat.console_duties(shift())]
    assert kinds == ["WorkerRow", "EventCounts", "Holds", "PlantedDuty", "StatusSample"]


@pytest.mark.usefixtures("emptied")
def test_without_capabilities_the_heartbeat_runs_only_the_workers_own_duties() -> None:
    kinds = [type(duty).__name__ for duty in heartbeat.console_duties(shift())]
    assert kinds == ["WorkerRow", "EventCounts", "StatusSample"]


# -- jobstatus ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_jobstatus_json_has_each_capabilitys_key_in_the_lists_order() -> None:
    keys = list(json.loads(run_command("jobstatus", "--json")))
    assert keys[-5:] == ["schedules", "held", "limits", "flows", "progress"]


@pytest.mark.django_db
@pytest.mark.usefixtures("planted")
def test_a_planted_capability_has_its_jobstatus_key_and_section() -> None:
    found = json.loads(run_command("jobstatus", "--json"))
    assert list(found)[-6:] == ["schedules", "held", "limits", "flows", "progress", "planted"]
    assert found["planted"] == {"planted": ["one"]}
    assert run_command("jobstatus").endswith("\nPlanted: 1\n")


@pytest.mark.django_db
def test_without_capabilities_jobstatus_shows_none_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    full_text = run_command("jobstatus")
    assert "Limits (running / limit" in full_text  # tests/jobs_app declares limits
    monkeypatch.setattr(features, "FEATURES", ())
    assert CAPABILITY_KEYS.isdisjoint(json.loads(run_command("jobstatus", "--json")))
    assert "Limits (running / limit" not in run_command("jobstatus")


# -- metrics ----------------------------------------------------------------------------------------


def family_names() -> list[str]:
    return [metric.name for metric in JobRetryCollector().collect()]


@pytest.mark.django_db
def test_the_metrics_add_each_capabilitys_families_and_only_through_the_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full = family_names()
    own = [
        metric.name
        for collect in (schedule_status, holds_cli, status_limits, flows_status)
        for metric in collect.collect()
    ]
    monkeypatch.setattr(features, "FEATURES", ())
    core = family_names()
    assert full == [*core, *own]
    monkeypatch.setattr(features, "FEATURES", (*FEATURES, PLANTED))
    assert family_names() == [*core, *own, "jobretry_planted"]


# -- the dashboard ----------------------------------------------------------------------------------


@pytest.fixture
def viewer(make_user: Any) -> Operator:
    return Operator(
        make_user("view_deadletter", "view_schedule", "view_pause", "view_circuit", name="viewer")
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("planted")
def test_a_planted_capabilitys_panel_is_on_the_dashboard(viewer: Operator) -> None:
    response = viewer.get(DASHBOARD)
    assert response.status_code == 200
    assert response.context["planted"] == {"text": "planted for viewer"}
    assert response.context["row_panels"][-1] == "planted_panel.html"
    assert '<section id="planted">planted for viewer</section>' in response.content.decode()


@pytest.mark.django_db
def test_without_capabilities_the_dashboard_has_none_of_their_panels(
    viewer: Operator, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = viewer.get(DASHBOARD)
    assert 'id="schedules"' in page.content.decode()  # the viewer may see schedules, and limits are declared
    assert 'id="limits"' in page.content.decode()
    monkeypatch.setattr(features, "FEATURES", ())
    page = viewer.get(DASHBOARD)
    assert page.status_code == 200
    assert CAPABILITY_KEYS.isdisjoint(page.context.keys())
    assert 'id="schedules"' not in page.content.decode()
    assert 'id="limits"' not in page.content.decode()


@pytest.mark.django_db
def test_panels_showing_the_same_report_share_one_read(
    viewer: Operator, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = []

    def counted() -> list[status_limits.LimitLine]:
        reads.append(1)
        return []

    monkeypatch.setattr(status_limits, "limits_report", counted)
    assert viewer.get(DASHBOARD).status_code == 200
    assert reads == [1]  # the Held and Limits panels both show it


# -- the admin ------------------------------------------------------------------------------------


def test_each_capabilitys_admin_pages_are_registered_and_importable_by_name() -> None:
    registered = {model: type(page) for model, page in admin.site._registry.items()}
    assert registered[Schedule] is ScheduleAdmin
    assert registered[Pause] is PauseAdmin
    assert registered[Circuit] is CircuitAdmin
    assert django_jobretry.admin.CircuitAdmin is CircuitAdmin  # the documented import path
    missing = "NoSuchAdmin"
    with pytest.raises(AttributeError, match=missing):
        getattr(django_jobretry.admin, missing)


@pytest.mark.usefixtures("planted")
def test_a_planted_capabilitys_admin_page_is_registered() -> None:
    site = AdminSite(name="planted")
    register_capabilities(site)
    assert type(site._registry[Job]) is ModelAdmin
    assert {Schedule, Pause, Circuit, Flow, Job} == set(site._registry)
