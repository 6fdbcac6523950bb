"""The index of jobs waiting for a retry, built without blocking enqueues and claims.

CREATE INDEX would hold a lock that stops every write to the jobs table while
it reads the whole table; CONCURRENTLY lets workers and enqueues go on, at
the price of running outside a transaction.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0008_worker_process"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                condition=models.Q(("attempts__gt", 0), ("status", "ready")),
                fields=["queue_name", "run_at"],
                name="jobretry_job_retrying",
            ),
        ),
    ]
