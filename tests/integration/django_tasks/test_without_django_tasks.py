"""Django 5.2, which has no django.tasks: the backend says so, everything else works.

Runs only on Django < 6 (`make matrix`); on Django 6+ the backend's own
tests (test_tasks_backend*.py, features/test_django_tasks.py) run instead.
"""

from __future__ import annotations

import importlib
import sys

import django
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import override_settings

from django_jobretry import deadletters
from django_jobretry.apps import uses_task_backend
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.inprocess import run_until_settled
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.skipif(django.VERSION >= (6, 0), reason="Django 6+ has django.tasks")

BACKEND = {"default": {"BACKEND": "django_jobretry.backends.JobRetryBackend"}}


def test_importing_the_backend_says_it_needs_django_6() -> None:
    with pytest.raises(ImproperlyConfigured) as info:
        importlib.import_module("django_jobretry.backends")
    message = str(info.value)
    assert "django.tasks" in message
    assert "Django 6.0 or newer" in message
    assert f"this is Django {django.get_version()}" in message
    assert "The rest of django_jobretry" in message
    assert "django_jobretry.backends" not in sys.modules, "a failed import leaves nothing half-loaded"


def test_a_tasks_setting_naming_the_backend_does_not_stop_the_project() -> None:
    with override_settings(TASKS=BACKEND):
        assert uses_task_backend() is False
        call_command("check", "--fail-level", "ERROR")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("keep_signal_handlers")
def test_jobs_retries_and_dead_letters_work() -> None:
    jobs.flaky.enqueue("flaky", 2)
    jobs.fatal.enqueue("fatal")
    run_until_settled()
    assert Job.objects.get(args__0="flaky").status == JobStatus.SUCCEEDED
    assert list(Execution.objects.filter(key="flaky").values_list("attempt", flat=True)) == [1, 2, 3]
    dead = DeadLetter.objects.get()
    assert (dead.args, dead.reason, dead.attempts) == (["fatal"], "fatal", 1)
    deadletters.requeue(dead.pk, actor="operator")
    run_until_settled()
    assert Execution.objects.filter(key="fatal").count() == 2
    assert DeadLetter.objects.get().requeue_count == 1
