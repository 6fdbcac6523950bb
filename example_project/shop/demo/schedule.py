"""Chapter 6 of `manage.py demo`: a periodic schedule whose runs happen.

The schedule is declared in ``JOBRETRY["SCHEDULES"]`` for the demo's own
run only (``override_settings``): the example project's `runworker` would
otherwise refresh exchange rates every second for ever. Its row stays in
the database as history, which the admin marks "not declared in this
deploy" once the demo is over (docs/schedules.md#operating-schedules).
"""

from __future__ import annotations

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db.models import Max
from django.test.utils import override_settings

from django_jobretry.models import Job, JobStatus
from django_jobretry.worker import WorkerOptions
from example_project.shop import jobs
from example_project.shop.demo.running import run_bursts_until_final, run_worker_until

NAME = "demo-exchange-rates"
#: Runs the chapter waits for; at one a second.
RUNS = 3


def tell(command: BaseCommand) -> None:
    """Declare the schedule, run a worker until RUNS of its runs succeeded, list them and `schedules`.

    A slot may make a run just before the worker stops: bursts, which never
    look at schedules, finish it.
    """
    command.stdout.write("\n" + command.style.MIGRATE_HEADING("6. A periodic schedule, every second"))
    command.stdout.write(
        f'   Declared for this run in JOBRETRY["SCHEDULES"]: {NAME!r} runs\n'
        f"   {jobs.refresh_exchange_rates.name} every second. No beat process:\n"
        "   each worker looks for due slots, and the database lets exactly one start each run.\n"
    )
    before = Job.objects.aggregate(last=Max("pk"))["last"] or 0
    runs = Job.objects.filter(schedule_name=NAME, pk__gt=before).order_by("pk")
    declared = {
        **settings.JOBRETRY,
        "SCHEDULES": {NAME: {"task": jobs.refresh_exchange_rates.name, "every": 1}},
    }
    with override_settings(JOBRETRY=declared):
        run_worker_until(
            lambda: runs.filter(status=JobStatus.SUCCEEDED).count() >= RUNS,
            WorkerOptions(queues=["demo"], concurrency=2),
            f"{RUNS} runs of {NAME!r}",
        )
        run_bursts_until_final(runs.values_list("pk", flat=True))
        made = list(runs)
        command.stdout.write(f"\n   {'run':>4}  {'slot (UTC)':<10}  status")
        for run in made:
            slot = run.schedule_slot.strftime("%H:%M:%S") if run.schedule_slot else "-"
            command.stdout.write(f"   {run.pk:>4}  {slot:<10}  {run.status}")
        succeeded = sum(1 for run in made if run.status == JobStatus.SUCCEEDED)
        command.stdout.write(
            f"\n   schedule runs: {len(made)}, succeeded: {succeeded}\n\n   $ manage.py schedules"
        )
        call_command("schedules", stdout=command.stdout)
