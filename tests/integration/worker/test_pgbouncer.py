"""Workers behind a real PgBouncer in transaction pooling mode (docs/worker.md#pgbouncer).

Each test starts its own PgBouncer (tests/pgbouncer.py) and a real
`manage.py runworker` whose ``default`` database goes through it; jobs are
enqueued by another process through the same PgBouncer. Assertions are
about counts, states and which session did what, never about durations: a
deadline only bounds a test that would otherwise hang.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest
from django.db import connection

from django_jobretry.console import counters
from django_jobretry.models import CounterEvent, DeadLetter, Job, JobStatus
from tests.jobs_app.models import Execution
from tests.pgbouncer import Bouncer, pgbouncer  # noqa: F401 - the fixture
from tests.processes import Workers, finish, runs, spawn, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUTS = ["statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"]


@pytest.fixture
def claim_log() -> Iterator[None]:
    """Every UPDATE statement of the jobs table, with its text and time, in ``test_claim_log``.

    Through PgBouncer a server connection runs everyone's statements, so
    pg_stat_activity cannot tell whether the worker's loop has claimed since
    some moment; a statement-level trigger (which fires for an UPDATE of zero
    rows too) can. Dropped after the test: the tables outlive it.
    """
    table = Job._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE test_claim_log (at timestamptz NOT NULL DEFAULT clock_timestamp(), query text);"
            "CREATE FUNCTION test_log_claim() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO test_claim_log (query) VALUES (current_query()); RETURN NULL; END $$;"
            f"CREATE TRIGGER test_log_claim AFTER UPDATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION test_log_claim()"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                f"DROP TRIGGER test_log_claim ON {table}; DROP FUNCTION test_log_claim(); "
                "DROP TABLE test_claim_log"
            )


def claimed_after(moment: datetime) -> bool:
    """The worker's claim statement (alone or with successes: "picked AS (") has run since ``moment``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM test_claim_log WHERE at > %s AND query LIKE %s", [moment, "%picked AS (%"]
        )
        return cursor.fetchone() is not None


def listen_sessions_named() -> list[str]:
    """application_name of every session of this database whose last query was the worker's LISTEN."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
            "AND query = 'LISTEN django_jobretry' AND pid <> pg_backend_pid()"
        )
        return [row[0] for row in cursor.fetchall()]


def succeeded(*keys: str) -> bool:
    done = Job.objects.filter(status=JobStatus.SUCCEEDED, args__0__in=keys).count()
    return done == len(keys)


def enqueue(bouncer: Bouncer, code: str) -> None:
    """Enqueue through PgBouncer, from a process whose default database is PgBouncer."""
    bouncer.run_python(f"from tests.jobs_app import jobs\n{code}")


def direct_timeouts(bouncer: Bouncer) -> dict[str, str]:
    """The timeouts a fresh session of the test database starts with (the server's defaults)."""
    from tests.processes import test_database_url

    with psycopg.connect(test_database_url(), autocommit=True) as session:
        return {name: str(session.execute(f"SHOW {name}").fetchone()[0]) for name in TIMEOUTS}


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=30)
    assert code == 0, output
    return output


def test_a_direct_listener_wakes_a_worker_whose_database_goes_through_pgbouncer(
    pgbouncer: Bouncer,  # noqa: F811
    workers: Workers,
    claim_log: None,
) -> None:
    # Polling every 60 s and a 20 s deadline: only a notification can start the job in time.
    process = spawn(workers, "--concurrency", "4", env=pgbouncer.env(listen="direct", poll=60))
    wait_until(
        lambda: listen_sessions_named() == ["jobretry-direct"], timeout=30, what="the direct LISTEN session"
    )
    enqueue(pgbouncer, "jobs.record.enqueue('first')")
    wait_until(lambda: succeeded("first"), timeout=20, what="the first job, woken by NOTIFY or the start")
    finished_at = Job.objects.get(args=["first"]).finished_at
    assert finished_at is not None
    # After recording it the loop claims once more (nothing due), then waits 60 s:
    # from here on only a notification makes it claim within the deadline.
    wait_until(lambda: claimed_after(finished_at), timeout=20, what="the worker to go idle")
    enqueue(pgbouncer, "jobs.record.bulk_enqueue([((f'n{i}',), {}) for i in range(40)])")
    wait_until(lambda: succeeded(*[f"n{i}" for i in range(40)]), timeout=20, what="NOTIFY to wake the worker")

    output = stop(process)
    assert Execution.objects.count() == 41
    assert set(Execution.objects.values_list("attempt", flat=True)) == {1}
    assert set(Execution.objects.values_list("pid", flat=True)) == {process.pid}
    assert Job.objects.exclude(status=JobStatus.SUCCEEDED).count() == 0
    # The session-level timeouts were not set on PgBouncer's shared server connections ...
    assert pgbouncer.server_settings(TIMEOUTS) == [direct_timeouts(pgbouncer)] * 2
    assert "transaction-pooled" in output, output
    # ... and the enqueue counter (sharded by backend pid) still adds up.
    enqueued = CounterEvent.ENQUEUED.value
    assert sum(n for key, n in counters.totals().items() if key[0] == enqueued) == 41


def test_without_a_direct_listener_the_worker_polls_through_pgbouncer(
    pgbouncer: Bouncer,  # noqa: F811
    workers: Workers,
) -> None:
    process = spawn(workers, "--concurrency", "4", env=pgbouncer.env(listen="pooled", poll=0.2))
    enqueue(
        pgbouncer,
        "jobs.record.bulk_enqueue([((f'p{i}',), {}) for i in range(30)])\n"
        "jobs.flaky.enqueue('flaky', 2)\n"
        "jobs.always_fails.enqueue('doomed')",
    )
    wait_until(lambda: succeeded(*[f"p{i}" for i in range(30)]), timeout=30, what="polling to run the jobs")
    wait_until(lambda: succeeded("flaky"), timeout=30, what="the flaky job to succeed on its third attempt")
    wait_until(lambda: DeadLetter.objects.count() == 1, timeout=30, what="the failing job's dead letter")

    output = stop(process)
    assert runs("flaky") == 3
    assert runs("doomed") == 3
    assert list(Execution.objects.filter(key="flaky").order_by("id").values_list("attempt", flat=True)) == [
        1,
        2,
        3,
    ]
    assert DeadLetter.objects.get().attempts == 3
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 31
    assert Execution.objects.exclude(key__in=["flaky", "doomed"]).count() == 30
    # `manage.py check` ran at start and said LISTEN through PgBouncer goes nowhere.
    assert "django_jobretry.W002" in output, output


def test_with_listen_off_the_worker_opens_no_listen_session(
    pgbouncer: Bouncer,  # noqa: F811
    workers: Workers,
) -> None:
    process = spawn(workers, env=pgbouncer.env(listen="off", poll=0.2))
    enqueue(pgbouncer, "jobs.record.bulk_enqueue([((f'o{i}',), {}) for i in range(5)])")
    wait_until(lambda: succeeded(*[f"o{i}" for i in range(5)]), timeout=30, what="polling to run the jobs")
    assert listen_sessions_named() == []
    output = stop(process)
    assert "django_jobretry.W002" not in output, output
