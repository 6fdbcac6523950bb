"""The adapter's app: connects to django-q2's signals, and checks first that it can.

``ready()`` wires the worker and monitor hooks, the error reporter and the
requeue path (:func:`connect`) when django-q2 is installed and new enough.
The system checks below say what else the adapter needs: the setting, and
the Q_CLUSTER values it cannot work with. They read settings at check time
(django-q2 freezes Q_CLUSTER in ``django_q.conf.Conf`` when first imported;
the check reads the setting itself). Ids are stable, documented in
docs/django-q2.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.db import router

from django_jobretry.conf import jobretry_settings
from django_jobretry.conf.schema import validate
from django_jobretry.display import did_you_mean


class DjangoQ2AdapterConfig(AppConfig):
    """Wires the worker and monitor hooks, the error reporter and the requeue path."""

    name = "django_jobretry.contrib.django_q2"
    label = "jobretry_django_q2"
    verbose_name = "Retries and dead letters for django-q2"

    def ready(self) -> None:
        try:
            from django_q import signals
        except ImportError:  # the check (E032) says so; nothing to connect to
            return
        if hasattr(signals, "post_execute_in_worker"):  # else too old (before 1.10): E032 says so
            connect()


def connect() -> None:
    """Connect every hook to django-q2's signals; install the reporter; route requeues."""
    import logging

    from django_q.signals import post_execute, post_execute_in_worker, post_spawn, pre_execute

    from django_jobretry.contrib.django_q2 import claims, hooks, monitor, redelivery
    from django_jobretry.deadletters.external import register_resubmitter

    pre_execute.connect(hooks.on_pre_execute, dispatch_uid="jobretry_q2_pre_execute")
    post_execute_in_worker.connect(hooks.on_post_execute_in_worker, dispatch_uid="jobretry_q2_post_worker")
    post_execute.connect(monitor.on_post_execute, dispatch_uid="jobretry_q2_post_execute")
    post_spawn.connect(claims.recover_lost, dispatch_uid="jobretry_q2_post_spawn")
    if not hooks.install_reporter():
        logging.getLogger("django_jobretry").warning(
            "django_q.worker has no error_reporter: failed django-q2 tasks are classified from "
            "their result text only (always retryable)",
            extra={"outcome": "reporter_missing"},
        )
    register_resubmitter("django_q2", redelivery.resubmit)


# System checks (registered when this module is imported, as Django loads the app).

APP = "django_jobretry.contrib.django_q2"
EXAMPLE = 'JOBRETRY["DJANGO_Q2"] = {"POLICY": "default"}'
RECOMMENDED = (
    'Q_CLUSTER = {"orm": "default", "max_attempts": 0, "timeout": 60, "retry": 90, ...} '
    'or Q_CLUSTER = {"redis": {"host": "127.0.0.1", "port": 6379, "db": 0}, "timeout": 60, ...}'
)


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
        problems += claim_directory_problems()
    return problems


def claim_directory_problems() -> list[CheckMessage]:
    """W039: the default claim directory exists and is not private to this user; which one is used instead.

    A warning, not an error: anyone who can create a directory in /tmp could
    otherwise stop every management command of the project, qcluster too.
    """
    from django.utils.connection import ConnectionDoesNotExist

    from django_jobretry.contrib.django_q2 import claims

    try:
        used, refused = claims.usable()
    except ConnectionDoesNotExist:  # Q_CLUSTER["orm"] names no database: Django's checks say so
        return []
    if refused is None:
        return []
    if used is None:
        effect = (
            "nor is any fallback, so workers write and read no claims and a worker killed "
            "mid-task is not counted"
        )
    else:
        effect = f"workers keep their claims in {used} instead"
    return [
        Warning(
            f"The django-q2 claim directory {refused}: no claim is written or read there; {effect}.",
            hint=f"Check who made {claims.directory()} and remove it; workers then use it again.",
            id="django_jobretry.W039",
        )
    ]


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
                f'JOBRETRY["DJANGO_Q2"]["POLICY"] = {section["POLICY"]!r} is not a policy in POLICIES.'
                f"{did_you_mean([section['POLICY']], policies)}",
                f"One of {sorted(policies)}.",
            )
        ]
    return []


def _app_problems() -> list[CheckMessage]:
    try:
        from django_q import signals
    except ImportError:
        return [_error(32, "django-q2 is not installed.", "pip install 'django-jobretry[django-q2]'")]
    if not hasattr(signals, "post_execute_in_worker"):
        from importlib.metadata import version

        return [
            _error(
                32,
                f"django-q2 {version('django-q2')} is too old for the adapter: it needs 1.10 or newer "
                "(the post_execute_in_worker signal), so nothing is connected.",
                "pip install 'django-q2>=1.10,<2'",
            )
        ]
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


#: Q_CLUSTER keys naming a broker, in the order django-q2's get_broker() tries them; none: Redis.
BROKER_KEYS = ("broker_class", "iron_mq", "sqs", "orm", "mongo")
SUPPORTED = 'the ORM broker ("orm") or the Redis broker ("redis")'


def broker_of(cluster: dict[str, Any]) -> str:
    """The broker django-q2 builds from ``cluster``: its first broker key set, else "redis"."""
    return next((key for key in BROKER_KEYS if cluster.get(key)), "redis")


def cluster_problems(cluster: object) -> list[CheckMessage]:
    """What in Q_CLUSTER defeats the adapter; each message says which value and why."""
    if not isinstance(cluster, dict):
        return [_error(33, f"Q_CLUSTER is not set: the adapter needs {SUPPORTED}.", RECOMMENDED)]
    broker = broker_of(cluster)
    named = [key for key in (*BROKER_KEYS, "redis") if cluster.get(key)]
    problems: list[CheckMessage] = []
    if len(named) > 1:
        problems.append(
            _error(
                33,
                f"Q_CLUSTER names more than one broker ({', '.join(named)}): django-q2 uses {broker!r} "
                "and ignores the rest, so the settings do not say which broker the adapter works with.",
                "Keep the settings of one broker.",
            )
        )
    elif broker not in ("orm", "redis"):
        problems.append(
            _error(
                33,
                f"Q_CLUSTER uses django-q2's {broker!r} broker: the adapter works only with {SUPPORTED}, "
                "where it can hold a failed task back for the policy's delay.",
                f'Set Q_CLUSTER["orm"] = "default" or Q_CLUSTER["redis"] = {{...}} instead of {broker!r}.',
            )
        )
    elif broker == "orm":
        problems += _orm_problems(cluster)
    else:
        problems += _redis_problems(cluster)
    if cluster.get("sync"):
        problems.append(
            _error(
                36,
                'Q_CLUSTER["sync"] = True runs tasks in the caller, without a broker to retry through.',
                'Remove "sync" (or set it to False).',
            )
        )
    return problems


def _orm_problems(cluster: dict[str, Any]) -> list[CheckMessage]:
    """The ORM broker redelivers on its own (max_attempts, retry); the adapter takes those over."""
    problems: list[CheckMessage] = []
    orm = cluster["orm"]
    if router.db_for_write(_dead_letter_model()) != orm:
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
                "with the ORM broker a task still running when its retry lock passes is delivered "
                "again meanwhile, and its outcome is then ignored.",
                'e.g. "timeout": 60, "retry": 90.',
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


def _redis_problems(cluster: dict[str, Any]) -> list[CheckMessage]:
    """Redis never redelivers: max_attempts, retry and ack_failures do nothing there.

    A retry is a Schedule row (redelivery.py), so the cluster's scheduler
    must run, and the ``redis`` client must be importable.
    """
    problems: list[CheckMessage] = []
    try:
        import redis  # noqa: F401
    except ImportError:
        problems.append(
            _error(
                33,
                "Q_CLUSTER uses the Redis broker, but the redis package is not installed.",
                "pip install redis",
            )
        )
    if cluster.get("scheduler", True) is False:
        problems.append(
            _error(
                38,
                'Q_CLUSTER["scheduler"] = False: with the Redis broker a retry is a one-off Schedule '
                "that the cluster's scheduler delivers; without it no retry ever runs.",
                'Remove "scheduler" (or set it to True) on the cluster that runs these tasks.',
            )
        )
    return problems


def _dead_letter_model() -> Any:
    from django_jobretry.models import DeadLetter

    return DeadLetter
