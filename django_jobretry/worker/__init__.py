"""The worker engine: claim, run, record, heartbeat, recover, listen."""

from django_jobretry.worker.engine import Worker, WorkerOptions

__all__ = ["Worker", "WorkerOptions"]
