"""How far a running job got (``progress()``, docs/progress.md) on jobs and dead letters (models/progress.py).

The new columns are NULL for every existing row, so adding them rewrites
nothing. Not atomic, like 0033: the constraints are added NOT VALID, then
validated under a lock that blocks no reads or writes.
"""

import datetime

from django.contrib.postgres.operations import AddConstraintNotValid, ValidateConstraint
from django.db import migrations, models

HOLDABLE = models.Q(
    ("progress_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
    ("progress_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
)
COUNTS = models.Q(
    models.Q(("progress_done__isnull", True), ("progress_total__isnull", True)),
    models.Q(
        ("progress_at__isnull", False),
        ("progress_done__gte", 0),
        ("progress_done__isnull", False),
        models.Q(
            ("progress_total__isnull", True),
            ("progress_done__lte", models.F("progress_total")),
            _connector="OR",
        ),
    ),
    _connector="OR",
)
TABLES = (("job", "jobretry_job"), ("deadletter", "jobretry_dead"))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0036_workflows"),
    ]

    operations = [
        *(
            migrations.AddField(model_name=model, name=name, field=field)
            for model, _ in TABLES
            for name, field in (
                ("progress_done", models.BigIntegerField(blank=True, null=True)),
                ("progress_total", models.BigIntegerField(blank=True, null=True)),
                ("progress_note", models.CharField(blank=True, max_length=200, null=True)),
                ("progress_at", models.DateTimeField(blank=True, null=True)),
            )
        ),
        *(
            AddConstraintNotValid(
                model_name=model,
                constraint=models.CheckConstraint(condition=condition, name=f"{prefix}_{name}"),
            )
            for model, prefix in TABLES
            for name, condition in (("progress_at_holdable", HOLDABLE), ("progress_counts", COUNTS))
        ),
        *(
            ValidateConstraint(model_name=model, name=f"{prefix}_{name}")
            for model, prefix in TABLES
            for name in ("progress_at_holdable", "progress_counts")
        ),
    ]
