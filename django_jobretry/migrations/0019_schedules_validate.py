"""Validate 0018's constraints and build the one-run-per-slot index, without holding writes back.

The index is built CONCURRENTLY (so this migration is not atomic): enqueues,
claims and burials go on while it reads the jobs table. VALIDATE CONSTRAINT
takes a SHARE UPDATE EXCLUSIVE lock, which blocks no reads or writes either
(docs/install.md#upgrading-big-tables).
"""

from django.contrib.postgres.operations import ValidateConstraint
from django.db import migrations, models

ONE_RUN_PER_SLOT = "jobretry_job_one_run_per_slot"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0018_schedules"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {ONE_RUN_PER_SLOT} "
                    "ON django_jobretry_job (schedule_name, schedule_slot) WHERE schedule_name IS NOT NULL",
                    f"DROP INDEX CONCURRENTLY IF EXISTS {ONE_RUN_PER_SLOT}",
                ),
            ],
            state_operations=[
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("schedule_name__isnull", False)),
                        fields=("schedule_name", "schedule_slot"),
                        name=ONE_RUN_PER_SLOT,
                    ),
                ),
            ],
        ),
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_schedule_slot_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_schedule_slot_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_retry_until_holdable"),
    ]
