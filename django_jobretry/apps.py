from django.apps import AppConfig


class JobRetryConfig(AppConfig):
    """Registers the settings checks and discovers each app's jobs.py."""

    name = "django_jobretry"
    label = "django_jobretry"
    verbose_name = "Jobs and dead letters"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import sys

        from django.utils.module_loading import autodiscover_modules

        from django_jobretry import checks  # noqa: F401 - registers the system checks
        from django_jobretry.worker.startup import is_worker_process, remember_stop_requests

        # Before the (possibly slow) jobs.py imports: a SIGTERM meanwhile must
        # end a starting worker cleanly, not kill it.
        if is_worker_process(sys.argv):
            remember_stop_requests()

        # Fill the task registry from every installed app's jobs.py, the way
        # the admin finds admin.py; workers only run what is registered.
        autodiscover_modules("jobs")
