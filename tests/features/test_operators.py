"""Step definitions for operators.feature: real `runworker` processes, `manage.py jobstatus`, the dashboard.

The workers serve queue "default" only, with one runner each, so each takes
one long job and the jobs of queue "idle" wait. Every wait polls the
database with a hard deadline; the assertions are about states (live, lost,
counts), never about how long something took.
"""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.models import Job, JobStatus, WorkerProcess
from tests.factories import DeadLetterFactory, JobFactory, error_history
from tests.integration.conftest import run_command
from tests.jobs_app import jobs
from tests.processes import finish, spawn_worker, wait_until

# A subprocess worker must see the rows the test writes: no wrapping transaction.
pytestmark = pytest.mark.django_db(transaction=True)

scenarios("operators.feature")

#: Hard deadline for workers to start, take their jobs and heartbeat (they need a few seconds).
DEADLINE = 60.0


@dataclass
class Console:
    """The workers a scenario started, by pid, and the one it killed."""

    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    killed: str = ""

    def worker_ids(self) -> list[str]:
        return list(WorkerProcess.objects.order_by("worker_id").values_list("worker_id", flat=True))


@pytest.fixture
def console() -> Console:
    return Console()


def jobstatus() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(run_command("jobstatus", "--json"))
    return value


def queue(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(row for row in report["queues"] if row["queue"] == name)


def dashboard_page(admin_user: Any) -> Any:
    """The dashboard as ``admin_user`` gets it (the response: its ``text`` and ``context``)."""
    client = Client()
    client.force_login(admin_user)
    response = client.get(reverse("admin:django_jobretry_deadletter_dashboard"))
    assert response.status_code == 200
    return response


@given(parsers.parse('a retrying job and a dead letter in queue "{name}"'))
def retrying_and_dead(name: str) -> None:
    JobFactory.create(
        queue_name=name,
        attempts=1,
        errors=error_history(1, "exhausted"),
        run_at=timezone.now() + timedelta(hours=1),  # waits for its retry all scenario long
    )
    DeadLetterFactory.create(queue_name=name)


@given(parsers.parse('a job in queue "{name}", which no worker serves, due {minutes:d} minute ago'))
def waiting_job(name: str, minutes: int) -> None:
    JobFactory.create(queue_name=name, run_at=timezone.now() - timedelta(minutes=minutes))


@given(parsers.parse("{count:d} workers with a {lease:d} second lease, each running a long job"))
def busy_workers(console: Console, workers: list[subprocess.Popen[str]], count: int, lease: int) -> None:
    for index in range(count):
        jobs.sleepy.enqueue(f"long-{index}", 120)
    for _ in range(count):
        process = spawn_worker("--queue", "default", "--concurrency", "1", "--lease", str(lease))
        workers.append(process)
        console.processes.append(process)

    def all_busy() -> bool:
        owners = set(Job.objects.filter(status=JobStatus.RUNNING).values_list("lease_owner", flat=True))
        rows = WorkerProcess.objects.filter(worker_id__in=owners, running_jobs=1)
        return len(owners) == count and rows.count() == count

    wait_until(all_busy, timeout=DEADLINE, what=f"{count} workers to heartbeat with a running job each")


@then(parsers.parse("jobstatus shows {count:d} live workers, each running {running:d} job"))
def live_workers(console: Console, count: int, running: int) -> None:
    report = jobstatus()
    assert (report["workers_live"], report["workers_lost"]) == (count, 0)
    assert {worker["pid"] for worker in report["workers"]} == {process.pid for process in console.processes}
    assert {worker["running_jobs"] for worker in report["workers"]} == {running}
    # The worker id is the one the jobs table names as the lease owner.
    owners = set(Job.objects.filter(status=JobStatus.RUNNING).values_list("lease_owner", flat=True))
    assert {worker["worker_id"] for worker in report["workers"]} == owners


@then(
    parsers.parse(
        'jobstatus shows queue "{name}" with {retrying:d} retrying, {running:d} running and {dead:d} dead'
    )
)
def queue_counts(name: str, retrying: int, running: int, dead: int) -> None:
    row = queue(jobstatus(), name)
    assert (row["retrying"], row["running"], row["dead"]) == (retrying, running, dead)


@then(parsers.parse('jobstatus shows queue "{name}" waiting for at least {seconds:d} seconds'))
def queue_latency(name: str, seconds: int) -> None:
    row = queue(jobstatus(), name)
    assert (row["ready"], row["running"]) == (1, 0)
    assert row["oldest_due_seconds"] >= seconds


@then(parsers.parse("the dashboard shows both workers as live, and {retrying:d} retrying job"))
def dashboard_live(admin_user: Any, console: Console, retrying: int) -> None:
    html = dashboard_page(admin_user).text
    assert "Workers: 2 live, 0 lost" in html
    for worker_id in console.worker_ids():
        assert worker_id in html
    assert f'status=retrying" class="jobretry-retrying">{retrying}</a>' in html


@when("one of the workers is killed with SIGKILL")
def kill_one(console: Console) -> None:
    victim = console.processes[0]
    console.killed = WorkerProcess.objects.get(pid=victim.pid).worker_id
    victim.send_signal(signal.SIGKILL)
    code, _ = finish(victim, timeout=10)
    assert code == -signal.SIGKILL


@then("jobstatus shows that worker as lost and the other as live")
def one_lost(console: Console) -> None:
    def lost() -> bool:
        return WorkerProcess.objects.lost().filter(worker_id=console.killed).exists()

    wait_until(lost, timeout=DEADLINE, what="the killed worker to be shown as lost")
    report = jobstatus()
    statuses = {worker["worker_id"]: worker["status"] for worker in report["workers"]}
    survivor = next(worker_id for worker_id in statuses if worker_id != console.killed)
    assert statuses == {console.killed: "lost", survivor: "live"}
    assert (report["workers_live"], report["workers_lost"]) == (1, 1)


@then("the dashboard shows 1 live and 1 lost worker")
def dashboard_lost(admin_user: Any, console: Console) -> None:
    html = dashboard_page(admin_user).text
    assert "Workers: 1 live, 1 lost" in html
    assert console.killed in html
