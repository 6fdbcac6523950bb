import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0007_imported_failure"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerProcess",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "worker_id",
                    models.CharField(
                        help_text="host:pid:random, the same text as a job's lease owner.",
                        max_length=200,
                        unique=True,
                    ),
                ),
                ("host", models.CharField(max_length=255)),
                ("pid", models.PositiveIntegerField()),
                (
                    "queues",
                    models.JSONField(blank=True, default=list, help_text="Queue names; empty: every queue."),
                ),
                ("concurrency", models.PositiveIntegerField()),
                ("pool", models.CharField(max_length=16)),
                (
                    "version",
                    models.CharField(help_text="django-jobretry version the worker runs.", max_length=64),
                ),
                ("lease", models.DurationField(help_text="Lost when no heartbeat came for this long.")),
                ("started_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                (
                    "last_heartbeat_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                (
                    "running_jobs",
                    models.PositiveIntegerField(default=0, help_text="Jobs running at the last heartbeat."),
                ),
            ],
            options={
                "verbose_name": "worker",
            },
        ),
    ]
