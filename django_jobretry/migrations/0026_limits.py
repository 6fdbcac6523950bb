"""Concurrency and rate limits: each job's lane, the token buckets and the limited claim's pick.

``limit_lane`` on jobs and dead letters (NULL: not limited; adding a NULL
column rewrites nothing). ``jobretry_bucket_tokens()`` is the token
bucket's refill, written once. ``jobretry_pick_limited()`` chooses the jobs
the limited claim takes (services/limit_sql.py says how): lanes in turn,
every limit checked under a transaction-level advisory lock taken with
"try" (a lock another claim holds skips its jobs this round, never waits),
running jobs counted after the lock, job rows locked SKIP LOCKED. It
returns the chosen ids, then, when a rate held a job back, one row with no
id and the seconds until the next token.

The lane index is built CONCURRENTLY in 0027.
"""

from django.db import migrations, models

BUCKET_TOKENS = """
    CREATE OR REPLACE FUNCTION jobretry_bucket_tokens(
        tokens float8, refilled_at timestamptz, now timestamptz, per_second float8, burst float8
    ) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT LEAST(burst, GREATEST(tokens, 0)
                     + per_second * GREATEST(extract(epoch FROM now - refilled_at)::float8, 0))
    $$
"""

PICK_LIMITED = """
    CREATE OR REPLACE FUNCTION jobretry_pick_limited(want integer, queues text[], limits jsonb)
    RETURNS TABLE(id bigint, wait float8) LANGUAGE plpgsql VOLATILE AS $$
    #variable_conflict use_column
    DECLARE
        now_ts timestamptz := statement_timestamp();
        c_ids bigint[]; c_tasks text[]; c_queues text[]; c_lanes text[];
        wanted text[] := '{}';
        locked text[];
        specs jsonb;
        running jsonb;
        avail jsonb;
        used jsonb := '{}';
        spent jsonb := '{}';
        taken integer := 0;
        soonest float8;
        i integer; k integer;
        t jsonb; q jsonb;
        slots text[]; caps integer[]; buckets text[];
        ok boolean;
        left_ float8;
    BEGIN
        IF want <= 0 THEN
            RETURN;
        END IF;
        -- The candidates: each lane's first due jobs; every lane's first turn before any second turn.
        WITH RECURSIVE lanes(lane) AS (
            (SELECT j.limit_lane FROM django_jobretry_job AS j
             WHERE j.status = 'ready' AND j.limit_lane IS NOT NULL ORDER BY j.limit_lane LIMIT 1)
            UNION ALL
            SELECT (SELECT j.limit_lane FROM django_jobretry_job AS j
                    WHERE j.status = 'ready' AND j.limit_lane > l.lane ORDER BY j.limit_lane LIMIT 1)
            FROM lanes AS l WHERE l.lane IS NOT NULL
        ), candidates AS (
            SELECT c.* FROM lanes AS l CROSS JOIN LATERAL (
                SELECT j.id, j.task_name, j.queue_name, j.limit_lane, j.priority, j.run_at,
                       row_number() OVER (ORDER BY j.priority DESC, j.run_at, j.id) AS turn
                FROM django_jobretry_job AS j
                WHERE j.status = 'ready' AND j.limit_lane = l.lane AND j.run_at <= now_ts
                  AND j.attempts < j.max_attempts AND (queues IS NULL OR j.queue_name = ANY(queues))
                  AND NOT jobretry_held(j.queue_name, j.task_name, j.id, j.attempts)
                ORDER BY j.priority DESC, j.run_at, j.id
                LIMIT want
            ) AS c
            WHERE l.lane IS NOT NULL
            ORDER BY c.turn, c.priority DESC, c.run_at, c.id
            LIMIT 5000
        )
        SELECT array_agg(c.id ORDER BY c.turn, c.priority DESC, c.run_at, c.id),
               array_agg(c.task_name ORDER BY c.turn, c.priority DESC, c.run_at, c.id),
               array_agg(c.queue_name ORDER BY c.turn, c.priority DESC, c.run_at, c.id),
               array_agg(c.limit_lane ORDER BY c.turn, c.priority DESC, c.run_at, c.id)
        INTO c_ids, c_tasks, c_queues, c_lanes
        FROM candidates AS c;
        IF c_ids IS NULL THEN
            RETURN;
        END IF;

        -- Every slot group and bucket the candidates need, locked with "try": one taken is skipped.
        FOR i IN 1 .. array_length(c_ids, 1) LOOP
            t := limits -> 'tasks' -> c_tasks[i];
            q := limits -> 'queues' -> c_queues[i];
            IF q ->> 'c' IS NOT NULL OR q ->> 'r' IS NOT NULL THEN
                wanted := wanted || ('queue:' || c_queues[i]);
            END IF;
            IF (t ->> 'c' IS NOT NULL AND NOT (t ->> 'k')::boolean) OR t ->> 'r' IS NOT NULL THEN
                wanted := wanted || ('task:' || c_tasks[i]);
            END IF;
            IF t ->> 'c' IS NOT NULL AND (t ->> 'k')::boolean THEN
                wanted := wanted || c_lanes[i];
            END IF;
        END LOOP;
        SELECT coalesce(array_agg(w.g), '{}') INTO locked
        FROM (SELECT DISTINCT g FROM unnest(wanted) AS g ORDER BY g) AS w
        WHERE pg_try_advisory_xact_lock(hashtextextended('django_jobretry limit ' || w.g, 0));

        -- Counted after the locks: every claim that held one before has committed.
        SELECT coalesce(jsonb_object_agg(s.g, s.n), '{}') INTO running
        FROM (
            SELECT v.g, count(*) AS n
            FROM django_jobretry_job AS j
            CROSS JOIN LATERAL (VALUES ('queue:' || j.queue_name), ('task:' || j.task_name), (j.limit_lane)) AS v(g)
            WHERE j.status = 'running' AND v.g = ANY(locked)
            GROUP BY v.g
        ) AS s;

        -- The buckets of the locked rate limits, created full, refilled to now.
        SELECT coalesce(jsonb_object_agg(r.name, r.spec), '{}') INTO specs
        FROM (
            SELECT 'task:' || key AS name, value AS spec FROM jsonb_each(limits -> 'tasks')
            WHERE value ->> 'r' IS NOT NULL
            UNION ALL
            SELECT 'queue:' || key, value FROM jsonb_each(limits -> 'queues') WHERE value ->> 'r' IS NOT NULL
        ) AS r
        WHERE r.name = ANY(locked);
        INSERT INTO django_jobretry_ratebucket AS b (name, tokens, refilled_at)
        SELECT key, (value ->> 'b')::float8, now_ts FROM jsonb_each(specs)
        ON CONFLICT (name) DO NOTHING;
        SELECT coalesce(jsonb_object_agg(b.name, jobretry_bucket_tokens(
                   b.tokens, b.refilled_at, now_ts, (specs -> b.name ->> 'r')::float8,
                   (specs -> b.name ->> 'b')::float8)), '{}')
        INTO avail
        FROM django_jobretry_ratebucket AS b WHERE specs ? b.name;

        FOR i IN 1 .. array_length(c_ids, 1) LOOP
            EXIT WHEN taken >= want;
            t := limits -> 'tasks' -> c_tasks[i];
            q := limits -> 'queues' -> c_queues[i];
            slots := '{}'; caps := '{}'; buckets := '{}';
            IF q ->> 'c' IS NOT NULL THEN
                slots := slots || ('queue:' || c_queues[i]); caps := caps || (q ->> 'c')::integer;
            END IF;
            IF t ->> 'c' IS NOT NULL THEN
                slots := slots || CASE WHEN (t ->> 'k')::boolean THEN c_lanes[i] ELSE 'task:' || c_tasks[i] END;
                caps := caps || (t ->> 'c')::integer;
            END IF;
            IF q ->> 'r' IS NOT NULL THEN
                buckets := buckets || ('queue:' || c_queues[i]);
            END IF;
            IF t ->> 'r' IS NOT NULL THEN
                buckets := buckets || ('task:' || c_tasks[i]);
            END IF;
            ok := true;
            FOR k IN 1 .. coalesce(array_length(slots, 1), 0) LOOP
                IF NOT slots[k] = ANY(locked) OR coalesce((running ->> slots[k])::integer, 0)
                        + coalesce((used ->> slots[k])::integer, 0) >= caps[k] THEN
                    ok := false;
                END IF;
            END LOOP;
            FOR k IN 1 .. coalesce(array_length(buckets, 1), 0) LOOP
                IF NOT avail ? buckets[k] THEN
                    ok := false;
                ELSE
                    left_ := (avail ->> buckets[k])::float8 - coalesce((spent ->> buckets[k])::float8, 0);
                    IF left_ < 1 THEN
                        ok := false;
                        soonest := LEAST(coalesce(soonest, 'infinity'::float8),
                                         (1 - left_) / (specs -> buckets[k] ->> 'r')::float8);
                    END IF;
                END IF;
            END LOOP;
            CONTINUE WHEN NOT ok;
            PERFORM 1 FROM django_jobretry_job AS j
            WHERE j.id = c_ids[i] AND j.status = 'ready' FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
            FOR k IN 1 .. coalesce(array_length(slots, 1), 0) LOOP
                used := used || jsonb_build_object(slots[k], coalesce((used ->> slots[k])::integer, 0) + 1);
            END LOOP;
            FOR k IN 1 .. coalesce(array_length(buckets, 1), 0) LOOP
                spent := spent || jsonb_build_object(buckets[k], coalesce((spent ->> buckets[k])::float8, 0) + 1);
            END LOOP;
            taken := taken + 1;
            id := c_ids[i];
            wait := NULL;
            RETURN NEXT;
        END LOOP;

        UPDATE django_jobretry_ratebucket AS b
        SET tokens = GREATEST((avail ->> b.name)::float8 - coalesce((spent ->> b.name)::float8, 0), 0),
            refilled_at = now_ts
        WHERE avail ? b.name;
        IF soonest IS NOT NULL THEN
            id := NULL;
            wait := soonest;
            RETURN NEXT;
        END IF;
    END
    $$
"""


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0025_probe_runs_once"),
    ]

    operations = [
        migrations.CreateModel(
            name="RateBucket",
            fields=[
                ("name", models.CharField(max_length=210, primary_key=True, serialize=False)),
                ("tokens", models.FloatField()),
                ("refilled_at", models.DateTimeField()),
            ],
            options={"verbose_name": "rate bucket"},
        ),
        migrations.AddConstraint(
            model_name="ratebucket",
            constraint=models.CheckConstraint(
                condition=models.Q(("tokens__gte", 0)), name="jobretry_bucket_tokens_pos"
            ),
        ),
        migrations.AddField(
            model_name="deadletter",
            name="limit_lane",
            field=models.CharField(blank=True, max_length=210, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="limit_lane",
            field=models.CharField(blank=True, max_length=210, null=True),
        ),
        migrations.RunSQL(
            BUCKET_TOKENS,
            "DROP FUNCTION IF EXISTS jobretry_bucket_tokens(float8, timestamptz, timestamptz, float8, float8)",
        ),
        migrations.RunSQL(
            PICK_LIMITED, "DROP FUNCTION IF EXISTS jobretry_pick_limited(integer, text[], jsonb)"
        ),
    ]
