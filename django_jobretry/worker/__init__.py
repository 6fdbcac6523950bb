"""The worker: claim, run, record, heartbeat, recover, listen.

Names are imported on first use, so a child process of the process pool can
import django_jobretry.worker.child before Django is set up.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_jobretry.worker.engine import Worker
    from django_jobretry.worker.lifecycle import WorkerOptions

__all__ = ["Worker", "WorkerOptions"]


def __getattr__(name: str) -> object:
    if name == "Worker":
        from django_jobretry.worker.engine import Worker

        return Worker
    if name == "WorkerOptions":
        from django_jobretry.worker.lifecycle import WorkerOptions

        return WorkerOptions
    raise AttributeError(f"module 'django_jobretry.worker' has no attribute {name!r}")
