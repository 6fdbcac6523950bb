"""The limited claim's lane index, built without blocking enqueues and claims (see 0023)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0026_limits"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                models.F("limit_lane"),
                models.OrderBy(models.F("priority"), descending=True),
                models.F("run_at"),
                models.F("id"),
                condition=models.Q(("limit_lane__isnull", False), ("status", "ready")),
                name="jobretry_job_lane",
            ),
        ),
    ]
