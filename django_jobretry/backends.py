"""``django_jobretry.backends.JobRetryBackend``: the path ``TASKS["BACKEND"]`` names.

The backend lives in contrib/django_tasks/; this path stays the public one.
Importing it on a Django without ``django.tasks`` raises ImproperlyConfigured.
"""

from django_jobretry.contrib.django_tasks.backend import JobRetryBackend, retry_policy
from django_jobretry.contrib.django_tasks.task_class import JobRetryTaskResult

__all__ = ["JobRetryBackend", "JobRetryTaskResult", "retry_policy"]
