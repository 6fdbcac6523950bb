"""Chapter 8 of `manage.py demo`: a dead letter's bad argument repaired, and the job run again.

The welcome e-mail of chapter 3 died at once: its address is not one, and
retrying cannot fix that. The repair service (deadletters/repair.py, what
the admin's "Repair arguments" form calls) checks new arguments as an
enqueue does, refuses a call the task cannot take without changing
anything, and requeues the dead letter with the arguments it accepts.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from django_jobretry.deadletters import repair
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import DeadLetter, Job
from example_project.shop.demo.running import run_bursts_until_final

ADDRESS = "customer@example.com"
ACTOR = "demo: the customer corrected the address"


def tell(command: BaseCommand, job_id: int) -> None:
    """Repair the dead letter of job ``job_id`` (a wrong repair first), then run the job it became."""
    write = command.stdout.write
    write("\n" + command.style.MIGRATE_HEADING("8. Repairing a dead letter's arguments"))
    dead = DeadLetter.objects.get(job_id=job_id)
    write(
        f"   dead letter {dead.pk} (job {job_id}, {dead.task_name.rsplit('.', 1)[-1]}) died {dead.reason}: "
        f"{dead.last_error}\n   arguments: args={dead.args} kwargs={dead.kwargs}"
    )
    seen = repair.digest(dead.args, dead.kwargs)  # what the operator was shown
    try:
        repair.repair(dead.pk, args=[], kwargs={"adress": ADDRESS}, seen=seen, actor=ACTOR)
    except InvalidJob as refused:
        write(f"   repair with kwargs={{'adress': {ADDRESS!r}}}: refused, nothing changed:\n     {refused}")
    repaired = repair.repair(dead.pk, args=[ADDRESS], kwargs={}, seen=seen, actor=ACTOR)
    for change in repaired.changes:
        write(f"   repair {change['path']}: {change.get('old')!r} -> {change.get('new')!r}")
    write(f"   requeued as job {repaired.job.pk} by {ACTOR!r}; running it:")
    run_bursts_until_final([repaired.job.pk])
    job = Job.objects.get(pk=repaired.job.pk)
    left = DeadLetter.objects.filter(pk=dead.pk).exists()
    write(
        f"\n   job {job.pk}: {job.status} after {job.attempts} attempt(s); "
        f"dead letter {dead.pk} {'still there' if left else 'gone'}"
    )
