"""How one worker process runs: the options of `manage.py runworker`, as a value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from django_jobretry.conf import jobretry_settings

#: The most runner threads one worker process starts. Each is a thread that may hold a database
#: connection of its own (and with ``pool="process"`` a child process): a thousand is far more
#: than one PostgreSQL serves by default (``max_connections`` 100). For more, run more processes.
#: Unbounded, ``--concurrency 1000000000`` started threads until the machine ran out of memory.
MAX_CONCURRENCY = 1000
#: Runner threads when nothing says otherwise: WorkerOptions' default and ``--concurrency``'s.
DEFAULT_CONCURRENCY = 10
#: What a concurrency may be, as every error about one says it.
CONCURRENCY_RANGE = f"an integer from 1 to {MAX_CONCURRENCY} (runner threads in one worker process)"


def valid_concurrency(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONCURRENCY


@dataclass(frozen=True)
class WorkerOptions:
    """How one worker process runs; defaults come from JOBRETRY."""

    queues: Sequence[str] | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    burst: bool = False
    max_jobs: int | None = None
    lease_seconds: float | None = None
    shutdown_timeout: float | None = None
    #: LISTEN for wake-ups (a connection of its own); False: poll only. Default: JOBRETRY["LISTEN"].
    listen: bool = field(default_factory=lambda: jobretry_settings.listen)
    recover_every: float = 1.0
    #: "thread": handlers run in runner threads; "process": each runner hands
    #: its jobs to a child process, so a time limit kills (worker/process_pool.py).
    pool: Literal["thread", "process"] = "thread"
    max_jobs_per_child: int | None = None
    max_memory_mb: int | None = None
    #: Look for due schedule slots (worker/scheduler.py); never in burst mode. ``runworker --no-schedules``.
    schedules: bool = True

    def __post_init__(self) -> None:
        # Checked here, before the worker makes one runner per unit of concurrency.
        if not valid_concurrency(self.concurrency):
            raise ValueError(f"concurrency {self.concurrency!r} is invalid: {CONCURRENCY_RANGE}")

    def claim_size(self, running: int, claimed_total: int) -> int:
        """How many jobs to claim now: 0 while busy, until half the slots are free.

        One claim of many jobs costs about what one claim of a single job does.
        """
        free = self.concurrency - running
        if running and free < max(1, self.concurrency // 2):
            return 0
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - claimed_total)
        return max(free, 0)
