"""Which upstream task tests the contract run leaves out, and why; the one backend it substitutes.

The upstream test files run unchanged (devtools/upstream_contract.py). What
the harness decides is written here, in one place:

- EXCLUDED: tests written for another backend's internals (DummyBackend's
  results list, ImmediateBackend running tasks at enqueue, django-tasks-db's
  own table, worker and options), each with its reason. A key is a test id
  or a prefix of ids (a module or a class).
- SUBSTITUTED: test classes of Django's whose class-level
  ``override_settings`` pins ``DummyBackend`` as the default backend. The
  harness swaps that one BACKEND for ContractBackend before the class runs,
  and lets the class use the database, which ``SimpleTestCase`` forbids
  (our backend stores each task as a row). Nothing else of their settings
  changes: the other aliases (``immediate``, ``missing``) and QUEUES stay.
- REQUIRED: tests that must run and pass, or the run fails: those the backend was changed for
  (issue 36), so that no later exclusion can drop them unnoticed.
"""

from __future__ import annotations

import unittest
from typing import Any

from django.test import SimpleTestCase

from django_jobretry.backends import JobRetryBackend

DUMMY = "django.tasks.backends.dummy.DummyBackend"
CONTRACT_BACKEND = "devtools.upstream_selection.ContractBackend"

_IS_DUMMY = "asserts the default backend is a DummyBackend"
_DUMMY_RESULTS = "reads DummyBackend.results, the list where DummyBackend keeps what it was given"
_SYNC_IN_ASYNC = (
    "an async test calling the synchronous get_result()/refresh(): a backend that reads the database "
    "there gets Django's SynchronousOnlyOperation (django-tasks-db's too); DummyBackend reads a list"
)
_DB_TABLE = "reads or writes django-tasks-db's DBTaskResult table, which only its DatabaseBackend fills"
_DB_OPTIONS = "pins django_tasks_db.DatabaseBackend with options of its own (id_function)"
_DB_CLASS = "pins django_tasks_db.DatabaseBackend and checks its db_worker command and DBTaskResult rows"

EXCLUDED: dict[str, str] = {
    # Django's tests/tasks.
    "tasks.test_custom_backend": "checks BaseTaskBackend with backends defined in the test file itself",
    "tasks.test_immediate_backend": "ImmediateBackend runs the task inside enqueue(), a worker does here",
    "tasks.test_dummy_backend.DummyBackendTransactionTestCase": (
        "pins DummyBackend in a method-level override_settings and reads its results list"
    ),
    "tasks.test_tasks.TaskTestCase.test_using_correct_backend": _IS_DUMMY,
    "tasks.test_tasks.TaskTestCase.test_get_backend": _IS_DUMMY,
    "tasks.test_tasks.TaskTestCase.test_enqueue_task": _DUMMY_RESULTS,
    "tasks.test_tasks.TaskTestCase.test_enqueue_task_async": _DUMMY_RESULTS,
    "tasks.test_tasks.TaskTestCase.test_get_missing_result": _SYNC_IN_ASYNC,
    "tasks.test_tasks.TaskTestCase.test_refresh_result": _SYNC_IN_ASYNC,
    "tasks.test_dummy_backend.DummyBackendTestCase.test_get_missing_result": _SYNC_IN_ASYNC,
    "tasks.test_dummy_backend.DummyBackendTestCase.test_refresh_result": _DUMMY_RESULTS,
    "tasks.test_dummy_backend.DummyBackendTestCase.test_refresh_result_async": _DUMMY_RESULTS,
    "tasks.test_dummy_backend.DummyBackendTestCase.test_using_correct_backend": (
        "asserts the default backend is a DummyBackend with no OPTIONS"
    ),
    "tasks.test_dummy_backend.DummyBackendTestCase.test_enqueue_task": _DUMMY_RESULTS,
    "tasks.test_dummy_backend.DummyBackendTestCase.test_enqueue_task_async": _DUMMY_RESULTS,
    "tasks.test_dummy_backend.DummyBackendTestCase.test_clear": (
        "checks DummyBackend.clear(), a test helper of DummyBackend's own"
    ),
    # django-tasks-db's tests/tests.py.
    "tests.tests.DatabaseBackendTestCase.test_using_correct_backend": (
        "asserts the default backend is a django_tasks_db.DatabaseBackend"
    ),
    "tests.tests.DatabaseBackendTestCase.test_enqueue_task": (
        "asserts task_enqueued's sender is django_tasks_db.DatabaseBackend"
    ),
    "tests.tests.DatabaseBackendTestCase.test_enqueue_task_async": (
        "asserts task_enqueued's sender is django_tasks_db.DatabaseBackend"
    ),
    "tests.tests.DatabaseBackendTestCase.test_refresh_result": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_refresh_result_async": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_invalid_task_path": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_missing_task_path": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_task_name": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_priority_range_check": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_doesnt_wait_until_transaction_commit": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_index_scan_for_ready": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_run_after_tz": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_run_after_null_0016_migration": _DB_TABLE,
    "tests.tests.DatabaseBackendTestCase.test_database_backend_app_missing": (
        "expects the check of django_tasks_db.DatabaseBackend that its app is installed"
    ),
    "tests.tests.DatabaseBackendTestCase.test_custom_id_function": _DB_OPTIONS,
    "tests.tests.DatabaseBackendTestCase.test_unknown_id_function": _DB_OPTIONS,
    "tests.tests.DatabaseBackendTestCase.test_postgres_db_id_function": _DB_OPTIONS,
    "tests.tests.DatabaseBackendTestCase.test_postgres_id_function_expression": _DB_OPTIONS,
    # Issue 36 named it: tests/integration/django_tasks/test_tasks_contract.py TestRunAfter checks its
    # other half, that each result get_result() returns equals the enqueued one, run_after included.
    "tests.tests.DatabaseBackendWorkerTestCase.test_run_after_priority": (
        "compares DBTaskResult.objects.all() and .ready(), in that model's ordering, with the enqueued "
        "results: another backend leaves that table empty"
    ),
    "tests.tests.DatabaseBackendWorkerTestCase": _DB_CLASS,
    "tests.tests.DatabaseTaskResultTestCase": "checks the locking of DBTaskResult rows",
    "tests.tests.ConnectionExclusiveTranscationTestCase": "checks django-tasks-db's exclusive_transaction",
    "tests.tests.DatabaseBackendPruneTaskResultsTestCase": "checks django-tasks-db's prune_db_task_results",
    "tests.tests.DatabaseWorkerProcessTestCase": "starts django-tasks-db's db_worker processes",
    "tests.tests.CompatTestCase": "checks django_tasks_db.compat",
    "tests.tests.DBTaskResultOrderingTestCase": "checks the ordering of DBTaskResult rows",
    "tests.tests.AdminTestCase": "checks django-tasks-db's admin of DBTaskResult",
}

SUBSTITUTED = ("tasks.test_tasks.TaskTestCase", "tasks.test_dummy_backend.DummyBackendTestCase")

REQUIRED = (
    "tasks.test_tasks.TaskTestCase.test_enqueue_with_invalid_argument",
    "tasks.test_tasks.TaskTestCase.test_aenqueue_with_invalid_argument",
    "tasks.test_tasks.TaskTestCase.test_unknown_queue_name",
    "tests.tests.DatabaseBackendTestCase.test_validate_on_enqueue",
)


class ContractBackend(JobRetryBackend):
    """JobRetryBackend and ``clear()``, which the substituted classes' ``setUp`` calls.

    DummyBackend.clear() forgets the results it holds, so each test starts
    with none; here the results are job rows, so it deletes them. It is the
    only thing added: every other call reaches JobRetryBackend unchanged.
    """

    def clear(self) -> None:
        from django_jobretry.models import Job

        Job.objects.all().delete()


def excluded_because(test_id: str) -> tuple[str, str] | None:
    """The EXCLUDED key that leaves ``test_id`` out and its reason, or None."""
    for key, reason in EXCLUDED.items():
        if test_id == key or test_id.startswith(key + "."):
            return key, reason
    return None


def substitute(case: unittest.TestCase) -> None:
    """Point a SUBSTITUTED class's default backend at ContractBackend and let it use the database."""
    cls = type(case)
    if f"{cls.__module__}.{cls.__qualname__}" not in SUBSTITUTED or not issubclass(cls, SimpleTestCase):
        return
    overridden: dict[str, Any] = cls._overridden_settings  # type: ignore[attr-defined]
    tasks = overridden["TASKS"]
    if tasks["default"]["BACKEND"] != DUMMY:
        if tasks["default"]["BACKEND"] == CONTRACT_BACKEND:
            return  # another test of the class came first
        raise RuntimeError(f"{cls.__qualname__} no longer pins {DUMMY}: review SUBSTITUTED")
    default = {**tasks["default"], "BACKEND": CONTRACT_BACKEND}
    cls._overridden_settings = {**overridden, "TASKS": {**tasks, "default": default}}  # type: ignore[attr-defined]
    cls.databases = {"default"}
