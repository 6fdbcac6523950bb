"""`manage.py runworker`: run jobs until stopped.

A thin shell around worker.engine.Worker, which is what tests drive: the
command only turns its options into WorkerOptions and sets up logging.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import time
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connection

from django_jobretry.conf import jobretry_settings
from django_jobretry.management.cli import DatabaseCommand, LostConnection, integer, positive_int, queue_name
from django_jobretry.worker import Worker, WorkerOptions
from django_jobretry.worker.lifecycle import (
    ASYNC_CONCURRENCY_RANGE,
    CONCURRENCY_RANGE,
    DEFAULT_ASYNC_CONCURRENCY,
    DEFAULT_CONCURRENCY,
    MAX_ASYNC_CONCURRENCY,
    MAX_CONCURRENCY,
    valid_async_concurrency,
    valid_concurrency,
    warn_unknown_queues,
)
from django_jobretry.worker.session import Backoff, drop_connection

_LEVELS = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG, 3: logging.DEBUG}


#: Times a start whose connection is cut (after it reached the database) begins again.
START_ATTEMPTS = 5


def concurrency(text: str) -> int:
    """``--concurrency``: bounded by the rule of WorkerOptions, refused here as a usage error."""
    value = integer(text)
    if not valid_concurrency(value):
        raise argparse.ArgumentTypeError(f"{value} is invalid: {CONCURRENCY_RANGE}")
    return value


def async_concurrency(text: str) -> int:
    """``--async-concurrency``: bounded by the rule of WorkerOptions, refused here as a usage error."""
    value = integer(text)
    if not valid_async_concurrency(value):
        raise argparse.ArgumentTypeError(f"{value} is invalid: {ASYNC_CONCURRENCY_RANGE}")
    return value


def _number(text: str, allowed: str = "") -> float:
    with contextlib.suppress(ValueError):
        return float(text)
    raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds{allowed}")


def seconds(text: str) -> float:
    """``--shutdown-timeout``: 0 to 86400 seconds."""
    value = _number(text)
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 86400 seconds")
    return value


def lease_seconds(text: str) -> float:
    """``--lease``: 1 to 86400 seconds."""
    value = _number(text, " from 1 to 86400")
    if not 1 <= value <= 86_400:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{value:g} is invalid: a lease is 1 to 86400 seconds")
    return value


class Command(DatabaseCommand):
    help = "Run background jobs from the database until stopped (SIGTERM/SIGINT stop gracefully)."
    started = False
    # Until the worker runs and takes the signals over (graceful drain), a stop request
    # ends the start at once, a wait for the database included: nothing was claimed yet.
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    stopped_code = 0

    def stopped_line(self, signum: signal.Signals) -> str:
        return f"stopped by {signum.name} while starting: no job was claimed"

    def execute(self, *args: Any, **options: Any) -> str | None:
        """Start again when the connection is cut while starting: an outage, not a mistake to name.

        A database never reached still ends the command (exit 4); once the
        worker runs, it rides out outages itself.
        """
        backoff = Backoff()
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return super().execute(*args, **options)
            except LostConnection as lost:
                if self.started or attempt == START_ATTEMPTS:
                    raise
                delay = backoff.failed()
                logging.getLogger("django_jobretry").warning(
                    "%s; starting again in %.1fs", lost, delay, extra={"outcome": "start_retried"}
                )
                drop_connection()
                time.sleep(delay)
        return None  # pragma: no cover - the last attempt returns or raises

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            type=queue_name,
            dest="queues",
            help="only run jobs of this queue; repeat for several (default: all queues)",
        )
        parser.add_argument(
            "--concurrency",
            type=concurrency,
            default=DEFAULT_CONCURRENCY,
            help=f"jobs run at once, each in its own thread, 1-{MAX_CONCURRENCY} (default: %(default)s)",
        )
        parser.add_argument(
            "--async-concurrency",
            type=async_concurrency,
            default=DEFAULT_ASYNC_CONCURRENCY,
            help=f"async def jobs run at once on the worker's event loop, 0-{MAX_ASYNC_CONCURRENCY}; "
            "0 runs them in the threads (default: %(default)s)",
        )
        parser.add_argument("--burst", action="store_true", help="exit 0 once no job is due")
        parser.add_argument("--max-jobs", type=positive_int, help="exit after running this many jobs")
        parser.add_argument(
            "--lease", type=lease_seconds, help="lease in seconds, 1-86400 (default: JOBRETRY LEASE_SECONDS)"
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=seconds,
            help="grace period for running jobs on SIGTERM (default: JOBRETRY SHUTDOWN_TIMEOUT_SECONDS)",
        )
        parser.add_argument(
            "--no-listen",
            action="store_true",
            help="poll only, without LISTEN/NOTIFY (default: JOBRETRY LISTEN, which is True)",
        )
        parser.add_argument(
            "--no-schedules",
            action="store_true",
            help="never insert the runs of periodic schedules (other workers do); --burst never does",
        )
        parser.add_argument(
            "--pool",
            choices=("thread", "process"),
            default="thread",
            help="run handlers in threads, or each runner's jobs in a child process whose time limit "
            "is enforced by killing it (default: %(default)s)",
        )
        parser.add_argument(
            "--max-jobs-per-child",
            type=positive_int,
            metavar="N",
            help="with --pool process: replace a child process after N jobs (default: never)",
        )
        parser.add_argument(
            "--max-memory-mb",
            type=positive_int,
            metavar="MB",
            help="with --pool process: replace a child whose peak memory passed MB (default: never)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        logger = logging.getLogger("django_jobretry")
        logger.setLevel(_LEVELS.get(options["verbosity"], logging.INFO))
        if not logger.hasHandlers():
            # Without a LOGGING setting Python prints only warnings; an operator
            # running -v 1 expects to see the transitions.
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
        for name in ("max_jobs_per_child", "max_memory_mb"):
            if options[name] is not None and options["pool"] != "process":
                raise CommandError(
                    f"--{name.replace('_', '-')} recycles child processes: it needs --pool process"
                )
        _ = jobretry_settings.policies  # invalid settings stop here, with the check id
        # Once running, the worker rides out an outage (docs/worker.md#database-outages-and-reconnects);
        # a database it cannot reach at start is a mistake to name (DatabaseCommand), not to wait out.
        connection.ensure_connection()
        warn_unknown_queues(options["queues"] or [])
        worker = Worker(
            WorkerOptions(
                queues=options["queues"],
                concurrency=options["concurrency"],
                async_concurrency=options["async_concurrency"],
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                lease_seconds=options["lease"],
                shutdown_timeout=options["shutdown_timeout"],
                listen=jobretry_settings.listen and not options["no_listen"],
                schedules=not options["no_schedules"],
                pool=options["pool"],
                max_jobs_per_child=options["max_jobs_per_child"],
                max_memory_mb=options["max_memory_mb"],
            )
        )
        self.started = True
        code = worker.run()
        if code:  # 3: outcomes the database did not take before the grace ran out (docs/worker.md)
            raise SystemExit(code)
