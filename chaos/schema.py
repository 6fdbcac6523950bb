"""The harness's own tables, and triggers that audit every job and dead-letter transition.

Why triggers: the product deletes rows (a job that dies leaves the jobs
table, the pruner deletes succeeded jobs, a requeue deletes its dead letter).
The invariants need the whole story after the run, so each committed change
of status is copied into ``chaos_audit`` by the database itself, in the same
transaction as the change: a rolled-back transition leaves no audit row, and
no transition can escape it. The tables are created in a scratch database
the harness owns; the product's tables are untouched apart from the triggers.

Each audit row also says who wrote it (``writer``: the session's
``application_name``, ``chaos-<pid>`` in every chaos process), so a claim and
the transition that ends the attempt can be attributed to worker processes
without trusting the product's own fence (chaos/stale.py).
"""

from __future__ import annotations

from django.db import connection

from django_jobretry.models import DeadLetter, Job

JOB_TABLE = "django_jobretry_job"
DEAD_TABLE = "django_jobretry_deadletter"

DDL = """
CREATE TABLE chaos_attempt (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    attempt int NOT NULL,
    pid int NOT NULL,
    poison boolean NOT NULL DEFAULT false,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at timestamptz,          -- the handler returned or raised; NULL: killed, or not recorded
    flow_step_id bigint,           -- the run's flow step (its job context says); NULL outside flows
    step text                      -- a flow step's own label, from its arguments: "<flow key>:<step>"
);
CREATE INDEX chaos_attempt_job ON chaos_attempt (job_id, attempt);

CREATE TABLE chaos_audit (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Evaluated in the writing session (the trigger runs there): chaos-<pid> of the process.
    writer text NOT NULL DEFAULT current_setting('application_name'),
    source text NOT NULL,          -- 'job' or 'dead'
    op text NOT NULL,              -- 'insert', 'update', 'delete'
    row_id bigint NOT NULL,        -- the job's or the dead letter's id
    job_id bigint,
    unique_key text,
    policy_name text,
    old_status text,               -- jobs: status before; dead letters: NULL
    new_status text,               -- jobs: status after; dead letters: the reason
    attempts int,
    old_attempts int,              -- jobs' updates: attempts before the change
    max_attempts int,
    requeue_count int,
    requeue_history jsonb,
    errors jsonb,
    entry jsonb,                   -- updates and dead letters: the last history entry after the change
    flow_step_id bigint            -- the row's flow step, stable across requeues; NULL outside flows
);
CREATE INDEX chaos_audit_step ON chaos_audit (flow_step_id) WHERE flow_step_id IS NOT NULL;
CREATE INDEX chaos_audit_job ON chaos_audit (job_id);
CREATE INDEX chaos_audit_key ON chaos_audit (unique_key);

-- Every job the harness enqueued or inserted, by its unique key.
CREATE TABLE chaos_enqueued (
    key text PRIMARY KEY,
    kind text NOT NULL,
    job_id bigint NOT NULL
);

-- Every flow the harness enqueued (chaos/flows.py), by its name, unique in a run.
CREATE TABLE chaos_flow_enqueued (
    key text PRIMARY KEY,
    flow_id bigint NOT NULL
);

-- What the operator sidecars meant to do, written before they do it.
CREATE TABLE chaos_intent (
    dead_letter_id bigint NOT NULL,
    action text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Each cancel of the "cancel during a pause" fault, at the time it held the job's row.
CREATE TABLE chaos_cancel (
    job_id bigint NOT NULL,
    requested_at timestamptz NOT NULL
);

-- The fault log, copied from the harness after the run.
CREATE TABLE chaos_fault (
    id serial PRIMARY KEY,
    kind text NOT NULL,
    target_pid int,                -- NULL: every worker was hit
    started_at timestamptz NOT NULL,
    ended_at timestamptz NOT NULL
);

CREATE FUNCTION chaos_audit_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO chaos_audit (source, op, row_id, job_id, unique_key, policy_name, old_status,
                                 attempts, max_attempts, requeue_count, errors, flow_step_id)
        VALUES ('job', 'delete', OLD.id, OLD.id, OLD.unique_key, OLD.policy_name, OLD.status,
                OLD.attempts, OLD.max_attempts, OLD.requeue_count, OLD.errors, OLD.flow_step_id);
        RETURN OLD;
    END IF;
    INSERT INTO chaos_audit (source, op, row_id, job_id, unique_key, policy_name, old_status, new_status,
                             attempts, old_attempts, max_attempts, requeue_count, requeue_history, entry,
                             flow_step_id)
    VALUES ('job', lower(TG_OP), NEW.id, NEW.id, NEW.unique_key, NEW.policy_name,
            CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status, NEW.attempts,
            CASE WHEN TG_OP = 'UPDATE' THEN OLD.attempts END, NEW.max_attempts,
            NEW.requeue_count, CASE WHEN TG_OP = 'INSERT' THEN NEW.requeue_history END,
            CASE WHEN TG_OP = 'UPDATE' AND jsonb_typeof(NEW.errors) = 'array' THEN NEW.errors -> -1 END,
            NEW.flow_step_id);
    RETURN NEW;
END $$;

CREATE FUNCTION chaos_audit_dead() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO chaos_audit (source, op, row_id, job_id, unique_key, policy_name, new_status, attempts,
                                 max_attempts, requeue_count, flow_step_id)
        VALUES ('dead', 'delete', OLD.id, OLD.job_id, OLD.unique_key, OLD.policy_name, OLD.reason,
                OLD.attempts, OLD.max_attempts, OLD.requeue_count, OLD.flow_step_id);
        RETURN OLD;
    END IF;
    INSERT INTO chaos_audit (source, op, row_id, job_id, unique_key, policy_name, new_status, attempts,
                             max_attempts, requeue_count, requeue_history, errors, entry, flow_step_id)
    VALUES ('dead', 'insert', NEW.id, NEW.job_id, NEW.unique_key, NEW.policy_name, NEW.reason, NEW.attempts,
            NEW.max_attempts, NEW.requeue_count, NEW.requeue_history, NEW.errors,
            CASE WHEN jsonb_typeof(NEW.errors) = 'array' THEN NEW.errors -> -1 END, NEW.flow_step_id);
    RETURN NEW;
END $$;

CREATE TRIGGER chaos_audit_job_rows AFTER INSERT OR DELETE ON django_jobretry_job
    FOR EACH ROW EXECUTE FUNCTION chaos_audit_job();
-- Heartbeats only move lease_expires_at: not audited.
CREATE TRIGGER chaos_audit_job_changes AFTER UPDATE ON django_jobretry_job
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.attempts IS DISTINCT FROM NEW.attempts)
    EXECUTE FUNCTION chaos_audit_job();
CREATE TRIGGER chaos_audit_dead_rows AFTER INSERT OR DELETE ON django_jobretry_deadletter
    FOR EACH ROW EXECUTE FUNCTION chaos_audit_dead();

-- The final attempt history of every job id, wherever it ended up: its dead
-- letter (complete, with the last entry), its row, or the row the pruner deleted.
CREATE VIEW chaos_history AS
    SELECT job_id, policy_name, errors FROM chaos_audit WHERE source = 'dead' AND op = 'insert'
    UNION ALL
    SELECT id, policy_name, errors FROM django_jobretry_job
    UNION ALL
    SELECT job_id, policy_name, errors FROM chaos_audit
    WHERE source = 'job' AND op = 'delete' AND old_status = 'succeeded';

-- One row per history entry: (job, attempt, how it ended, when, the retry delay).
CREATE VIEW chaos_entry AS
    SELECT h.job_id, h.policy_name, (e ->> 'attempt')::int AS attempt, e ->> 'ended' AS ended,
           (e ->> 'at')::timestamptz AS at, (e ->> 'delay')::float8 AS delay
    FROM chaos_history AS h,
         jsonb_array_elements(CASE WHEN jsonb_typeof(h.errors) = 'array' THEN h.errors ELSE '[]' END) AS e;
"""


def install() -> None:
    """Create the harness tables and triggers (on a freshly migrated scratch database)."""
    if (Job._meta.db_table, DeadLetter._meta.db_table) != (JOB_TABLE, DEAD_TABLE):
        raise RuntimeError("the product's table names changed; update chaos/schema.py")
    with connection.cursor() as cursor:
        cursor.execute(DDL)


def uninstall() -> None:
    """Drop what install() made (the triggers go with their functions): for tests sharing a database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "DROP VIEW IF EXISTS chaos_entry, chaos_history; "
            "DROP FUNCTION IF EXISTS chaos_audit_job, chaos_audit_dead CASCADE; "
            "DROP TABLE IF EXISTS chaos_attempt, chaos_audit, chaos_enqueued, chaos_flow_enqueued, "
            "chaos_intent, chaos_cancel, chaos_fault"
        )
