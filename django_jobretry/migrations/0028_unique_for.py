"""Deduplication windows: ``unique_for`` on jobs and dead letters (services/unique_enqueue.py).

The new columns are NULL for every existing row, so adding them rewrites
nothing; the constraint is added NOT VALID, and 0029 validates it and
builds the window index without blocking enqueues and claims.
"""

import datetime

from django.contrib.postgres.operations import AddConstraintNotValid
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0027_lane_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="deadletter",
            name="unique_for",
            field=models.DurationField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="unique_for",
            field=models.DurationField(blank=True, null=True),
        ),
        AddConstraintNotValid(
            model_name="job",
            constraint=models.CheckConstraint(
                condition=models.Q(("unique_for__isnull", True))
                | models.Q(("unique_for__gt", datetime.timedelta(0)), ("unique_key__isnull", False)),
                name="jobretry_job_unique_for_has_key",
            ),
        ),
    ]
