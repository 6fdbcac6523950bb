"""What a long outage needs on each job: the time it snoozed in all, and how often it was the probe.

- ``snoozed_seconds``: the delays of its counted snoozes added up, against
  its policy's ``snooze_for`` (a time budget beside the count ``max_snoozes``).
- ``probes``: times its task's breaker chose it as the probe; the breaker
  chooses the job chosen least often, so the probes of a long outage go
  round the held jobs instead of falling on one.

Both with a database default: adding them rewrites no row (PostgreSQL 11+).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0034_circuit_breaker_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="probes",
            field=models.PositiveIntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name="job",
            name="snoozed_seconds",
            field=models.FloatField(db_default=0),
        ),
    ]
