"""The faults, injected one at a time by the scheduler thread, each logged with its time window.

A fault's window ([started, ended], wall clock of this machine, which is also
the embedded server's clock) and its target (a worker pid, or None for
"every worker") are what the duplicate-start invariant uses to decide
whether a lost attempt was in flight when something hit it.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg

from chaos import cancel_pause, stubborn
from chaos.processes import Pool
from chaos.schema import JOB_TABLE


@dataclass
class Fault:
    kind: str
    target_pid: int | None
    started_at: datetime
    ended_at: datetime
    detail: str = ""


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Injector:
    """Knows how to hurt the run; every method logs what it did in ``log``."""

    pool: Pool
    url: str
    lease: float
    rng: random.Random
    gate: threading.Lock  # held during a restart so the feeder does not enqueue into it
    restart_server: Callable[[], None] | None
    log: list[Fault]

    def _worker(self) -> int | None:
        pids = self.pool.live_pids()
        return self.rng.choice(pids) if pids else None

    def sigkill(self) -> None:
        pid = self._worker()
        if pid is not None and self.pool.sigkill(pid):
            at = now()
            self.log.append(Fault("sigkill", pid, at, at))

    def pause(self) -> None:
        """SIGSTOP a worker for longer than its lease, then SIGCONT: its jobs are recovered meanwhile."""
        pid = self._worker()
        if pid is None:
            return
        started = now()
        if not _stop(pid):
            return
        time.sleep(self.lease + 2.0)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        self.log.append(Fault("sigstop", pid, started, now(), f"{self.lease + 2.0:g}s"))

    def cancel_during_pause(self) -> None:
        """SIGSTOP a worker running a job, cancel the job, SIGCONT after the lease (chaos/cancel_pause.py)."""
        pid = cancel_pause.busy_worker(self.pool.live_pids(), self.rng)
        if pid is None:
            return
        started = now()
        if not _stop(pid):
            return
        try:
            detail = cancel_pause.cancel_one(pid, self.rng)
            time.sleep(max(self.lease + 2.0 - (now() - started).total_seconds(), 0))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.log.append(Fault("cancel_pause", pid, started, now(), detail))

    def terminate_sessions(self) -> None:
        """pg_terminate_backend on every session of one worker (main loop, heartbeat, listener, runners)."""
        pid = self._worker()
        if pid is None:
            return
        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                [f"chaos-{pid}"],
            ).fetchall()
        at = now()
        self.log.append(Fault("terminate_backend", pid, at, at, f"{len(rows)} sessions"))

    def lock_table(self, seconds: float) -> None:
        """ACCESS EXCLUSIVE on the jobs table: claims, heartbeats and outcomes all wait or time out."""
        with psycopg.connect(self.url) as conn:
            conn.execute(f"LOCK TABLE {JOB_TABLE} IN ACCESS EXCLUSIVE MODE")
            started = now()
            time.sleep(seconds)
            conn.rollback()
        self.log.append(Fault("lock_table", None, started, now(), f"{seconds:g}s"))

    def restart(self) -> None:
        """pg_ctl restart -m immediate: every connection drops, the server recovers from WAL."""
        if self.restart_server is None:
            return
        with self.gate:
            started = now()
            self.restart_server()
            self.log.append(Fault("pg_restart", None, started, now()))

    def stubborn_child(self) -> None:
        """SIGTERM a process-pool worker whose child ignores SIGTERM (chaos/stubborn.py)."""
        target, started, ended, detail = stubborn.run(self.pool, self.url, f"stubborn-{len(self.log)}")
        self.log.append(Fault("stubborn_child", target, started, ended, detail))


def _stop(pid: int) -> bool:
    """SIGSTOP ``pid``; False when it already ended (another fault killed it since it was chosen)."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    return True
