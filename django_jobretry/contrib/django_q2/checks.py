"""System checks for the django-q2 adapter: the setting, and Q_CLUSTER values it cannot work with.

Read from settings at check time (django-q2 freezes Q_CLUSTER in
``django_q.conf.Conf`` when first imported; the check reads the setting
itself). Ids are stable, documented in docs/django-q2.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.db import router

from django_jobretry.conf import jobretry_settings
from django_jobretry.settings_schema import validate

APP = "django_jobretry.contrib.django_q2"
EXAMPLE = 'JOBRETRY["DJANGO_Q2"] = {"POLICY": "default"}'
RECOMMENDED = 'Q_CLUSTER = {"orm": "default", "max_attempts": 0, "timeout": 60, "retry": 90, ...}'


def _error(number: int, msg: str, hint: str) -> Error:
    return Error(msg, hint=hint, id=f"django_jobretry.E{number:03d}")


@register()
def check_django_q2(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Everything the adapter needs, each problem with what to change and why."""
    raw = jobretry_settings.raw
    section = raw.get("DJANGO_Q2") if isinstance(raw, dict) else None
    problems: list[CheckMessage] = []
    if section is not None:
        problems += _setting_problems(section, raw)
    problems += _app_problems()
    if not any(p.id == "django_jobretry.E032" for p in problems):
        problems += cluster_problems(getattr(settings, "Q_CLUSTER", None))
    return problems


def _setting_problems(section: object, raw: dict[str, Any]) -> list[CheckMessage]:
    if not isinstance(section, dict) or set(section) != {"POLICY"} or not isinstance(section["POLICY"], str):
        return [
            _error(
                30, f'JOBRETRY["DJANGO_Q2"] must be a dict with one key, "POLICY", got {section!r}.', EXAMPLE
            )
        ]
    policies, _ = validate(raw)
    if section["POLICY"] not in policies:
        return [
            _error(
                31,
                f'JOBRETRY["DJANGO_Q2"]["POLICY"] = {section["POLICY"]!r} is not a policy in POLICIES.',
                f"One of {sorted(policies)}.",
            )
        ]
    return []


def _app_problems() -> list[CheckMessage]:
    try:
        import django_q  # noqa: F401
    except ImportError:
        return [_error(32, "django-q2 is not installed.", "pip install 'django-jobretry[django-q2]'")]
    apps = list(settings.INSTALLED_APPS)
    if "django_q" not in apps:
        return [_error(32, '"django_q" is not in INSTALLED_APPS.', f'Add it before "{APP}".')]
    mine = next((i for i, name in enumerate(apps) if name.startswith(APP)), len(apps))
    if apps.index("django_q") > mine or "django_jobretry" not in apps[:mine]:
        return [
            _error(
                32,
                f'"{APP}" must come after "django_q" and "django_jobretry" in INSTALLED_APPS.',
                "It connects to their signals and uses their models.",
            )
        ]
    return []


def cluster_problems(cluster: object) -> list[CheckMessage]:
    """What in Q_CLUSTER defeats the adapter; each message says which value and why."""
    if not isinstance(cluster, dict):
        return [_error(33, "Q_CLUSTER is not set: the adapter needs django-q2's ORM broker.", RECOMMENDED)]
    problems: list[CheckMessage] = []
    orm = cluster.get("orm")
    others = [key for key in ("redis", "sqs", "iron_mq", "mongo", "broker_class") if cluster.get(key)]
    if not orm or others:
        problems.append(
            _error(
                33,
                f"Q_CLUSTER does not use the ORM broker (orm={orm!r}, other brokers: {others}): "
                "the adapter keeps retries and dead letters in the ORM queue table.",
                'Set Q_CLUSTER["orm"] = "default" and remove the other broker settings.',
            )
        )
    elif router.db_for_write(_dead_letter_model()) != orm:
        problems.append(
            _error(
                37,
                f'Q_CLUSTER["orm"] = {orm!r} is not the database dead letters are written to: '
                "a task could be buried without leaving the queue.",
                "Use the same database alias for both.",
            )
        )
    attempts = cluster.get("max_attempts", 0)
    if attempts != 0:
        problems.append(
            _error(
                34,
                f'Q_CLUSTER["max_attempts"] = {attempts!r}: django-q2 deletes a task that reaches it, '
                "before the policy decides and without a dead letter.",
                'Set Q_CLUSTER["max_attempts"] = 0; the policy\'s max_attempts limits attempts instead.',
            )
        )
    timeout, retry = cluster.get("timeout"), cluster.get("retry", 60)
    if not isinstance(timeout, int | float) or not isinstance(retry, int | float) or timeout >= retry:
        problems.append(
            _error(
                35,
                f'Q_CLUSTER["timeout"] = {timeout!r} must be set and below Q_CLUSTER["retry"] = {retry!r}: '
                "a task still running when its retry lock passes is delivered again meanwhile, "
                "and its outcome is then ignored.",
                'e.g. "timeout": 60, "retry": 90.',
            )
        )
    if cluster.get("sync"):
        problems.append(
            _error(
                36,
                'Q_CLUSTER["sync"] = True runs tasks in the caller, without a broker row to retry.',
                'Remove "sync" (or set it to False).',
            )
        )
    if cluster.get("ack_failures"):
        problems.append(
            Warning(
                'Q_CLUSTER["ack_failures"] = True is overridden for tasks a policy covers: their '
                "failures stay in the queue for the retry or go to the dead letters.",
                hint="Tasks opted out with retry_policy(None) keep ack_failures.",
                id="django_jobretry.W030",
            )
        )
    return problems


def _dead_letter_model() -> Any:
    from django_jobretry.models import DeadLetter

    return DeadLetter
