"""Failure fingerprints: the SQL functions, DeadLetter.fingerprint, its trigger and index (models/fingerprints.py).

Filling the column for the dead letters already kept rewrites the table,
in the migration's transaction: burials wait for it; on a large table, run
it in a quiet moment (CHANGELOG). The functions' text is frozen here, as
this migration created them.
"""

from django.db import migrations, models

import django_jobretry.models.fingerprints

FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION jobretry_error_pattern(message text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
        left(message, 1000),
        '''[^'']*''|"[^"]*"', '?', 'g'),
        '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '?', 'g'),
        '\m0[xX][0-9a-fA-F]+\M', '?', 'g'),
        '\m(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\M', '?', 'g'),
        '[0-9]+([.,][0-9]+)*', '?', 'g')
$$;

CREATE OR REPLACE FUNCTION jobretry_fingerprint(errors jsonb, task text, error_class text, message text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT left(md5(CASE
        WHEN jsonb_typeof(errors -> -1) = 'object' AND coalesce(errors -> -1 ->> 'fingerprint', '') <> ''
            THEN 'own' || chr(31) || (errors -> -1 ->> 'fingerprint')
        WHEN jsonb_typeof(errors -> -1) = 'object'
             AND coalesce(errors -> -1 ->> 'ended', 'error') NOT IN ('error', 'fatal', 'unknown_task')
            THEN coalesce(task, '') || chr(31) || 'ended ' || (errors -> -1 ->> 'ended')
        ELSE coalesce(task, '') || chr(31) || coalesce(error_class, '') || chr(31)
             || coalesce(jobretry_error_pattern(message), '')
    END), 16)
$$;

CREATE OR REPLACE FUNCTION jobretry_fingerprint(errors jsonb, task text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jobretry_fingerprint(errors, task, errors -> -1 ->> 'error_class', errors -> -1 ->> 'message')
$$;
"""

TRIGGER = r"""
CREATE OR REPLACE FUNCTION jobretry_dead_fingerprint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fingerprint := jobretry_fingerprint(NEW.errors, NEW.task_name, NEW.last_error_class, NEW.last_error);
    RETURN NEW;
END
$$;

CREATE TRIGGER jobretry_dead_fingerprint
BEFORE INSERT OR UPDATE OF errors, task_name, last_error_class, last_error ON django_jobretry_deadletter
FOR EACH ROW EXECUTE FUNCTION jobretry_dead_fingerprint();

UPDATE django_jobretry_deadletter
SET fingerprint = jobretry_fingerprint(errors, task_name, last_error_class, last_error);
"""

DROP_TRIGGER = """
DROP TRIGGER IF EXISTS jobretry_dead_fingerprint ON django_jobretry_deadletter;
DROP FUNCTION IF EXISTS jobretry_dead_fingerprint();
"""

DROP = """
DROP FUNCTION IF EXISTS jobretry_fingerprint(jsonb, text);
DROP FUNCTION IF EXISTS jobretry_fingerprint(jsonb, text, text, text);
DROP FUNCTION IF EXISTS jobretry_error_pattern(text);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0021_holds_validate"),
    ]

    operations = [
        migrations.RunSQL(FUNCTIONS, DROP),
        migrations.AddField(
            model_name="deadletter",
            name="fingerprint",
            field=django_jobretry.models.fingerprints.FingerprintField(),
        ),
        # The trigger, then every existing row's fingerprint: this UPDATE rewrites the table.
        migrations.RunSQL(TRIGGER, DROP_TRIGGER),
        migrations.AddIndex(
            model_name="deadletter",
            index=models.Index(
                fields=["fingerprint", "task_name", "reason", "dead_at"], name="jobretry_dead_fingerprint"
            ),
        ),
    ]
