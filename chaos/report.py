"""The end of a run: wait for the drain, check the invariants, print one table and the figures."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import DatabaseError, InterfaceError, connection

from chaos import flows, invariants, partition, stale
from chaos.faults import Fault
from chaos.flows import FlowFeeder
from chaos.invariants import Check
from chaos.processes import Exit, Pool
from chaos.workload import Feeder
from django_jobretry.management.cli import EXIT_UNREACHABLE
from django_jobretry.worker.lifecycle import EXIT_UNRECORDED

PENDING = """
SELECT (SELECT count(*) FROM django_jobretry_job WHERE status IN ('ready', 'running')),
       (SELECT count(*) FROM django_jobretry_deadletter WHERE task_name = 'chaos.fatal'
          AND (requeue_count = 0 OR (requeue_count = 1 AND mod(job_id, 2) = 0)))
"""

REQUEUED = "SELECT count(*) FROM chaos_audit WHERE source = 'job' AND op = 'insert' AND requeue_count > 0"


def _pending() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(PENDING)
        row = cursor.fetchone()
    return int(row[0]), int(row[1])


def drain(deadline: float) -> bool:
    """Wait (until ``deadline``, monotonic) for no live job and nothing left for the operators."""
    last = (-1, -1)
    while time.monotonic() < deadline:
        try:
            last = _pending()
        except (DatabaseError, InterfaceError):
            connection.close()
        else:
            if last == (0, 0):
                return True
        time.sleep(0.5)
    print(f"chaos: not drained by the deadline: {last[0]} live jobs, {last[1]} dead letters for operators")
    return False


def save_faults(faults: list[Fault]) -> None:
    with connection.cursor() as cursor:
        for fault in faults:
            cursor.execute(
                "INSERT INTO chaos_fault (kind, target_pid, started_at, ended_at) VALUES (%s, %s, %s, %s)",
                [fault.kind, fault.target_pid, fault.started_at, fault.ended_at],
            )


def count_kinds(faults: list[Fault]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(Counter(f.kind for f in faults).items()))


def never_started(log_dir: Path, exit: Exit) -> bool:
    """Whether a worker was stopped before it ever logged its worker id (``host:pid:...``).

    Python's and Django's imports run before any code of ours, so a SIGTERM in
    that window (a restarted worker stopped at the end of a run on a loaded
    machine) ends the process as the default action does, -15, having claimed
    nothing. From our app's ready() on, a SIGTERM is remembered and the worker
    exits 0 (worker/lifecycle.py); tests/integration/worker/test_worker_shutdown.py
    holds that part.
    """
    path = log_dir / f"{exit.name}.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return re.search(rf"\bworker \S+:{exit.pid}:\w+", text) is None


def unreachable_at_start(log_dir: Path, exit: Exit) -> bool:
    """Whether a worker restarted while the database restarted, and exited 4 before claiming anything.

    ``runworker`` ends with exit code 4 and one line when it cannot reach the
    database at start (docs/commands.md), for its supervisor to start it
    again, as the harness's does. A restart after a SIGKILL can land in a
    ``pg_restart`` fault ("the database system is starting up").
    """
    if exit.returncode != EXIT_UNREACHABLE or not exit.name.startswith("worker"):
        return False
    path = log_dir / f"{exit.name}.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return "could not reach database" in text and never_started(log_dir, exit)


def processes(pool: Pool, feeder: Feeder, drained: bool, log_dir: Path) -> Check:
    """Workers end only when killed (by the harness or the poison job); a SIGTERM stop exits 0.

    Or -15, for a worker stopped before it started (never_started).

    Or 3, when the stop came in a fault that left outcomes unrecorded when the
    grace ran out (docs/worker.md): their leases return those jobs, and the
    invariants catch a job that was lost or run twice all the same.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT pid FROM chaos_attempt WHERE poison")
        poisoned = {row[0] for row in cursor.fetchall()}
    check = Check("processes exit only when killed; SIGTERM exits 0 (or 3)", len(pool.exits))
    for e in pool.exits:
        stopped_while_importing = (
            e.returncode == -signal.SIGTERM and e.name.startswith("worker") and never_started(log_dir, e)
        )
        if e.stopped and e.returncode not in (0, EXIT_UNRECORDED) and not stopped_while_importing:
            check.violations.append(f"{e.name} pid {e.pid}: SIGTERM stop exited {e.returncode}")
        elif (
            not e.stopped
            and not e.killed_by_harness
            and not (e.returncode == -9 and e.pid in poisoned)
            and not unreachable_at_start(log_dir, e)
        ):
            check.violations.append(f"{e.name} pid {e.pid} exited {e.returncode} by itself")
    if feeder.error is not None:
        check.violations.append(f"the feeder failed: {feeder.error!r}")
    if not drained:
        check.violations.append("jobs were still live at the drain deadline")
    return check


def _scalar(sql: str) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    return row[0] if row else None


def _grep(log_dir: Path, text: str) -> int:
    return sum(path.read_text(errors="replace").count(text) for path in log_dir.glob("worker-*.log"))


def evaluate(
    pool: Pool, feeders: tuple[Feeder, FlowFeeder], drained: bool, slack: timedelta, log_dir: Path
) -> tuple[list[Check], dict[str, Any]]:
    """Every check and figure of the run; the flows' (chaos/flows.py) when the size fed flows."""
    feeder, flow_feeder = feeders
    lost, double, ends = invariants.terminals()
    duplicates, once, by_kind, unexplained = invariants.duplicate_starts(slack)
    duplicates.context = worker_lines(log_dir, unexplained)
    after_cancel, cancel_ends = invariants.no_claim_after_cancel()
    checks = [
        lost,
        double,
        invariants.final_transitions(),
        stale.stale_completions(),
        duplicates,
        once,
        invariants.attempts_bounded(),
        invariants.retry_delays(),
        invariants.provenance(),
        after_cancel,
        processes(pool, feeder, drained, log_dir),
    ]
    restarts = sum(1 for e in pool.exits if e.name.startswith("worker") and not e.stopped)
    figures: dict[str, Any] = {
        "jobs (keys) enqueued": _scalar("SELECT count(*) FROM chaos_enqueued"),
        "ended": ", ".join(f"{name} {n}" for name, n in ends.items()),
        "dead letters by reason": _scalar(
            "SELECT string_agg(new_status || ' ' || n, ', ') FROM (SELECT new_status, count(*) AS n "
            "FROM chaos_audit WHERE source = 'dead' AND op = 'insert' GROUP BY 1 ORDER BY 1) AS r"
        ),
        "handler starts (ledger rows)": _scalar("SELECT count(*) FROM chaos_attempt"),
        "attempts lost mid-run, by fault": ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())),
        "requeues / discards by operators": _scalar(
            f"SELECT ({REQUEUED}) || ' / ' || ((SELECT count(*) FROM chaos_audit "  # noqa: S608
            f"WHERE source = 'dead' AND op = 'delete') - ({REQUEUED}))"
        ),
        "succeeded jobs pruned meanwhile": _scalar(
            "SELECT count(*) FROM chaos_audit "
            "WHERE source = 'job' AND op = 'delete' AND old_status = 'succeeded'"
        ),
        "stale outcomes ignored (worker logs)": _grep(log_dir, "outcome ignored"),
        "jobs cancelled while their worker was stopped, by how they ended": ", ".join(
            f"{name} {n}" for name, n in cancel_ends.items()
        ),
        "worker restarts by the supervisor": restarts,
        **stale.figures(),
    }
    if flow_feeder.count:
        flow_checks, flow_figures = flows.evaluate(flow_feeder.count, flow_feeder.error)
        checks += flow_checks
        figures.update(flow_figures)
    return checks, figures


#: Worker log lines this long before a lost attempt started and after it ended explain it, if any do.
AROUND = timedelta(seconds=10)
#: At most this many of them: the run's output stays readable.
MOST_LINES = 60


def worker_lines(log_dir: Path, attempts: list[invariants.Unexplained]) -> list[str]:
    """The warnings and errors of the workers' logs around the lost attempts no fault explains.

    A run's logs are in a temporary folder that a CI machine does not keep:
    without these lines such a failure cannot be explained afterwards.
    """
    windows = [(started - AROUND, (ended or started) + AROUND) for _, started, ended in attempts]
    lines: list[tuple[datetime, str]] = []
    for path in sorted(log_dir.glob("worker-*.log")):
        for at, line in partition.log_times(path):
            if (" WARNING " in line or " ERROR " in line) and any(a <= at <= b for a, b in windows):
                lines.append((at, f"{path.stem}: {line[:300]}"))
    lines.sort()
    shown = [line for _, line in lines[:MOST_LINES]]
    if len(lines) > MOST_LINES:
        shown.append(f"... and {len(lines) - MOST_LINES} more lines")
    return shown


def print_table(checks: list[Check], figures: dict[str, Any]) -> None:
    width = max(len(check.name) for check in checks)
    print()
    print(f"| {'invariant':<{width}} | checked | violations | result |")
    print(f"| {'-' * width} | ------: | ---------: | ------ |")
    for check in checks:
        result = "OK" if check.ok else "FAIL"
        print(f"| {check.name:<{width}} | {check.checked:>7} | {len(check.violations):>10} | {result:<6} |")
    for check in checks:
        for violation in check.violations[:10]:
            print(f"  FAIL {check.name}: {violation}")
        if len(check.violations) > 10:
            print(f"  ... and {len(check.violations) - 10} more")
        for line in check.context:
            print(f"  | {line}")
    print()
    print("| figure | value |")
    print("| --- | --- |")
    for name, value in figures.items():
        print(f"| {name} | {value} |")
    print(flush=True)
