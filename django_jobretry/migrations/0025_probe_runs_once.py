"""A half-open breaker lets its probe through for the one attempt it was chosen for, not its retries.

``jobretry_held(queue, task, job, attempts)``: as 0020's, but the probe is
let through only while its attempts are still ``probe_attempts`` (those it
had when it was chosen). A probe that failed and is due to retry waits,
held, until a worker's heartbeat sees the failure and reopens the breaker:
before, a heartbeat late under load let the probe run, and fail, again and
again, spending its attempts while the partner was down.

The three-argument function of 0020 stays for workers of the previous
release during a rolling deploy.
"""

from django.db import migrations

HELD_ONCE = """
    CREATE OR REPLACE FUNCTION jobretry_held(queue text, task text, job bigint, attempts integer)
    RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
    BEGIN
        RETURN EXISTS (
                SELECT 1 FROM django_jobretry_pause AS p
                WHERE (p.queue_name = queue OR p.task_name = task)
                  AND (p.until IS NULL OR p.until > statement_timestamp()))
            OR EXISTS (
                SELECT 1 FROM django_jobretry_circuit AS c
                WHERE c.task_name = task AND c.state <> 'closed'
                  AND (c.probe_job_id IS DISTINCT FROM job OR c.probe_attempts IS DISTINCT FROM attempts));
    END
    $$
"""


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0024_repair_permission"),
    ]

    operations = [
        migrations.RunSQL(HELD_ONCE, "DROP FUNCTION IF EXISTS jobretry_held(text, text, bigint, integer)"),
    ]
