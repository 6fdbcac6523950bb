"""Validate 0016's constraints on the rows already there: a scan of each table, reads and writes go on.

VALIDATE CONSTRAINT takes a SHARE UPDATE EXCLUSIVE lock: jobs are enqueued,
claimed and buried while it reads. On a big table, run it at a quiet hour
(``manage.py migrate django_jobretry 0017``). If a row written by hand
breaks one, it fails naming the constraint, and nothing is changed: how to
find and mend such rows is in docs/install.md#upgrading-big-tables.
"""

from django.contrib.postgres.operations import ValidateConstraint
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0016_readable_rows_not_valid"),
    ]

    operations = [
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_enqueued_at_holdable"),
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_first_attempt_at_holdable"),
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_dead_at_holdable"),
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_args_array"),
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_kwargs_object"),
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_errors_array"),
        ValidateConstraint(model_name="deadletter", name="jobretry_dead_requeue_history_array"),
        ValidateConstraint(model_name="job", name="jobretry_job_run_at_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_lease_expires_at_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_enqueued_at_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_first_attempt_at_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_started_at_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_finished_at_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_cancel_requested_at_holdable"),
        ValidateConstraint(model_name="job", name="jobretry_job_args_array"),
        ValidateConstraint(model_name="job", name="jobretry_job_kwargs_object"),
        ValidateConstraint(model_name="job", name="jobretry_job_errors_array"),
        ValidateConstraint(model_name="job", name="jobretry_job_requeue_history_array"),
        ValidateConstraint(model_name="workerprocess", name="jobretry_worker_started_at_holdable"),
        ValidateConstraint(model_name="workerprocess", name="jobretry_worker_last_heartbeat_at_holdable"),
        ValidateConstraint(model_name="workerprocess", name="jobretry_worker_lease_range"),
        ValidateConstraint(model_name="workerprocess", name="jobretry_worker_queues_names"),
    ]
