"""`manage.py demo`: what `make demo` runs.

Enqueues a mix of jobs (succeeding, flaky, always failing, fatal), runs a
worker until each has reached a final state, and prints a summary. Then
three chapters, a module each in shop/demo/: a periodic schedule, a
partner outage ridden out by the circuit breaker, and the repair of a dead
letter's arguments.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand

from django_jobretry.models import DeadLetter, Job
from example_project.shop import jobs
from example_project.shop.demo import outage, repair, schedule
from example_project.shop.demo.running import run_bursts_until_final


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
        run_bursts_until_final(ids)
        self._summary(ids)

        schedule.tell(self)
        outage.tell(self)
        repair.tell(self, enqueued[-1].pk)  # the welcome e-mail, dead of its address
        self.stdout.write(
            "\n   Dead letters keep their arguments and full error history for an operator.\n"
            "   The admin: `make runserver` (same database as this demo), then open\n"
            "   http://127.0.0.1:8000/admin/ (create a login with `make createsuperuser`)."
        )

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
