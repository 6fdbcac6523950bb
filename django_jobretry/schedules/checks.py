"""System checks of the declared schedules (E040-E043): each names the schedule and where it was declared.

A schedule that cannot run fails quietly at its slot: a worker logs the
refusal and counts it, and nobody is woken. These checks say so at deploy
time instead. Messages start with where the schedule was declared (the
spec's ``source``: ``@job``, ``JOBRETRY["SCHEDULES"]``, a task backend),
then ``schedule 'name':``, then what is wrong.

E043 asks whether the schedule can make a run with the function the
workers build runs with (schedules/__init__.py run_columns), so both refuse the
same schedules with the same words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, register

from django_jobretry import schedules
from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.schema import validate
from django_jobretry.conf.task_modules import HOW_TO_ADD
from django_jobretry.display import did_you_mean
from django_jobretry.exceptions import JobRetryError
from django_jobretry.registry import registry
from django_jobretry.schedules import (
    SETTINGS_SOURCE,
    InvalidSchedule,
    ScheduleSpec,
    from_mapping,
    run_columns,
)

EXAMPLE = (
    'e.g. JOBRETRY["SCHEDULES"] = {"nightly": {"task": "reports.jobs.build", "cron": "0 3 * * *", '
    '"tz": "Europe/Berlin"}}, or "every": 300 (seconds) instead of "cron"'
)


def _error(code: str, source: str, name: str, problem: str, hint: str) -> Error:
    return Error(f"{source}: schedule {name!r}: {problem}", hint=hint, id=f"django_jobretry.{code}")


@register()
def check_schedule_settings(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """E040: JOBRETRY["SCHEDULES"] is not a dict, or schedules in it are invalid (each one reported)."""
    raw = jobretry_settings.raw
    if not isinstance(raw, Mapping) or "SCHEDULES" not in raw:
        return []  # E001 reports a JOBRETRY that is not a dict
    configured = raw["SCHEDULES"]
    if not isinstance(configured, Mapping):
        got = type(configured).__name__
        msg = f"{SETTINGS_SOURCE} must be a dict of schedule name -> dict, got {got}."
        return [Error(msg, hint=EXAMPLE, id="django_jobretry.E040")]
    errors: list[CheckMessage] = []
    for name, mapping in configured.items():
        try:
            from_mapping(name, mapping, SETTINGS_SOURCE)
        except InvalidSchedule as exc:
            errors.append(Error(f"{SETTINGS_SOURCE}: {exc}", hint=EXAMPLE, id="django_jobretry.E040"))
    return errors


@register()
def check_schedule_names(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """E041: one name, two schedules; only one of them runs, and which is an accident of imports or order."""
    hint = "Give each schedule its own name; a @job schedule is named after its task."
    errors: list[CheckMessage] = [
        _error(
            "E041",
            " and ".join(dict.fromkeys(sources)),
            name,
            f"declared {len(sources)} times with different values; only the last one imported runs.",
            hint,
        )
        for name, sources in sorted(schedules.conflicts.items())
    ]
    # Where each name is declared, in the order declared() reads them: a later one replaces the earlier.
    places = {name: [spec.source] for name, spec in schedules._declared.items()}
    for source, mappings in (
        *schedules.task_backend_mappings().items(),
        (SETTINGS_SOURCE, schedules.settings_mappings()),
    ):
        for name in mappings:
            places.setdefault(name, []).append(source)
    for name, sources in sorted(places.items(), key=lambda place: str(place[0])):
        if len(sources) > 1:
            problem = (
                f"has the name of the schedule declared in {' and '.join(sources[:-1])}, which it replaces."
            )
            errors.append(_error("E041", sources[-1], str(name), problem, hint))
    return errors


@register()
def check_schedule_tasks(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """E042: the schedule's task is not registered; E043: it is, but the schedule cannot make a run of it."""
    policies_known = not validate(jobretry_settings.raw)[1]  # else policies and limits are not reliable
    errors: list[CheckMessage] = []
    for spec in sorted(schedules.declared().values(), key=lambda spec: spec.name):
        definition = registry.get(spec.task_name)
        if definition is None:
            problem = (
                f"its task {spec.task_name!r} is not registered in this process, so no run of it can "
                f"start.{did_you_mean([spec.task_name], registry.names())}"
            )
            hint = f"Name a registered task, or {HOW_TO_ADD}."
            errors.append(_error("E042", spec.source, spec.name, problem, hint))
        elif policies_known and (why := run_problem(spec)) is not None:
            problem = f"no run of it can start: {why}"
            hint = (
                "Give arguments the task's signature takes, as JSON values, a policy "
                'JOBRETRY["POLICIES"] defines and a queue name enqueue accepts.'
            )
            errors.append(_error("E043", spec.source, spec.name, problem, hint))
    return errors


def run_problem(spec: ScheduleSpec) -> str | None:
    """Why a worker could not make a run of ``spec`` (what run_columns raises), or None."""
    try:
        run_columns(spec)
    except JobRetryError as exc:
        return str(exc)
    return None
