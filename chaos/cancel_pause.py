"""The fault "a cancel during a pause past the lease": the cancel request must outlive the lease.

A worker running a job is stopped (SIGSTOP), the job is cancelled as an
operator would cancel it (``cancel_jobs``, what the admin action and
`manage.py canceljobs` call), and the worker stays stopped past its lease
before SIGCONT. The stopped worker cannot see the request (its heartbeat is
stopped too), so another worker's lease recovery finds the job first: it
must bury it as "cancelled", never hand it to a worker again (issue 17,
point 6). Each cancel is written to ``chaos_cancel`` in the cancel's own
transaction, while it holds the job's row, with that statement's time: a
claim of the job written after it is a violation (chaos/invariants.py).
"""

from __future__ import annotations

import random
import time

from django.db import DatabaseError, InterfaceError, connection, transaction

from chaos.schema import JOB_TABLE
from django_jobretry.jobs.recovery import cancel_jobs

#: Who the cancels are recorded as.
ACTOR = "chaos-canceller"
#: How long to look for a worker that is running a job before settling for any worker.
LOOK_SECONDS = 3.0


def _running() -> list[tuple[int, int]]:
    """(job id, pid of the worker holding it) of every running job."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, lease_owner FROM {JOB_TABLE} WHERE status = 'running'")  # noqa: S608
        rows = cursor.fetchall()
    # A worker id is host:pid:random (django_jobretry/worker/engine.py).
    return [(job_id, int(owner.rsplit(":", 2)[1])) for job_id, owner in rows if owner.count(":") >= 2]


def busy_worker(live: list[int], rng: random.Random) -> int | None:
    """One of the ``live`` worker pids that is running a job, looked for a few seconds; else any."""
    give_up = time.monotonic() + LOOK_SECONDS
    while time.monotonic() < give_up:
        try:
            busy = sorted({pid for _, pid in _running() if pid in live})
        except (DatabaseError, InterfaceError):
            connection.close()
            busy = []
        if busy:
            return rng.choice(busy)
        time.sleep(0.1)
    return rng.choice(live) if live else None


def cancel_one(pid: int, rng: random.Random) -> str:
    """Cancel one job the (stopped) worker ``pid`` holds; what happened, for the fault log."""
    try:
        with transaction.atomic():
            held = sorted(job_id for job_id, owner in _running() if owner == pid)
            if not held:
                return "nothing running to cancel"
            job_id = rng.choice(held)
            result = cancel_jobs([job_id], actor=ACTOR)
            if job_id not in result.stopping and job_id not in result.dead_letters:
                return f"job {job_id} already finished"
            with connection.cursor() as cursor:
                cursor.execute(
                    "INSERT INTO chaos_cancel (job_id, requested_at) VALUES (%s, statement_timestamp())",
                    [job_id],
                )
    except (DatabaseError, InterfaceError) as exc:  # a database fault just before: a pause only
        connection.close()
        return f"cancel failed ({type(exc).__name__})"
    return f"job {job_id} cancelled while its worker was stopped"
