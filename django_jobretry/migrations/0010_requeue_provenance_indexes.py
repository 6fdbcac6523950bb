"""GIN indexes on requeue_history: which row a requeued dead letter or a dead job became.

A row's id changes each time it moves between the tables; the admin follows
a link to an old id to the row that carries it in its requeue history
(admin/fate.py), with ``requeue_history @> '[{"dead_letter_id": 12}]'``.
Partial on requeue_count > 0, so rows never requeued cost nothing; built
CONCURRENTLY, so enqueues and claims go on meanwhile (outside a transaction).
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

import django_jobretry.models.fields


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0009_job_retrying_index"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=django_jobretry.models.fields.GinPathIndex(
                condition=models.Q(("requeue_count__gt", 0)),
                field="requeue_history",
                name="jobretry_job_provenance",
            ),
        ),
        AddIndexConcurrently(
            model_name="deadletter",
            index=django_jobretry.models.fields.GinPathIndex(
                condition=models.Q(("requeue_count__gt", 0)),
                field="requeue_history",
                name="jobretry_dead_provenance",
            ),
        ),
    ]
