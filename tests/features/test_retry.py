"""Step definitions for retry.feature: real `runworker` processes against real PostgreSQL.

Runs are counted from Execution rows, which each test job writes itself as
its first statement, so a run is counted whichever process made it (and
even if that process is killed afterwards). Every wait polls the database
with a hard deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.conf import jobretry_settings
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import finish, spawn_worker, wait_until, wait_while_progressing

# A subprocess worker must see the rows the test writes: no wrapping transaction.
pytestmark = pytest.mark.django_db(transaction=True)

scenarios("retry.feature")

#: Hard deadline for a job's next run, or its final state, once the last run started (a few seconds at
#: most): on progress, not on the whole wait, which grows with the attempts and the workers' boots.
FINAL_TIMEOUT = 30.0


@dataclass
class Story:
    """What one scenario enqueued and which workers it started."""

    key: str = ""
    job_id: int = 0
    lease_seconds: float = 0.0
    #: Worker processes in start order (also registered with the `workers` fixture).
    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    killed_pid: int | None = None

    def runs(self) -> list[Execution]:
        return list(Execution.objects.filter(key=self.key).order_by("created_at", "pk"))

    def run_count(self) -> int:
        """The runs started so far: a wait's progress."""
        return Execution.objects.filter(key=self.key).count()

    def history(self) -> list[dict[str, Any]]:
        """The job's attempt history, from the live job or from its dead letter."""
        live = Job.objects.filter(pk=self.job_id).first()
        if live is not None:
            return list(live.errors)
        return list(DeadLetter.objects.get(job_id=self.job_id).errors)

    def is_final(self) -> bool:
        return not Job.objects.filter(
            pk=self.job_id, status__in=[JobStatus.READY, JobStatus.RUNNING]
        ).exists()


@pytest.fixture
def story() -> Story:
    return Story()


def start(story: Story, workers: list[subprocess.Popen[str]], *args: str) -> subprocess.Popen[str]:
    process = spawn_worker(*args)
    workers.append(process)
    story.processes.append(process)
    return process


def output_of(processes: list[subprocess.Popen[str]]) -> str:
    """Stop whatever still runs and return every worker's output, for failure messages."""
    parts = []
    for process in processes:
        if process.poll() is None:
            process.kill()
        output, _ = process.communicate()
        parts.append(f"--- worker pid {process.pid} (exit {process.returncode}) ---\n{output}")
    return "\n".join(parts)


# -- Given ---------------------------------------------------------------------------


@given(parsers.parse('the retry policy "{name}" allows {count:d} attempts'))
def policy_allows(name: str, count: int) -> None:
    assert jobretry_settings.policy(name).max_attempts == count
    # Every job of the test app that these scenarios use is declared with it.
    for task in (jobs.flaky, jobs.always_fails, jobs.fatal, jobs.sleepy):
        assert task.policy == name, task.name


@given(parsers.parse("a job that fails retryably {failures:d} times and then succeeds"))
def flaky_job(story: Story, failures: int) -> None:
    story.key = "flaky"
    story.job_id = jobs.flaky.enqueue(story.key, failures).pk


@given("a job that always fails retryably")
def always_failing_job(story: Story) -> None:
    story.key = "always"
    story.job_id = jobs.always_fails.enqueue(story.key).pk


@given("a job that fails fatally")
def fatal_job(story: Story) -> None:
    story.key = "fatal"
    story.job_id = jobs.fatal.enqueue(story.key).pk


@given("a job whose stored arguments no longer fit its function")
def stale_job(story: Story) -> None:
    """Enqueued when ``fatal(key)`` took two arguments, say: a deploy removed one since."""
    story.key = "fatal"
    story.job_id = jobs.fatal.enqueue(story.key).pk
    Job.objects.filter(pk=story.job_id).update(args=[story.key, "a removed parameter"])


@given(parsers.parse("a worker with a {seconds:d} second lease is running"))
def worker_with_lease(story: Story, workers: list[subprocess.Popen[str]], seconds: int) -> None:
    story.lease_seconds = seconds
    start(story, workers, "--lease", str(seconds))


@given(parsers.parse("a job that takes {seconds:d} seconds"))
def slow_job(story: Story, seconds: int) -> None:
    story.key = "slow"
    story.job_id = jobs.sleepy.enqueue(story.key, seconds).pk


# -- When ----------------------------------------------------------------------------


@when(parsers.re(r"(?:a|another) worker runs until the job is finished"))
def worker_runs_until_final(story: Story, workers: list[subprocess.Popen[str]]) -> None:
    """A long-running worker (retries are due within its lifetime); stopped with SIGTERM at the end.

    SIGTERM is safe to assert on here: this worker ran the job, so its signal
    handlers were installed (a process signalled while Django is still
    starting dies of the signal instead of exiting 0).
    """
    process = start(story, workers)
    what, pause = f"job {story.job_id} to finish", lambda: time.sleep(0.02)
    try:
        wait_while_progressing(story.is_final, story.run_count, pause, stall=FINAL_TIMEOUT, what=what)
    except pytest.fail.Exception:
        pytest.fail(f"job {story.job_id} never reached a final state; worker:\n{output_of([process])}")
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output


@when(parsers.parse("{count:d} burst workers poll side by side until the job is finished"))
def burst_workers_until_final(story: Story, workers: list[subprocess.Popen[str]], count: int) -> None:
    """Rounds of ``count`` concurrent `--burst` workers, each exiting 0 once nothing is due."""

    def one_round() -> None:
        round_ = [start(story, workers, "--burst") for _ in range(count)]
        for process in round_:
            code, output = finish(process, timeout=30)
            assert code == 0, output

    what = f"job {story.job_id} to reach a final state"
    wait_while_progressing(story.is_final, story.run_count, one_round, stall=FINAL_TIMEOUT, what=what)


@when(parsers.parse("workers poll for due jobs {times:d} more times"))
def extra_polling(story: Story, workers: list[subprocess.Popen[str]], times: int) -> None:
    """Burst workers claim whatever is due and exit 0 once nothing is."""
    for _ in range(times):
        code, output = finish(start(story, workers, "--burst"), timeout=30)
        assert code == 0, output


@when("a job is enqueued with a keyword argument its function does not take", target_fixture="refused")
def enqueue_unknown_keyword() -> InvalidJob:
    with pytest.raises(InvalidJob) as refused:
        jobs.fatal.enqueue("k", colour="red")  # type: ignore[call-arg]
    return refused.value


@when("the worker is killed while the job runs")
def kill_worker_mid_job(story: Story) -> None:
    process = story.processes[-1]
    wait_until(lambda: Execution.objects.filter(key=story.key).exists(), what="the job to start")
    job = Job.objects.get(pk=story.job_id)
    assert (job.status, job.attempts) == (JobStatus.RUNNING, 1), "the job must be mid-run when killed"
    process.kill()  # SIGKILL: no handler, no cleanup, like a power loss
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL
    story.killed_pid = process.pid
    # Nothing released the job: it still belongs to the dead worker until its lease expires.
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.RUNNING, 1)
    assert job.lease_owner.split(":")[1] == str(process.pid)


# -- Then ----------------------------------------------------------------------------


@then(parsers.re(r"the job ran (?P<count>\d+) times?"), converters={"count": int})
def ran_times(story: Story, count: int) -> None:
    runs = story.runs()
    assert len(runs) == count, [str(run) for run in runs]
    # The handler saw the attempt number the worker claimed it with.
    assert [run.attempt for run in runs] == list(range(1, count + 1))


@then(
    parsers.parse("the job ran {count:d} times, in {processes:d} different worker processes"),
)
def ran_in_processes(story: Story, count: int, processes: int) -> None:
    ran_times(story, count)
    runs = story.runs()
    assert len({run.pid for run in runs}) == processes
    # The first run was the killed worker's, the other one the rescuer's.
    assert runs[0].pid == story.killed_pid
    assert runs[-1].pid == story.processes[-1].pid


@then("the second run started only after the lease of the first had expired")
def recovered_after_lease(story: Story) -> None:
    job = Job.objects.get(pk=story.job_id)
    lost = [entry for entry in job.errors if entry["ended"] == "lease_expired"]
    assert len(lost) == 1, job.errors
    assert lost[0]["attempt"] == 1
    assert lost[0]["worker"].split(":")[1] == str(story.killed_pid), lost[0]
    # Both times come from the database clock: the claim of attempt 1 and the recovery.
    assert job.first_attempt_at is not None
    recovered_at = datetime.fromisoformat(lost[0]["at"])
    assert recovered_at - job.first_attempt_at >= timedelta(seconds=story.lease_seconds)


@then(parsers.parse('the enqueue is refused with a TypeError naming "{text}"'))
def refused_as_type_error(refused: InvalidJob, text: str) -> None:
    assert isinstance(refused, TypeError), type(refused).__mro__
    assert text in str(refused)


@then(parsers.parse('the refusal names "{text}"'))
def refusal_names(refused: InvalidJob, text: str) -> None:
    assert text in str(refused)


@then("no job was stored")
def nothing_stored() -> None:
    assert (Job.objects.count(), DeadLetter.objects.count()) == (0, 0)


@then(parsers.parse('its last entry says the rule "{rule}"'))
def last_entry_rule(story: Story, rule: str) -> None:
    assert story.history()[-1].get("rule") == rule


@then(parsers.re(r"the job succeeded after (?P<count>\d+) attempts?"), converters={"count": int})
def succeeded_after(story: Story, count: int) -> None:
    job = Job.objects.get(pk=story.job_id)
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, count)
    assert job.finished_at is not None
    assert (job.lease_token, job.lease_expires_at) == (None, None)
    assert job.lease_owner != ""  # the worker that ran the last attempt
    assert not DeadLetter.objects.filter(job_id=story.job_id).exists()


@then(
    parsers.re(r'the job is a dead letter with reason "(?P<reason>\w+)" after (?P<count>\d+) attempts?'),
    converters={"count": int},
)
def dead_letter_after(story: Story, reason: str, count: int) -> None:
    # Moved, not copied: the job row is gone in the same transaction.
    assert not Job.objects.filter(pk=story.job_id).exists()
    dead = DeadLetter.objects.get(job_id=story.job_id)
    assert (dead.reason, dead.attempts, dead.max_attempts) == (reason, count, 3)
    assert dead.task_name in {jobs.always_fails.name, jobs.fatal.name}
    last = dead.errors[-1]
    assert (dead.last_error_class, dead.last_error) == (last["error_class"], last["message"])
    assert story.key in dead.last_error


@then(
    parsers.re(r'its error history has (?P<count>\d+) entr(?:y|ies) that ended "(?P<ended>\w+)"'),
    converters={"count": int},
)
def history_entries(story: Story, count: int, ended: str) -> None:
    history = story.history()
    assert [entry["ended"] for entry in history] == [ended] * count, history
    assert [entry["attempt"] for entry in history] == list(range(1, count + 1))
    expected_kind = "fatal" if ended == "fatal" else "retryable"
    assert all(entry["kind"] == expected_kind for entry in history), history
    assert all(entry["at"] for entry in history), history
