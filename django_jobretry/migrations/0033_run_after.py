"""The start time an enqueue gave (``run_after``) on jobs and dead letters (contrib/django_tasks/results.py).

The new columns are NULL for every existing row, so adding them rewrites
nothing. Not atomic, like 0029: the constraints are added NOT VALID, then
validated under a lock that blocks no reads or writes. Existing rows keep
NULL: their django.tasks results report ``run_after=None``, as before.
"""

import datetime

from django.contrib.postgres.operations import AddConstraintNotValid, ValidateConstraint
from django.db import migrations, models

HOLDABLE = models.Q(
    ("run_after__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
    ("run_after__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0032_rows_python_can_use_validate"),
    ]

    operations = [
        migrations.AddField(
            model_name="deadletter",
            name="run_after",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="run_after",
            field=models.DateTimeField(blank=True, null=True),
        ),
        AddConstraintNotValid(
            model_name="deadletter",
            constraint=models.CheckConstraint(condition=HOLDABLE, name="jobretry_dead_run_after_holdable"),
        ),
        AddConstraintNotValid(
            model_name="job",
            constraint=models.CheckConstraint(condition=HOLDABLE, name="jobretry_job_run_after_holdable"),
        ),
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_run_after_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_run_after_holdable"),
    ]
