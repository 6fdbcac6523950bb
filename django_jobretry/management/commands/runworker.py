"""`manage.py runworker`: run jobs until stopped.

A thin shell around worker.engine.Worker, which is what tests drive: the
command only turns its options into WorkerOptions and sets up logging.
"""

from __future__ import annotations

import logging
import signal
import time
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connection

from django_jobretry.conf import jobretry_settings
from django_jobretry.management.arguments import add_runworker_arguments
from django_jobretry.management.database import DatabaseCommand, LostConnection
from django_jobretry.worker import Worker, WorkerOptions
from django_jobretry.worker.lifecycle import warn_unknown_queues
from django_jobretry.worker.session import Backoff, drop_connection

_LEVELS = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG, 3: logging.DEBUG}


#: Times a start whose connection is cut (after it reached the database) begins again.
START_ATTEMPTS = 5


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
        add_runworker_arguments(parser)

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
