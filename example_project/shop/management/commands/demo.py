"""`manage.py demo`: what `make demo` runs.

Enqueues a mix of jobs (succeeding, flaky, always failing, fatal), runs a
worker until each has reached a final state, and prints a summary.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Min
from django.utils import timezone

from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.worker import Worker, WorkerOptions
from example_project.shop import jobs

#: The demo must finish in under a minute; its own policy retries in < 1 s.
DEADLINE_SECONDS = 45


class Command(BaseCommand):
    help = "Enqueue a mix of jobs, run a worker until they are done, and summarise."

    def handle(self, *args: Any, **options: Any) -> None:
        heading = self.style.MIGRATE_HEADING
        self.stdout.write(heading("1. Migrating the example project"))
        call_command("migrate", verbosity=0, interactive=False)
        self.stdout.write("   database ready\n\n" + heading("2. The demo policy's retry schedule"))
        call_command("showpolicies", "demo", stdout=self.stdout)

        self.stdout.write(heading("3. Enqueuing jobs"))
        enqueued = [
            jobs.send_receipt.enqueue(1001),
            jobs.send_receipt.enqueue(1002),
            jobs.sync_inventory.enqueue("SKU-42"),
            jobs.notify_partner.enqueue(1001),
            jobs.charge_card.enqueue(1003, -500),
            jobs.send_welcome_email.enqueue("not-an-address"),
        ]
        ids = [job.pk for job in enqueued]
        for job in enqueued:
            self.stdout.write(f"   job {job.pk}: {job.task_name.rsplit('.', 1)[-1]}")

        self.stdout.write("\n" + heading("4. Running burst workers (log lines are their transitions)"))
        self._run_worker_until_done(ids)
        self._summary(ids)

    def _run_worker_until_done(self, ids: list[int]) -> None:
        """Burst workers (like `runworker --burst`) until every demo job is final.

        A burst worker exits once nothing is due; a retry is due a fraction of
        a second later under the demo policy, so the next burst picks it up.
        """
        deadline = time.monotonic() + DEADLINE_SECONDS
        live = Job.objects.filter(pk__in=ids, status__in=[JobStatus.READY, JobStatus.RUNNING])
        while live.exists():
            if time.monotonic() > deadline:
                raise CommandError(f"jobs still live after {DEADLINE_SECONDS}s; is the database slow?")
            Worker(WorkerOptions(queues=["demo"], concurrency=4, burst=True, listen=False)).run()
            next_due = live.filter(status=JobStatus.READY).aggregate(at=Min("run_at"))["at"]
            if next_due is not None:
                time.sleep(min(max((next_due - timezone.now()).total_seconds(), 0), 1))

    def _summary(self, ids: list[int]) -> None:
        finished = list(Job.objects.filter(pk__in=ids).order_by("pk"))
        dead = list(DeadLetter.objects.filter(job_id__in=ids).order_by("job_id"))
        rows = [(j.pk, j.task_name, j.attempts, "succeeded", "") for j in finished]
        rows += [(d.job_id, d.task_name, d.attempts, f"dead ({d.reason})", d.last_error) for d in dead]
        rows.sort()
        self.stdout.write("\n" + self.style.MIGRATE_HEADING("5. Summary"))
        self.stdout.write(f"   {'job':>5}  {'task':<20} {'attempts':>8}  {'outcome':<18} last error")
        for pk, task, attempts, outcome, error in rows:
            self.stdout.write(
                f"   {pk:>5}  {task.rsplit('.', 1)[-1]:<20} {attempts:>8}  {outcome:<18} {error[:60]}"
            )
        reasons = Counter(d.reason for d in dead)
        retried = sum(1 for j in finished if j.attempts > 1)
        self.stdout.write(
            f"\n   succeeded: {len(finished)} (of which retried: {retried})   dead letters: {len(dead)} "
            f"({', '.join(f'{r}: {n}' for r, n in sorted(reasons.items()))})"
        )
        self.stdout.write(
            "\n   Dead letters keep their arguments and full error history for an operator.\n"
            "   The admin: `make runserver` (same database as this demo), then open\n"
            "   http://127.0.0.1:8000/admin/ (create a login with `make createsuperuser`)."
        )
