from django.apps import AppConfig


class JobRetryConfig(AppConfig):
    """Registers the settings checks; models and jobs arrive in later layers."""

    name = "django_jobretry"
    label = "django_jobretry"
    verbose_name = "Jobs and dead letters"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_jobretry import checks  # noqa: F401 - registers the system checks
