"""Periodic schedules: their state rows, and the schedule and slot of each run on jobs and dead letters.

The new columns are NULL on every existing row, so adding them rewrites
nothing, and their CHECK constraints are added NOT VALID (0019 validates
them without blocking writes). 0019 also builds the one-run-per-slot index
concurrently. Both take no lock that holds enqueues back on a big table.
"""

import datetime

from django.contrib.postgres.operations import AddConstraintNotValid
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0017_readable_rows_validate"),
    ]

    operations = [
        migrations.CreateModel(
            name="Schedule",
            fields=[
                ("name", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("task_name", models.CharField(max_length=200)),
                ("cadence", models.CharField(max_length=300)),
                ("next_slot", models.DateTimeField()),
                ("last_slot", models.DateTimeField(blank=True, null=True)),
                ("last_job_id", models.BigIntegerField(blank=True, null=True)),
                ("last_success_at", models.DateTimeField(blank=True, null=True)),
                ("runs", models.BigIntegerField(default=0, help_text="Slots that ran.")),
                ("skipped", models.BigIntegerField(default=0)),
                ("missed", models.BigIntegerField(default=0)),
                ("refused", models.BigIntegerField(default=0)),
                ("paused_at", models.DateTimeField(blank=True, null=True)),
                ("paused_by", models.CharField(blank=True, default="", max_length=150)),
                ("pause_reason", models.CharField(blank=True, default="", max_length=500)),
                ("declared_at", models.DateTimeField()),
            ],
            options={
                "ordering": ["name"],
                "permissions": [
                    ("pause_schedule", "Can pause and resume a schedule"),
                    ("run_schedule", "Can run a schedule now"),
                ],
            },
        ),
        migrations.AddField(
            model_name="deadletter",
            name="schedule_name",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="deadletter",
            name="schedule_slot",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="retry_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="schedule_name",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="schedule_slot",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="deadletter",
            name="reason",
            field=models.CharField(
                choices=[
                    ("fatal", "Fatal error"),
                    ("exhausted", "Attempts exhausted"),
                    ("deadline", "Deadline passed (retry_for, or its schedule's next slot)"),
                    ("lease_expired", "Last attempt lost (lease expired)"),
                    ("cancelled", "Cancelled by an operator"),
                ],
                max_length=13,
            ),
        ),
        AddConstraintNotValid(
            model_name="deadletter",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("schedule_slot__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    (
                        "schedule_slot__lte",
                        datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC),
                    ),
                ),
                name="jobretry_dead_schedule_slot_holdable",
            ),
        ),
        AddConstraintNotValid(
            model_name="job",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("schedule_slot__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    (
                        "schedule_slot__lte",
                        datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC),
                    ),
                ),
                name="jobretry_job_schedule_slot_holdable",
            ),
        ),
        AddConstraintNotValid(
            model_name="job",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("retry_until__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("retry_until__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_job_retry_until_holdable",
            ),
        ),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(("paused_at", None)), fields=["next_slot"], name="jobretry_schedule_due"
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("missed__gte", 0), ("refused__gte", 0), ("runs__gte", 0), ("skipped__gte", 0)
                ),
                name="jobretry_schedule_counts_pos",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("next_slot__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("next_slot__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_schedule_next_slot_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("last_slot__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("last_slot__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_schedule_last_slot_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("last_success_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    (
                        "last_success_at__lte",
                        datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC),
                    ),
                ),
                name="jobretry_schedule_last_success_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("paused_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("paused_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_schedule_paused_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("declared_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("declared_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_schedule_declared_at_holdable",
            ),
        ),
    ]
