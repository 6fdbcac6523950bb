"""The modules start-up imports, and the checks that a worker has every task (E014, E015, E025).

Start-up is what a fresh process does, so most tests run `manage.py` in a
subprocess with tests/settings_task_modules.py; the in-process ones use
tasks defined by the test itself, which are registered after start-up.
"""

from __future__ import annotations

from typing import Any

import django
import pytest
from django.test import override_settings

from django_jobretry import job
from django_jobretry.conf import task_modules
from django_jobretry.conf.checks import check_settings
from django_jobretry.conf.task_modules import check_tasks_workers_import
from django_jobretry.exceptions import UnknownTask
from django_jobretry.jobs.claimed import Failed
from django_jobretry.models import Job
from django_jobretry.registry import registry
from django_jobretry.worker.runner import Runner
from tests.attempts import claim_one
from tests.jobs_app import jobs
from tests.manage_py import manage_py

needs_django_tasks = pytest.mark.skipif(django.VERSION < (6, 0), reason="django.tasks is Django 6+")


def manage(*args: str, **env: str) -> tuple[int, str, str]:
    done = manage_py(*args, env={"DJANGO_SETTINGS_MODULE": "tests.settings_task_modules", **env})
    return done.returncode, done.stdout, done.stderr


REGISTERED = "from django_jobretry.registry import registry; print(sorted(registry.names()))"


# -- JOBRETRY["TASK_MODULES"] ------------------------------------------------------------------------


def test_a_listed_module_is_imported_at_start_up_and_its_tasks_registered() -> None:
    code, out, err = manage(
        "shell", "-c", REGISTERED, JOBRETRY_TEST_TASK_MODULES="tests.task_modules.elsewhere"
    )
    assert (code, err) == (0, "")
    assert "'tests.task_modules.elsewhere.kept_elsewhere'" in out
    code, out, _ = manage("shell", "-c", REGISTERED)
    assert "kept_elsewhere" not in out, "not listed: not imported"


def test_modules_that_do_not_import_are_e014_each_named_not_a_traceback() -> None:
    listed = "tests.task_modules.no_such_module,tests.integration.conf.broken_module"
    code, _, err = manage("check", JOBRETRY_TEST_TASK_MODULES=listed)
    assert code == 1
    assert err.count("(django_jobretry.E014)") == 2
    assert (
        "JOBRETRY[\"TASK_MODULES\"]: 'tests.task_modules.no_such_module' cannot be imported (ModuleNotFound"
        in err
    )
    assert (
        "'tests.integration.conf.broken_module' cannot be imported (ZeroDivisionError: division by zero)"
        in err
    )
    assert "Traceback" not in err
    code, _, err = manage("shell", "-c", "print('still starts')", JOBRETRY_TEST_TASK_MODULES=listed)
    assert code == 0, "a command that runs no checks still starts; its log line says what was not imported"


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("tests.task_modules.elsewhere", "= 'tests.task_modules.elsewhere' is invalid: expected a list"),
        (
            ["tests/task_modules/elsewhere.py"],
            "'tests/task_modules/elsewhere.py' is not a dotted module path",
        ),
        ([None], "None is not a dotted module path"),
    ],
)
def test_a_malformed_setting_is_e014(value: Any, fragment: str) -> None:
    with override_settings(JOBRETRY={"TASK_MODULES": value}):
        [error] = check_settings()
    assert error.id == "django_jobretry.E014"
    assert fragment in error.msg
    assert 'JOBRETRY["TASK_MODULES"] = [' in (error.hint or "")


def test_a_valid_setting_passes() -> None:
    with override_settings(JOBRETRY={"TASK_MODULES": ["tests.task_modules.elsewhere"]}):
        assert check_settings() == []


# -- E015: a task in a module that workers do not import -------------------------------------------


def test_a_job_in_a_view_module_is_e015_naming_the_task_the_module_and_the_fix() -> None:
    code, _, err = manage("check", JOBRETRY_TEST_VIEWS="1")
    assert code == 1
    assert (
        "(django_jobretry.E015) task 'tests.task_modules.views.sent_from_a_view' is defined in "
        "'tests.task_modules.views', which workers do not import at start-up (they import " in err
    )
    assert "tests.jobs_app.jobs" in err  # among the modules listed
    assert 'add its module to JOBRETRY["TASK_MODULES"]' in err
    code, _, err = manage(
        "check", JOBRETRY_TEST_VIEWS="1", JOBRETRY_TEST_TASK_MODULES="tests.task_modules.views"
    )
    assert (code, err) == (0, ""), "listed in TASK_MODULES: imported at start-up"


def late_task(key: str) -> str:
    """A module-level function made a task inside a test, as a module imported late would."""
    return key


def test_tasks_registered_after_start_up_are_e015_and_start_up_ones_are_not() -> None:
    @job(name="tests.made_late")
    def made_late() -> None: ...

    found = {error.msg.split("'")[1]: error for error in check_tasks_workers_import()}
    assert "tests.made_late" in found
    assert found["tests.made_late"].id == "django_jobretry.E015"
    assert jobs.record.name not in found, "tests/jobs_app/jobs.py is imported at start-up"
    assert "tests.jobs_app.jobs" in task_modules.imported()


@needs_django_tasks
def test_a_django_task_registered_after_start_up_is_e015() -> None:
    from django.tasks import task

    defined = task(late_task)
    assert defined.module_path in registry.registered_late()
    assert any(f"task {defined.module_path!r}" in error.msg for error in check_tasks_workers_import())


# -- E025: a @task whose queue its backend's QUEUES does not list ------------------------------------


@needs_django_tasks
def test_an_undeclared_queue_is_e025_naming_the_setting_the_task_and_the_queue() -> None:
    code, _, err = manage("check", JOBRETRY_TEST_PARTNER="1")
    assert code == 1
    assert "Traceback" not in err
    assert (
        "(django_jobretry.E025) tests.task_modules.partner.tasks was not imported at start-up, so none of "
        "its tasks is registered: Queue 'partner' is not valid for backend. Task "
        "'tests.task_modules.partner.tasks.call_partner' uses the queue "
        "'partner', which TASKS[\"default\"][\"QUEUES\"] does not list: it lists ['default', 'other']." in err
    )
    assert 'HINT: Add \'partner\' to TASKS["default"]["QUEUES"]' in err
    code, _, err = manage("shell", "-c", "print('starts')", JOBRETRY_TEST_PARTNER="1")
    assert (code, "Traceback" in err) == (0, False), "other commands start instead of a traceback"


@pytest.mark.skipif(
    django.VERSION < (6, 1), reason="@task passes its own options to the backend from Django 6.1"
)
def test_a_refused_task_option_is_e025_naming_the_task_the_option_and_what_is_allowed() -> None:
    code, _, err = manage("check", JOBRETRY_TEST_TASK_MODULES="tests.task_modules.bad_option")
    assert code == 1
    assert "Traceback" not in err
    assert (
        "(django_jobretry.E025) tests.task_modules.bad_option was not imported at start-up, so none of its "
        "tasks is registered: @task tests.task_modules.bad_option.charge: policy 'no-such-policy' is not a "
        "policy in JOBRETRY['POLICIES']" in err
    )
    assert "HINT: Fix that option of the @task(...). JobRetryBackend's @task takes policy, timeout" in err


@needs_django_tasks
def test_at_decoration_the_error_is_django_s_invalid_task_with_the_fix() -> None:
    from django.tasks import task
    from django.tasks.exceptions import InvalidTask

    with pytest.raises(InvalidTask) as raised:
        task(queue_name="othr")(late_task)
    assert 'uses the queue \'othr\', which TASKS["default"]["QUEUES"] does not list' in str(raised.value)
    assert "Did you mean 'other'?" in str(raised.value)


# -- the worker's message ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_unknown_task_error_lists_the_start_up_modules_and_how_to_add_one() -> None:
    enqueued = jobs.record.enqueue("a")
    Job.objects.filter(pk=enqueued.pk).update(task_name="billing.views.send_invoice")
    runner = Runner(0, inbox=None, outbox=None, wake=None, sender=object)  # type: ignore[arg-type]
    outcome = runner.execute(claim_one())
    assert isinstance(outcome, Failed)
    assert isinstance(outcome.error, UnknownTask)
    message = str(outcome.error)
    assert message.startswith("unknown task 'billing.views.send_invoice': not registered in this worker")
    assert "Workers register the tasks of the modules imported at start-up: " in message
    assert "tests.jobs_app.jobs" in message
    assert "tests.jobs_app.tasks" in message or django.VERSION < (6, 0)
    assert 'add its module to JOBRETRY["TASK_MODULES"]' in message
    assert "a rolling deploy may not have reached this worker yet" in message
