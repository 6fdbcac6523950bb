"""A job outside any jobs.py: registered at start-up only when JOBRETRY["TASK_MODULES"] lists this module."""

from django_jobretry import job


@job
def kept_elsewhere(key: str) -> str:
    return key
