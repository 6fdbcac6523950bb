"""Validate 0020's constraints on the big tables; VALIDATE CONSTRAINT blocks no reads or writes."""

from django.contrib.postgres.operations import ValidateConstraint
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0020_holds"),
    ]

    operations = [
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_reason_valid"),
        ValidateConstraint(model_name="death", name="jobretry_death_reason_valid"),
        ValidateConstraint(model_name="job", name="jobretry_job_held_seconds_pos"),
    ]
