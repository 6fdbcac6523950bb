"""Pauses and breakers (the rows the claim reads), and the snooze and held-time columns of jobs.

The new job columns have constant defaults, so adding them rewrites nothing;
the constraints on the big tables (jobs, dead letters, deaths) are added NOT
VALID, and 0021 validates them without blocking writes.
"""

import datetime

import django.db.models.functions.datetime
from django.contrib.postgres.operations import AddConstraintNotValid
from django.db import migrations, models

#: The claim's filter: true while a pause is in force on the job's queue or task, or its task's
#: breaker is not closed and the job is not its probe.
HELD_FUNCTION = """
    CREATE OR REPLACE FUNCTION jobretry_held(queue text, task text, job bigint) RETURNS boolean
    LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
    BEGIN
        RETURN EXISTS (
                SELECT 1 FROM django_jobretry_pause AS p
                WHERE (p.queue_name = queue OR p.task_name = task)
                  AND (p.until IS NULL OR p.until > statement_timestamp()))
            OR EXISTS (
                SELECT 1 FROM django_jobretry_circuit AS c
                WHERE c.task_name = task AND c.state <> 'closed' AND c.probe_job_id IS DISTINCT FROM job);
    END
    $$
"""


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0019_schedules_validate"),
    ]

    operations = [
        # The claim's filter (services/hold_sql.py), over the two tables created next; the
        # function's body is only planned when it is first called, once they exist.
        migrations.RunSQL(HELD_FUNCTION, "DROP FUNCTION IF EXISTS jobretry_held(text, text, bigint)"),
        migrations.CreateModel(
            name="Circuit",
            fields=[
                ("task_name", models.CharField(max_length=200, primary_key=True, serialize=False)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("closed", "Closed"),
                            ("open", "Open"),
                            ("half_open", "Half-open (one probe runs)"),
                        ],
                        db_default="closed",
                        max_length=9,
                    ),
                ),
                ("failures", models.PositiveIntegerField(db_default=0)),
                ("window_started_at", models.DateTimeField(blank=True, null=True)),
                ("opened_at", models.DateTimeField(blank=True, null=True)),
                ("open_until", models.DateTimeField(blank=True, null=True)),
                ("opens", models.PositiveIntegerField(db_default=0)),
                ("cooldown_seconds", models.FloatField(db_default=0)),
                ("max_cooldown_seconds", models.FloatField(db_default=0)),
                ("release_per_second", models.FloatField(db_default=10)),
                ("probe_job_id", models.BigIntegerField(blank=True, null=True)),
                ("probe_attempts", models.PositiveIntegerField(blank=True, null=True)),
                ("reason", models.CharField(blank=True, db_default="", max_length=500)),
                ("updated_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
        ),
        migrations.CreateModel(
            name="Pause",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue_name", models.CharField(blank=True, max_length=100, null=True)),
                ("task_name", models.CharField(blank=True, max_length=200, null=True)),
                ("paused_by", models.CharField(max_length=150)),
                ("reason", models.CharField(blank=True, db_default="", max_length=500)),
                ("paused_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("until", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "permissions": [("pause_work", "Can pause and resume queues and tasks")],
            },
        ),
        migrations.RemoveConstraint(
            model_name="deadletter",
            name="jobretry_dead_reason_valid",
        ),
        migrations.RemoveConstraint(
            model_name="death",
            name="jobretry_death_reason_valid",
        ),
        migrations.AddField(
            model_name="job",
            name="held_seconds",
            field=models.FloatField(db_default=0),
        ),
        migrations.AddField(
            model_name="job",
            name="snoozes",
            field=models.PositiveIntegerField(db_default=0),
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
                    ("snooze_budget", "Snoozed more often than its policy's max_snoozes"),
                ],
                max_length=13,
            ),
        ),
        AddConstraintNotValid(
            model_name="deadletter",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "reason__in",
                        ["fatal", "exhausted", "deadline", "lease_expired", "cancelled", "snooze_budget"],
                    )
                ),
                name="jobretry_dead_reason_valid",
            ),
        ),
        AddConstraintNotValid(
            model_name="death",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "reason__in",
                        ["fatal", "exhausted", "deadline", "lease_expired", "cancelled", "snooze_budget"],
                    )
                ),
                name="jobretry_death_reason_valid",
            ),
        ),
        AddConstraintNotValid(
            model_name="job",
            constraint=models.CheckConstraint(
                condition=models.Q(("held_seconds__gte", 0)), name="jobretry_job_held_seconds_pos"
            ),
        ),
        migrations.AddConstraint(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(("state__in", ["closed", "open", "half_open"])),
                name="jobretry_circuit_state",
            ),
        ),
        migrations.AddConstraint(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("state", "closed"),
                    models.Q(("open_until__isnull", False), ("opened_at__isnull", False)),
                    _connector="OR",
                ),
                name="jobretry_circuit_open_times",
            ),
        ),
        migrations.AddConstraint(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("state", "half_open"), _negated=True),
                    ("probe_job_id__isnull", False),
                    _connector="OR",
                ),
                name="jobretry_circuit_probe",
            ),
        ),
        migrations.AddConstraint(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "window_started_at__gte",
                        datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC),
                    ),
                    (
                        "window_started_at__lte",
                        datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC),
                    ),
                ),
                name="jobretry_circuit_window_started_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("opened_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("opened_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_circuit_opened_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("open_until__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("open_until__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_circuit_open_until_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("updated_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("updated_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_circuit_updated_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="pause",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("queue_name__isnull", True), ("task_name__isnull", True), _connector="XOR"
                ),
                name="jobretry_pause_one_target",
            ),
        ),
        migrations.AddConstraint(
            model_name="pause",
            constraint=models.UniqueConstraint(
                condition=models.Q(("queue_name__isnull", False)),
                fields=("queue_name",),
                name="jobretry_pause_queue",
            ),
        ),
        migrations.AddConstraint(
            model_name="pause",
            constraint=models.UniqueConstraint(
                condition=models.Q(("task_name__isnull", False)),
                fields=("task_name",),
                name="jobretry_pause_task",
            ),
        ),
        migrations.AddConstraint(
            model_name="pause",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("paused_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("paused_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_pause_paused_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="pause",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("until__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("until__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_pause_until_holdable",
            ),
        ),
    ]
