"""Validate 0028's constraint and build the window index, blocking no reads or writes (see 0023)."""

from django.contrib.postgres.operations import AddIndexConcurrently, ValidateConstraint
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0028_unique_for"),
    ]

    operations = [
        ValidateConstraint(model_name="job", name="jobretry_job_unique_for_has_key"),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["unique_key", "finished_at"],
                condition=models.Q(("status", "succeeded"), ("unique_key__isnull", False)),
                name="jobretry_job_unique_window",
            ),
        ),
    ]
