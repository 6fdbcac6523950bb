from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class JobRetryConfig(AppConfig):
    """Registers the settings checks and imports the task modules (each app's jobs.py, ...)."""

    name = "django_jobretry"
    label = "django_jobretry"
    verbose_name = "Jobs and dead letters"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import sys

        from django_jobretry.conf import (
            checks,  # noqa: F401 - registers the system checks
            jobretry_settings,
        )
        from django_jobretry.conf.databases import apply_connect_defaults
        from django_jobretry.conf.task_modules import import_startup_modules
        from django_jobretry.management.cli import runs_our_command
        from django_jobretry.worker.lifecycle import is_worker_process, remember_stop_requests

        # Before the (possibly slow) jobs.py imports: a SIGTERM meanwhile must
        # end a starting worker cleanly, not kill it.
        if is_worker_process(sys.argv):
            remember_stop_requests()
        # Before anything connects: our processes connect with bounded TCP (a partition is
        # an error within seconds, not a hang); the project's own OPTIONS win.
        if runs_our_command(sys.argv):
            apply_connect_defaults()

        # Fill the task registry from every installed app's jobs.py, the way
        # the admin finds admin.py, and from JOBRETRY["TASK_MODULES"]; workers
        # only run what is registered. django.tasks tasks live in tasks.py by
        # convention; they register themselves when a JobRetryBackend validates them.
        import_startup_modules(jobretry_settings.raw, with_tasks=uses_task_backend())


BACKENDS_MODULE = "django_jobretry.contrib.django_tasks.backend"


def uses_task_backend() -> bool:
    """Whether settings.TASKS configures a JobRetryBackend (or a subclass of it)."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    configured = getattr(settings, "TASKS", None)
    if not isinstance(configured, dict):
        return False
    for params in configured.values():
        path = params.get("BACKEND") if isinstance(params, dict) else None
        try:
            backend = import_string(path) if isinstance(path, str) else None
        except (ImportError, ImproperlyConfigured):
            continue  # Django's own check reports a backend that cannot be imported
        if isinstance(backend, type) and any(c.__module__ == BACKENDS_MODULE for c in backend.__mro__):
            return True
    return False
