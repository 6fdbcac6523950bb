"""Step definitions for dead_letters.feature: the service API with real workers."""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass, field

import pytest
from django.db import connections
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry import NotDead
from django_jobretry import deadletters as service
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.attempts import claim_one
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import finish, spawn_worker

pytestmark = pytest.mark.django_db(transaction=True)

scenarios("dead_letters.feature")


@dataclass
class Desk:
    """The operator's view during one scenario."""

    key: str = "dl"
    dead_id: int = 0
    listed: list[DeadLetter] = field(default_factory=list)
    outcomes: list[object] = field(default_factory=list)


@pytest.fixture
def desk() -> Desk:
    return Desk()


def run_until_idle(workers: list[subprocess.Popen[str]]) -> None:
    """Burst workers until no job is live (retries are due within ~50 ms); bounded."""
    for _ in range(30):
        if not Job.objects.filter(status__in=[JobStatus.READY, JobStatus.RUNNING]).exists():
            return
        workers.append(process := spawn_worker("--burst"))
        code, output = finish(process)
        assert code == 0, output
    pytest.fail("jobs still live after 30 burst workers")


def died(desk: Desk, workers: list[subprocess.Popen[str]], attempts: int) -> None:
    run_until_idle(workers)
    dead = DeadLetter.objects.get(args__0=desk.key)
    assert dead.attempts == attempts
    desk.dead_id = dead.pk


@given(parsers.parse("a job that always fails retryably has died after {attempts:d} attempts"))
def always_failing_died(desk: Desk, workers: list[subprocess.Popen[str]], attempts: int) -> None:
    jobs.always_fails.enqueue(desk.key)
    died(desk, workers, attempts)


@given(
    parsers.parse(
        "a job that fails {failures:d} times and then succeeds has died after {attempts:d} attempts"
    )
)
def flaky_died(desk: Desk, workers: list[subprocess.Popen[str]], failures: int, attempts: int) -> None:
    jobs.flaky.enqueue(desk.key, failures)
    died(desk, workers, attempts)


@given("one ready job and one running job")
def ready_and_running() -> None:
    jobs.record.enqueue("running")
    jobs.record.enqueue("ready")
    claimed = claim_one(owner="bdd-worker", lease=300)
    assert Job.objects.get(pk=claimed.id).status == JobStatus.RUNNING
    assert Job.objects.filter(status=JobStatus.READY).count() == 1


@given("the operator has already requeued it")
def already_requeued(desk: Desk) -> None:
    service.requeue(desk.dead_id, actor="colleague")


@when("the operator lists the dead letters")
def list_dead(desk: Desk) -> None:
    desk.listed = service.list_dead().items


@when("the operator requeues it")
@when("the operator requeues it again")
def requeue(desk: Desk) -> None:
    try:
        desk.outcomes.append(service.requeue(desk.dead_id, actor="operator"))
    except NotDead as exc:
        desk.outcomes.append(exc)


@when("the operator discards it")
def discard(desk: Desk) -> None:
    service.discard(desk.dead_id, actor="operator")


@when("two operators requeue it at the same moment")
def requeue_concurrently(desk: Desk) -> None:
    barrier = threading.Barrier(2, timeout=20)

    def operator(name: str) -> None:
        try:
            barrier.wait()
            desk.outcomes.append(service.requeue(desk.dead_id, actor=name))
        except NotDead as exc:
            desk.outcomes.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=operator, args=(name,)) for name in ("alice", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a requeue hung"


@when("a worker runs until nothing is due")
def worker_runs(workers: list[subprocess.Popen[str]]) -> None:
    run_until_idle(workers)


@then(parsers.parse("the list shows it with {attempts:d} attempts and its last error"))
def listed_with_details(desk: Desk, attempts: int) -> None:
    [dead] = desk.listed
    assert (dead.pk, dead.attempts, dead.reason) == (desk.dead_id, attempts, "exhausted")
    assert dead.last_error == f"upstream reset for {desk.key}"
    assert dead.last_error_class == "builtins.ConnectionResetError"


@then("the list is empty")
def list_is_empty(desk: Desk) -> None:
    assert desk.listed == []


@then("the job has succeeded")
def job_succeeded(desk: Desk) -> None:
    [job] = Job.objects.filter(args__0=desk.key)
    assert job.status == JobStatus.SUCCEEDED


@then(parsers.parse("its requeue count is {count:d}"))
def requeue_count(desk: Desk, count: int) -> None:
    [job] = Job.objects.filter(args__0=desk.key)
    assert job.requeue_count == count
    assert [entry["dead_letter_id"] for entry in job.requeue_history] == [desk.dead_id]


@then(parsers.parse("it ran {count:d} times in total"))
def ran(desk: Desk, count: int) -> None:
    assert Execution.objects.filter(key=desk.key).count() == count


@then("the operator is told it is not dead")
def told_not_dead(desk: Desk) -> None:
    assert isinstance(desk.outcomes[-1], NotDead)
    assert desk.outcomes[-1].dead_letter_id == desk.dead_id


@then("exactly one requeue succeeds and the other is told it is not dead")
def one_wins(desk: Desk) -> None:
    assert sorted(type(outcome).__name__ for outcome in desk.outcomes) == ["Job", "NotDead"]


@then(parsers.parse("there is exactly {jobs_count:d} job and {dead_count:d} dead letters"))
def counts(jobs_count: int, dead_count: int) -> None:
    assert (Job.objects.count(), DeadLetter.objects.count()) == (jobs_count, dead_count)


@then("the dead letter is gone")
def gone(desk: Desk) -> None:
    assert not DeadLetter.objects.filter(pk=desk.dead_id).exists()
    assert not Job.objects.filter(args__0=desk.key).exists()
