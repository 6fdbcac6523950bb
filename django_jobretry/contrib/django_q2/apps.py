"""The adapter's app: connects to django-q2's signals when django-q2 is installed."""

from __future__ import annotations

from django.apps import AppConfig


class DjangoQ2AdapterConfig(AppConfig):
    """Wires the worker and monitor hooks, the error reporter and the requeue path."""

    name = "django_jobretry.contrib.django_q2"
    label = "jobretry_django_q2"
    verbose_name = "Retries and dead letters for django-q2"

    def ready(self) -> None:
        from django_jobretry.contrib.django_q2 import checks  # noqa: F401 - registers the checks

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
