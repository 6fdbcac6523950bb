"""How one worker process runs: the options of `manage.py runworker`, as a value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from django_jobretry.conf import jobretry_settings


@dataclass(frozen=True)
class WorkerOptions:
    """How one worker process runs; defaults come from JOBRETRY."""

    queues: Sequence[str] | None = None
    concurrency: int = 10
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
