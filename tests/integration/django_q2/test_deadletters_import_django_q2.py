"""`manage.py deadletters import-django-q2`: django-q2's Failure rows become dead letters, once.

Failure rows are written through django-q2's own save path (the monitor's
``save_task``), as a cluster writes them; a real cluster produces them in
tests/features/test_django_q2_import.py.
"""

from __future__ import annotations

import io
import re
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections
from django.test.utils import modify_settings
from django.utils import timezone
from django_q.humanhash import uuid
from django_q.models import Failure, OrmQ, Task
from django_q.monitor import save_task
from django_q.signing import SignedPackage
from django_q.tasks import async_task

from django_jobretry import deadletters
from django_jobretry.models import DeadLetter, DeadLetterSource, ImportedFailure
from tests.factories import DeadLetterFactory
from tests.integration.conftest import cli_run, exit_code

pytestmark = pytest.mark.django_db
TASKS = "tests.jobs_app.q2_tasks"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "q2_tasks.py", line 36, in always_fail\n'
    "ConnectionError: {key} always fails\n"
)


def failed(
    key: str = "k",
    *,
    func: str = f"{TASKS}.always_fail",
    attempts: int = 1,
    ago: timedelta = timedelta(minutes=5),
    **options: Any,
) -> Task:
    """A failed task as django-q2's monitor saves it (``attempts`` deliveries), gone from the queue."""
    tag = uuid()
    stopped = timezone.now() - ago
    task = {
        "id": tag[1],
        "name": tag[0],
        "func": func,
        "args": (key,),
        "kwargs": options.pop("kwargs", {}),
        "started": stopped - timedelta(seconds=2),
        "stopped": stopped,
        "success": False,
        "result": f"{key} always fails : {TRACEBACK.format(key=key)}",
        "sync": True,  # save_task would otherwise close the test's connection
        **options,
    }
    for _ in range(attempts):
        save_task(task, broker=None)
    return Failure.objects.get(pk=task["id"])  # save_task logs instead of raising: it must be there


def run(*args: str, **options: Any) -> str:
    return cli_run("import-django-q2", *args, **options)[0]


def imported() -> dict[str, DeadLetter]:
    return {str(dead.external_id): dead for dead in DeadLetter.objects.filter(source="django_q2")}


def test_each_failure_becomes_one_dead_letter_filled_like_the_adapters() -> None:
    first = failed("a", attempts=2, group="reports", hook=f"{TASKS}.succeed", cluster="other-queue")
    second = failed("b", kwargs={"note": {1, 2}})
    out = run()
    assert "imported 2 of 2 django-q2 failures read as dead letters" in out
    dead = imported()
    assert set(dead) == {first.pk, second.pk}
    one = dead[first.pk]
    assert (one.job_id, one.source, one.task_name, one.queue_name, one.policy_name) == (
        0,
        DeadLetterSource.DJANGO_Q2,
        f"{TASKS}.always_fail",
        "other-queue",
        "q2",  # JOBRETRY["DJANGO_Q2"]["POLICY"] of tests/settings.py
    )
    assert (one.reason, one.attempts, one.max_attempts, one.requeue_count) == ("exhausted", 2, 2, 0)
    assert (one.args, one.kwargs) == (["a"], {})
    assert (one.external_name, one.external_group) == (first.name, "reports")
    assert (one.enqueued_at, one.dead_at, one.first_attempt_at) == (first.started, first.stopped, None)
    assert (one.last_error_class, one.last_error) == ("ConnectionError", "a always fails")
    [entry] = one.errors
    assert (entry["attempt"], entry["kind"], entry["ended"], entry["at"]) == (
        2,
        "retryable",
        "error",
        first.stopped.isoformat(),
    )
    assert entry["traceback"].startswith("Traceback (most recent call last):")
    package = SignedPackage.loads(one.external_payload)
    assert {k: package[k] for k in ("id", "name", "func", "args", "kwargs", "group", "hook", "cluster")} == {
        "id": first.pk,
        "name": first.name,
        "func": f"{TASKS}.always_fail",
        "args": ("a",),
        "kwargs": {},
        "group": "reports",
        "hook": f"{TASKS}.succeed",
        "cluster": "other-queue",
    }
    assert dead[second.pk].kwargs == {"note": "{1, 2}"}  # JSON cannot say a set: its repr
    assert dead[second.pk].queue_name == "jobretry-tests"  # no cluster: django-q2's own queue
    assert Failure.objects.count() == 2  # kept: django-q2's admin still shows them


def test_a_second_run_imports_nothing_even_after_requeue_and_discard() -> None:
    tasks = [failed(str(i)) for i in range(3)]
    run()
    out = run()
    assert "imported 0 of 3 django-q2 failures read as dead letters; 3 handled by an earlier import" in out
    assert DeadLetter.objects.count() == 3
    by_id = imported()
    deadletters.requeue(by_id[tasks[0].pk].pk, actor="ops")
    deadletters.discard(by_id[tasks[1].pk].pk, actor="ops")
    assert "imported 0 of 3" in run()
    assert set(imported()) == {tasks[2].pk}  # neither came back
    assert ImportedFailure.objects.count() == 3


def test_dry_run_writes_nothing_and_says_what_it_would_import() -> None:
    task = failed("a")
    out = run("--dry-run")
    assert f"django-q2 task {task.pk} ({TASKS}.always_fail)" in out
    assert "dry run: would import 1 of 1 django-q2 failure read as dead letters; nothing was changed" in out
    assert (DeadLetter.objects.count(), ImportedFailure.objects.count()) == (0, 0)
    run()
    assert (
        "would import 0 of 1 django-q2 failure read as dead letters; 1 handled by an earlier import"
        in run("--dry-run")
    )


def test_since_and_func_select_failures() -> None:
    old = failed("old", ago=timedelta(days=3))
    recent = failed("recent", ago=timedelta(hours=1))
    other = failed("other", func=f"{TASKS}.fatal", ago=timedelta(hours=1))
    assert "imported 0 of 0" in run("--func", f"{TASKS}.nothing_failed")
    run("--since", "2d", "--func", f"{TASKS}.always_fail")
    assert set(imported()) == {recent.pk}
    day = (timezone.localtime() - timedelta(days=1)).date().isoformat()  # a date: midnight, local time
    run("--since", day)
    assert set(imported()) == {recent.pk, other.pk}
    stamp = (old.stopped - timedelta(seconds=1)).isoformat()  # a time with its offset
    run("--since", stamp)
    assert set(imported()) == {recent.pk, other.pk, old.pk}


@pytest.mark.parametrize("value", ["yesterday", "3 days", "2025-13-01", "-5d"])
def test_a_bad_since_is_a_usage_error_and_writes_nothing(value: str) -> None:
    failed("a")
    with pytest.raises(CommandError) as info:
        run(f"--since={value}")
    assert "is neither a duration like 30d, 12h, 15m or 90s nor a date or time like 2025-01-31" in str(
        info.value
    )
    assert (DeadLetter.objects.count(), ImportedFailure.objects.count()) == (0, 0)


def test_a_task_still_in_django_q2s_queue_is_skipped_until_it_leaves() -> None:
    task_id = async_task(f"{TASKS}.always_fail", "q")  # django-q2 (or the adapter) delivers it again
    row = OrmQ.objects.get()
    package = SignedPackage.loads(row.payload)
    failed("q", id=task_id, name=package["name"])
    done = failed("done")
    out = run()
    assert (
        f"1 skipped, still in django-q2's queue (django-q2 or the adapter delivers them again): {task_id}"
        in (out)
    )
    assert set(imported()) == {done.pk}
    assert not ImportedFailure.objects.filter(external_id=task_id).exists()
    OrmQ.objects.filter(pk=row.pk).delete()  # acknowledged: dropped by django-q2
    run()
    assert set(imported()) == {done.pk, task_id}


def test_a_failure_the_adapter_already_buried_is_not_duplicated() -> None:
    task = failed("a")
    DeadLetterFactory.create(source=DeadLetterSource.DJANGO_Q2, job_id=0, external_id=task.pk)
    out = run()
    assert "imported 0 of 1 django-q2 failure read as dead letters; 1 already dead letters" in out
    assert DeadLetter.objects.count() == 1
    assert ImportedFailure.objects.filter(external_id=task.pk).exists()  # a later discard is final too


def test_an_imported_dead_letter_requeues_to_django_q2() -> None:
    task = failed("again", group="g", kwargs={"note": "n"})
    run()
    dead = imported()[task.pk]
    again = deadletters.requeue(dead.pk, actor="ops")
    assert isinstance(again, deadletters.Resubmitted)
    package = SignedPackage.loads(OrmQ.objects.get().payload)
    assert (package["func"], package["args"], package["kwargs"], package["group"]) == (
        f"{TASKS}.always_fail",
        ("again",),
        {"note": "n"},
        "g",
    )
    assert package["id"] == again.pk != task.pk
    assert package["jobretry"]["requeue_history"][0]["external_id"] == task.pk
    assert not DeadLetter.objects.exists()


def test_unreadable_failures_are_reported_and_the_rest_imported() -> None:
    broken, empty, good = failed("broken"), failed("empty"), failed("good")
    with connection.cursor() as cursor:  # a pickle of a class that no longer exists reads back as text
        cursor.execute("UPDATE django_q_task SET args = 'gASVnotapickle' WHERE id = %s", [broken.pk])
        cursor.execute("UPDATE django_q_task SET func = '' WHERE id = %s", [empty.pk])
    out = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command("deadletters", "import-django-q2", stdout=out, stderr=io.StringIO())
    assert info.value.returncode == 1
    assert str(info.value) == "2 django-q2 failures were not imported: they cannot be read here"
    assert set(imported()) == {good.pk}
    assert (
        f"not imported: django-q2 task {broken.pk}: its arguments cannot be unpickled here" in out.getvalue()
    )
    assert f"not imported: django-q2 task {empty.pk}: it names no function" in out.getvalue()


def test_progress_lines_when_not_a_terminal_and_a_bar_on_request() -> None:
    for i in range(3):
        failed(str(i))
    ticks = iter(range(0, 1000, 10))
    _, err = cli_run("import-django-q2", "--dry-run", clock=lambda: float(next(ticks)))
    assert err.splitlines() == ["import-django-q2: 3/3 failures read, 3 importable"]
    _, err = cli_run("import-django-q2", "--progress")
    assert err == f"\rimport [{'#' * 30}] 3/3\n"
    assert cli_run("import-django-q2", verbosity=0, clock=lambda: float(next(ticks)))[1] == ""


def test_ctrl_c_keeps_the_finished_batch_and_exits_130() -> None:
    tasks = {failed(str(i)).pk for i in range(3)}
    ticks = iter([0.0])  # the progress line after the first batch is where Ctrl-C lands

    def clock() -> float:
        try:
            return next(ticks)
        except StopIteration:
            raise KeyboardInterrupt from None

    out = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command("deadletters", "import-django-q2", stdout=out, stderr=io.StringIO(), clock=clock)
    assert info.value.returncode == 130
    assert str(info.value).startswith(
        "interrupted after 3 of 3 failures read: finished batches stay imported"
    )
    assert "imported 3 of 3 django-q2 failures read as dead letters" in out.getvalue()
    assert set(imported()) == tasks


@pytest.mark.parametrize(
    ("removed", "named"),
    [
        (["django_jobretry.contrib.django_q2"], '"django_jobretry.contrib.django_q2" to INSTALLED_APPS'),
        (["django_q", "django_jobretry.contrib.django_q2"], 'add "django_q" to INSTALLED_APPS'),
    ],
)
def test_without_django_q2_or_the_adapter_it_says_what_to_add(removed: list[str], named: str) -> None:
    with modify_settings(INSTALLED_APPS={"remove": removed}):
        code, message = exit_code("import-django-q2")
    assert code == 4
    assert named in message


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_imports_make_one_dead_letter_per_failure() -> None:
    tasks = {failed(str(i)).pk for i in range(300)}
    start = threading.Barrier(2, timeout=30)
    outputs: list[str] = []
    errors: list[BaseException] = []

    def importer() -> None:
        try:
            start.wait()
            outputs.append(run())
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=importer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "an import hung"
    assert errors == []
    assert DeadLetter.objects.count() == 300  # without the claim both imports insert (checked)
    assert set(imported()) == tasks
    assert ImportedFailure.objects.count() == 300
    counts = [int(re.findall(r"^imported (\d+) of 300 ", out, re.MULTILINE)[0]) for out in outputs]
    assert sum(counts) == 300
