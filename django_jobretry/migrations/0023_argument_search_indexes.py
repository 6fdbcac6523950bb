"""The GIN indexes of search by arguments (admin/argument_search.py), built without blocking writes.

Dead letters: every row's ``args`` and ``kwargs``. Jobs: retrying ones only
(status ready, attempts > 0), so enqueue, the claim and a success write
nothing to them. CONCURRENTLY lets burials, enqueues and claims go on while
they are built, at the price of running outside a transaction.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

import django_jobretry.models.fields

RETRYING = models.Q(("attempts__gt", 0), ("status", "ready"))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_jobretry", "0022_failure_fingerprints"),
    ]

    operations = [
        *(
            AddIndexConcurrently(
                model_name="deadletter",
                index=django_jobretry.models.fields.GinPathIndex(
                    condition=None, field=field, name=f"jobretry_dead_{field}"
                ),
            )
            for field in ("args", "kwargs")
        ),
        *(
            AddIndexConcurrently(
                model_name="job",
                index=django_jobretry.models.fields.GinPathIndex(
                    condition=RETRYING, field=field, name=f"jobretry_job_retrying_{field}"
                ),
            )
            for field in ("args", "kwargs")
        ),
    ]
