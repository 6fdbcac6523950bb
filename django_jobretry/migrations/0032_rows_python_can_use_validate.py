"""Validate 0031's checks, blocking no reads or writes (SHARE UPDATE EXCLUSIVE; docs/install.md#upgrading-big-tables)."""

from django.contrib.postgres.operations import ValidateConstraint
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0031_rows_python_can_use"),
    ]

    operations = [
        ValidateConstraint(model_name="circuit", name="jobretry_circuit_release_rate"),
        ValidateConstraint(model_name="circuit", name="jobretry_circuit_cooldowns"),
        ValidateConstraint(model_name="ratebucket", name="jobretry_bucket_tokens_finite"),
        ValidateConstraint(model_name="ratebucket", name="jobretry_bucket_refilled_at_holdable"),
    ]
