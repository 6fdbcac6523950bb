"""Start-up: a stop asked for while a worker process is still starting; signals once it runs; queues.

Django imports every installed app, and each app's jobs.py (user code, at
times slow), before the runworker command runs. A SIGTERM in that time -
a rollout sends it whenever it likes - would kill the process with -15. So
in a runworker process the app installs, as early as it can, handlers that
only remember the request; the worker then exits 0 before claiming
anything (docs/worker.md#stopping-signals-and-graceful-shutdown).

A ``--queue`` that is misspelt would idle forever without a word, so a
queue no job row has and no registered task declares is named at start-up
with the nearest known names. The worker still starts: a new queue may
rightly be empty until its first job.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType

logger = logging.getLogger("django_jobretry")

#: Set by a SIGTERM or SIGINT received before the worker took over the signals.
STOP_REQUESTED = threading.Event()


def is_worker_process(argv: Sequence[str]) -> bool:
    """Whether this process is `manage.py runworker` (or `django-admin runworker`)."""
    return len(argv) > 1 and argv[1] == "runworker"


def remember_stop_requests() -> None:
    """Until Worker.run() installs its own handlers, SIGTERM/SIGINT only set STOP_REQUESTED."""
    if threading.current_thread() is not threading.main_thread():
        return

    def remember(signum: int, frame: FrameType | None) -> None:
        STOP_REQUESTED.set()

    signal.signal(signal.SIGTERM, remember)
    signal.signal(signal.SIGINT, remember)


def install_stop_handlers(
    stop: Callable[[], None], stopping: threading.Event, running: Callable[[], int], worker_id: str
) -> None:
    """SIGTERM/SIGINT start the graceful drain; a second one exits at once with code 1.

    After the second signal the jobs still running keep their leases until
    they expire, and other workers recover them, as after a crash.
    """
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            count = running()
            logger.warning(
                "second signal %s: exiting at once; %d running jobs are recovered after their lease",
                signal.Signals(signum).name,
                count,
                extra={"worker": worker_id, "outcome": "forced_exit", "running": count},
            )
            os._exit(1)
        logger.info("signal %s: finishing running jobs, then exiting", signal.Signals(signum).name)
        stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


#: Distinct queue names read from the jobs table to suggest one: enough for any real deployment.
QUEUE_CANDIDATES = 1000


def warn_unknown_queues(queues: Sequence[str]) -> list[str]:
    """Warn about each queue in ``queues`` no job has and no registered task declares; the warnings."""
    from django_jobretry.display.suggestions import did_you_mean
    from django_jobretry.models import Job
    from django_jobretry.registry import registry

    declared = {definition.queue_name for name in registry.names() if (definition := registry.get(name))}
    warnings: list[str] = []
    for queue in dict.fromkeys(queues):
        if queue in declared or Job.objects.filter(queue_name=queue).exists():
            continue
        seen = Job.objects.order_by().values_list("queue_name", flat=True).distinct()[:QUEUE_CANDIDATES]
        text = (
            f"--queue {queue!r}: no job has this queue and no registered task declares it; "
            f"the worker waits for its first job.{did_you_mean([queue], {*declared, *seen, 'default'})}"
        )
        logger.warning(text, extra={"outcome": "unknown_queue", "queue": queue})
        warnings.append(text)
    return warnings
