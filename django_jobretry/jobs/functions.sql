-- django_jobretry's functions and trigger, as the database holds them after every migration.
--
-- The migrations created them (RunSQL) and are frozen history: each holds the text of its own
-- time, and a later one may replace it (0031 replaced 0026's jobretry_bucket_tokens). This file is
-- the current text in one place, to read. Nothing runs it: `manage.py migrate` creates them.
--
-- Each statement is as PostgreSQL prints it back (pg_get_functiondef(), psql's `\sf name`;
-- pg_get_triggerdef()), without the schema, reindented. tests/integration/jobs/test_sql_functions.py
-- checks on a migrated database that every function named jobretry_% and every trigger on the
-- package's tables equals its statement here (whitespace collapsed), and that neither side has
-- one the other lacks.
--
-- To change one: a new migration with CREATE OR REPLACE FUNCTION, and the same edit here
-- (docs/contributing.md, "Changing a SQL function").


-- ==== the claim's gates ==========================================================================

-- jobretry_held(queue, task, job, attempts): the claim's hold filter. True while a pause is in
-- force on the job's queue or task, or its task's breaker is not closed and the job is not the
-- breaker's probe at the attempt it was chosen for (a failed probe waits for a heartbeat to
-- reopen the breaker). PL/pgSQL, so its queries are planned once per session, not in each claim.
-- Last defined by: 0025_probe_runs_once.
-- Called by: jobs/statements.py not_held(), in the ordinary claim (pick_sql()) and in
-- testing.run_jobs(include_scheduled=True)'s bring-forward (waiting()); and by
-- jobretry_pick_limited() below.
CREATE OR REPLACE FUNCTION jobretry_held(queue text, task text, job bigint, attempts integer)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE PARALLEL SAFE
AS $function$
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
$function$;

-- jobretry_held(queue, task, job): the same filter before 0025, letting a probe through at every
-- attempt. Called by nothing in this release: kept for workers of the previous release during a
-- rolling deploy.
-- Last defined by: 0020_holds.
CREATE OR REPLACE FUNCTION jobretry_held(queue text, task text, job bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE PARALLEL SAFE
AS $function$
BEGIN
    RETURN EXISTS (
            SELECT 1 FROM django_jobretry_pause AS p
            WHERE (p.queue_name = queue OR p.task_name = task)
              AND (p.until IS NULL OR p.until > statement_timestamp()))
        OR EXISTS (
            SELECT 1 FROM django_jobretry_circuit AS c
            WHERE c.task_name = task AND c.state <> 'closed' AND c.probe_job_id IS DISTINCT FROM job);
END
$function$;

-- jobretry_bucket_tokens(...): a rate limit's bucket refilled to `now`, at most `burst` tokens;
-- a refill time it cannot subtract from (infinite) counts as long ago: the bucket is full.
-- Last defined by: 0031_rows_python_can_use (0026_limits created it).
-- Called by: jobretry_pick_limited() below.
CREATE OR REPLACE FUNCTION jobretry_bucket_tokens(
    tokens double precision, refilled_at timestamp with time zone, now timestamp with time zone,
    per_second double precision, burst double precision
)
 RETURNS double precision
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN isfinite(refilled_at) THEN
               LEAST(burst, GREATEST(tokens, 0)
                            + per_second * GREATEST(extract(epoch FROM now - refilled_at)::float8, 0))
           ELSE burst END
$function$;

-- jobretry_pick_limited(want, queues, limits): the limited claim's choice. Up to `want` due jobs
-- with a lane, lanes in turn, each while its concurrency slots and rate buckets have room (the
-- groups locked with pg_try_advisory_xact_lock, never waited for); rows (id, NULL) for the jobs,
-- locked FOR UPDATE SKIP LOCKED, then (NULL, seconds) until a rate lets the next one start.
-- `limits` is limits/declare.py's JSON: {"tasks"|"queues": {name: {"c", "k", "r", "b"}}}. VOLATILE
-- (the default, not printed): it writes the buckets (django_jobretry_ratebucket).
-- Last defined by: 0026_limits.
-- Called by: jobs/statements.py LIMITED_CLAIM, run by jobs/claim.py claim_limited().
CREATE OR REPLACE FUNCTION jobretry_pick_limited(want integer, queues text[], limits jsonb)
 RETURNS TABLE(id bigint, wait double precision)
 LANGUAGE plpgsql
AS $function$
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
$function$;


-- ==== failure fingerprints ======================================================================

-- jobretry_error_pattern(message): an error message as its fingerprint sees it, of its first
-- 1,000 characters: each quoted string, UUID, hex run and number replaced by `?`.
-- Last defined by: 0022_failure_fingerprints.
-- Called by: jobretry_fingerprint() below; models/fingerprints.py ErrorPattern.
CREATE OR REPLACE FUNCTION jobretry_error_pattern(message text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$
    SELECT regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
        left(message, 1000),
        '''[^'']*''|"[^"]*"', '?', 'g'),
        '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '?', 'g'),
        '\m0[xX][0-9a-fA-F]+\M', '?', 'g'),
        '\m(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\M', '?', 'g'),
        '[0-9]+([.,][0-9]+)*', '?', 'g')
$function$;

-- jobretry_fingerprint(errors, task, error_class, message): the 16 hex digits grouping failures
-- (models/fingerprints.py says how): the task's own fingerprint, else how an attempt ended
-- without an exception, else task, error class and message pattern.
-- Last defined by: 0022_failure_fingerprints.
-- Called by: the trigger function jobretry_dead_fingerprint() below.
CREATE OR REPLACE FUNCTION jobretry_fingerprint(errors jsonb, task text, error_class text, message text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT left(md5(CASE
        WHEN jsonb_typeof(errors -> -1) = 'object' AND coalesce(errors -> -1 ->> 'fingerprint', '') <> ''
            THEN 'own' || chr(31) || (errors -> -1 ->> 'fingerprint')
        WHEN jsonb_typeof(errors -> -1) = 'object'
             AND coalesce(errors -> -1 ->> 'ended', 'error') NOT IN ('error', 'fatal', 'unknown_task')
            THEN coalesce(task, '') || chr(31) || 'ended ' || (errors -> -1 ->> 'ended')
        ELSE coalesce(task, '') || chr(31) || coalesce(error_class, '') || chr(31)
             || coalesce(jobretry_error_pattern(message), '')
    END), 16)
$function$;

-- jobretry_fingerprint(errors, task): a job's fingerprint, of its last attempt entry.
-- Last defined by: 0022_failure_fingerprints.
-- Called by: models/fingerprints.py JobFingerprint (Job.objects.annotate(...)).
CREATE OR REPLACE FUNCTION jobretry_fingerprint(errors jsonb, task text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT jobretry_fingerprint(errors, task, errors -> -1 ->> 'error_class', errors -> -1 ->> 'message')
$function$;

-- jobretry_dead_fingerprint(): sets a dead letter's fingerprint column, whatever the INSERT gave.
-- Last defined by: 0022_failure_fingerprints.
-- Called by: the trigger below, on every dead letter written (burials, the admin, imports).
CREATE OR REPLACE FUNCTION jobretry_dead_fingerprint()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    NEW.fingerprint := jobretry_fingerprint(NEW.errors, NEW.task_name, NEW.last_error_class, NEW.last_error);
    RETURN NEW;
END
$function$;

-- The trigger: on every INSERT of a dead letter, and on an UPDATE of the columns it reads.
-- Last defined by: 0022_failure_fingerprints. Read back by models/fingerprints.py FingerprintField.
CREATE TRIGGER jobretry_dead_fingerprint
BEFORE INSERT OR UPDATE OF errors, task_name, last_error_class, last_error
ON django_jobretry_deadletter
FOR EACH ROW EXECUTE FUNCTION jobretry_dead_fingerprint();

-- ==== workflows ==================================================================================
-- A flow advances in the statement that ends its step's job (docs/workflows.md): each hook below
-- is called by a statement of jobs/statements.py with the flow steps of the rows it changed, only
-- when there are some (flow_steps_ended()). They write job rows too (a waiting job made ready, a
-- cancelled one deleted): those are a flow's transitions, kept beside the flow's own rows.
-- Last defined by: 0036_workflows.

-- jobretry_flow_release(parents, outcome): what the end of the steps `parents` ('succeeded',
-- 'dead' or 'cancelled') does to their children. A success satisfies every edge from it, any
-- other end only the "run" ones; a child whose last edge is satisfied becomes live and its job
-- ready (status 'waiting' -> 'ready', run_at now), and its queue is woken (NOTIFY, delivered at
-- commit). A dead parent cancels its "skip" children, a cancelled one its "skip" and "block"
-- children: their waiting jobs are deleted and the cancel goes on down the graph, a loop rather
-- than a recursion, so a chain of thousands ends in one call. Children are locked in id order, as
-- every function here locks steps, so two transactions never wait for each other in a circle.
-- Returns the steps it cancelled, for jobretry_flow_settle().
CREATE OR REPLACE FUNCTION jobretry_flow_release(parents bigint[], outcome text)
 RETURNS bigint[]
 LANGUAGE plpgsql
AS $function$
DECLARE
    frontier bigint[] := parents;
    ended text := outcome;
    kids bigint[];
    counts integer[];
    live bigint[];
    queues text[];
    cancelled bigint[];
    closed bigint[] := '{}';
BEGIN
    LOOP
        WITH satisfied AS (
            UPDATE django_jobretry_flowedge AS e SET satisfied = true
            WHERE e.parent_id = ANY(frontier) AND NOT e.satisfied AND (ended = 'succeeded' OR e.on_dead = 'run')
            RETURNING e.child_id
        )
        SELECT array_agg(x.child_id ORDER BY x.child_id), array_agg(x.n ORDER BY x.child_id) INTO kids, counts
        FROM (SELECT child_id, count(*)::integer AS n FROM satisfied GROUP BY child_id) AS x;
        IF kids IS NOT NULL THEN
            PERFORM 1 FROM django_jobretry_flowstep AS s WHERE s.id = ANY(kids) ORDER BY s.id FOR UPDATE;
            WITH counted AS (
                UPDATE django_jobretry_flowstep AS s SET waiting_on = s.waiting_on - c.n,
                    state = CASE WHEN s.waiting_on = c.n THEN 'live' ELSE s.state END
                FROM unnest(kids, counts) AS c(id, n)
                WHERE s.id = c.id AND s.state = 'waiting'
                RETURNING s.id, s.state
            )
            SELECT array_agg(id) INTO live FROM counted WHERE state = 'live';
            WITH woken AS (
                UPDATE django_jobretry_job AS j SET status = 'ready', run_at = statement_timestamp()
                WHERE j.flow_step_id = ANY(live) AND j.status = 'waiting'
                RETURNING j.queue_name
            )
            SELECT array_agg(DISTINCT queue_name) INTO queues FROM woken;
            PERFORM pg_notify('django_jobretry', q) FROM unnest(queues) AS q;
        END IF;
        IF ended = 'succeeded' THEN
            EXIT;
        END IF;
        SELECT array_agg(DISTINCT e.child_id ORDER BY e.child_id) INTO kids
        FROM django_jobretry_flowedge AS e
        WHERE e.parent_id = ANY(frontier)
          AND (e.on_dead = 'skip' OR (ended = 'cancelled' AND e.on_dead = 'block'));
        EXIT WHEN kids IS NULL;
        PERFORM 1 FROM django_jobretry_flowstep AS s WHERE s.id = ANY(kids) ORDER BY s.id FOR UPDATE;
        WITH gone AS (
            UPDATE django_jobretry_flowstep AS s SET state = 'cancelled', ended_at = statement_timestamp()
            WHERE s.id = ANY(kids) AND s.state = 'waiting'
            RETURNING s.id
        )
        SELECT array_agg(id) INTO cancelled FROM gone;
        EXIT WHEN cancelled IS NULL;
        DELETE FROM django_jobretry_job AS j WHERE j.flow_step_id = ANY(cancelled) AND j.status = 'waiting';
        closed := closed || cancelled;
        frontier := cancelled;
        ended := 'cancelled';
    END LOOP;
    RETURN closed;
END
$function$;

-- jobretry_flow_settle(flows, closed, recount): the flows' counts after their steps `closed`
-- ended for good (succeeded, cancelled, discarded): `open_steps` less those (the on-death callback
-- is not counted), then with `recount` which dead letter blocks each flow ("blocked" while one is
-- left). A flow with no open step left is completed and its unused on-death callback cancelled.
-- Flows are locked in id order, after the steps.
CREATE OR REPLACE FUNCTION jobretry_flow_settle(flows bigint[], closed bigint[], recount boolean)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    done bigint[];
BEGIN
    PERFORM 1 FROM django_jobretry_flow AS f WHERE f.id = ANY(flows) ORDER BY f.id FOR UPDATE;
    UPDATE django_jobretry_flow AS f SET open_steps = f.open_steps - c.n
    FROM (SELECT s.flow_id, count(*)::integer AS n FROM django_jobretry_flowstep AS s
          WHERE s.id = ANY(closed) AND s.role <> 'on_death' GROUP BY s.flow_id) AS c
    WHERE f.id = c.flow_id;
    IF recount THEN
        UPDATE django_jobretry_flow AS f SET blocked_by = b.dead,
            blocked_at = CASE WHEN b.dead IS NULL THEN NULL ELSE COALESCE(f.blocked_at, statement_timestamp()) END,
            state = CASE WHEN f.state = 'cancelled' THEN f.state WHEN b.dead IS NOT NULL THEN 'blocked'
                         WHEN f.state = 'blocked' THEN 'running' ELSE f.state END
        FROM (SELECT fl.id, (SELECT min(s.dead_letter_id) FROM django_jobretry_flowstep AS s
                             WHERE s.flow_id = fl.id AND s.dead_letter_id IS NOT NULL) AS dead
              FROM unnest(flows) AS fl(id)) AS b
        WHERE f.id = b.id;
    END IF;
    WITH completed AS (
        UPDATE django_jobretry_flow AS f SET state = 'completed',
            finished_at = COALESCE(f.finished_at, statement_timestamp())
        WHERE f.id = ANY(flows) AND f.open_steps = 0 AND f.state = 'running'
        RETURNING f.id
    )
    SELECT array_agg(id) INTO done FROM completed;
    IF done IS NOT NULL THEN
        WITH unused AS (
            UPDATE django_jobretry_flowstep AS s SET state = 'cancelled', ended_at = statement_timestamp()
            WHERE s.flow_id = ANY(done) AND s.role = 'on_death' AND s.state = 'waiting'
            RETURNING s.id
        )
        DELETE FROM django_jobretry_job AS j USING unused
        WHERE j.flow_step_id = unused.id AND j.status = 'waiting';
    END IF;
END
$function$;

-- jobretry_flow_succeeded(steps): the steps whose jobs SUCCEED just recorded (fenced: only a
-- worker that still held its lease gets here). Called by jobs/statements.py SUCCEED and
-- succeed_and_claim_sql(), in the same statement.
CREATE OR REPLACE FUNCTION jobretry_flow_succeeded(steps bigint[])
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    ended bigint[];
    flows bigint[];
BEGIN
    PERFORM 1 FROM django_jobretry_flowstep AS s WHERE s.id = ANY(steps) ORDER BY s.id FOR UPDATE;
    WITH marked AS (
        UPDATE django_jobretry_flowstep AS s SET state = 'succeeded', ended_at = statement_timestamp()
        WHERE s.id = ANY(steps) AND s.state = 'live'
        RETURNING s.id, s.flow_id
    )
    SELECT array_agg(id), array_agg(DISTINCT flow_id) INTO ended, flows FROM marked;
    IF ended IS NOT NULL THEN
        PERFORM jobretry_flow_release(ended, 'succeeded');
        PERFORM jobretry_flow_settle(flows, ended, false);
    END IF;
    RETURN COALESCE(cardinality(ended), 0);
END
$function$;

-- jobretry_flow_died(steps, dead_letters): the steps whose jobs a burial just made these dead
-- letters (burial_sql(): a failure, a lost lease, a cancel). The flow is blocked by the first of
-- its dead letters and its on-death callback made ready, once; a step of a cancelled flow ends
-- as cancelled instead.
CREATE OR REPLACE FUNCTION jobretry_flow_died(steps bigint[], dead_letters bigint[])
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    dead bigint[];
    stopped bigint[];
    flows bigint[];
    callbacks bigint[];
    queues text[];
BEGIN
    PERFORM 1 FROM django_jobretry_flowstep AS s WHERE s.id = ANY(steps) ORDER BY s.id FOR UPDATE;
    WITH marked AS (
        UPDATE django_jobretry_flowstep AS s
        SET state = CASE WHEN f.state = 'cancelled' THEN 'cancelled' ELSE 'dead' END,
            dead_letter_id = CASE WHEN f.state = 'cancelled' THEN NULL ELSE d.dead END,
            ended_at = statement_timestamp()
        FROM unnest(steps, dead_letters) AS d(id, dead), django_jobretry_flow AS f
        WHERE s.id = d.id AND f.id = s.flow_id AND s.state = 'live'
        RETURNING s.id, s.flow_id, s.state
    )
    SELECT array_agg(id) FILTER (WHERE state = 'dead'), array_agg(id) FILTER (WHERE state = 'cancelled'),
           array_agg(DISTINCT flow_id) INTO dead, stopped, flows
    FROM marked;
    IF flows IS NULL THEN
        RETURN 0;
    END IF;
    WITH called AS (
        UPDATE django_jobretry_flowstep AS s SET state = 'live'
        WHERE s.flow_id IN (SELECT flow_id FROM django_jobretry_flowstep WHERE id = ANY(dead))
          AND s.role = 'on_death' AND s.state = 'waiting'
        RETURNING s.id
    )
    SELECT array_agg(id) INTO callbacks FROM called;
    WITH woken AS (
        UPDATE django_jobretry_job AS j SET status = 'ready', run_at = statement_timestamp()
        WHERE j.flow_step_id = ANY(callbacks) AND j.status = 'waiting'
        RETURNING j.queue_name
    )
    SELECT array_agg(DISTINCT queue_name) INTO queues FROM woken;
    PERFORM pg_notify('django_jobretry', q) FROM unnest(queues) AS q;
    stopped := COALESCE(stopped, '{}') || jobretry_flow_release(dead, 'dead')
        || jobretry_flow_release(stopped, 'cancelled');
    PERFORM jobretry_flow_settle(flows, stopped, true);
    RETURN cardinality(flows);
END
$function$;

-- jobretry_flow_revived(steps): the dead steps a requeue (revive_sql()) made live again; the
-- flow is blocked by its next dead letter, or running again.
CREATE OR REPLACE FUNCTION jobretry_flow_revived(steps bigint[])
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    flows bigint[];
BEGIN
    PERFORM 1 FROM django_jobretry_flowstep AS s WHERE s.id = ANY(steps) ORDER BY s.id FOR UPDATE;
    WITH marked AS (
        UPDATE django_jobretry_flowstep AS s SET state = 'live', dead_letter_id = NULL, ended_at = NULL
        WHERE s.id = ANY(steps) AND s.state = 'dead'
        RETURNING s.flow_id
    )
    SELECT array_agg(DISTINCT flow_id) INTO flows FROM marked;
    IF flows IS NOT NULL THEN
        PERFORM jobretry_flow_settle(flows, '{}', true);
    END IF;
    RETURN COALESCE(cardinality(flows), 0);
END
$function$;

-- jobretry_flow_discarded(steps): the dead steps whose dead letters DISCARD deleted: ended for
-- good, their descendants cancelled as jobretry_flow_release() says.
CREATE OR REPLACE FUNCTION jobretry_flow_discarded(steps bigint[])
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    ended bigint[];
    flows bigint[];
BEGIN
    PERFORM 1 FROM django_jobretry_flowstep AS s WHERE s.id = ANY(steps) ORDER BY s.id FOR UPDATE;
    WITH marked AS (
        UPDATE django_jobretry_flowstep AS s SET state = 'discarded', dead_letter_id = NULL,
            ended_at = statement_timestamp()
        WHERE s.id = ANY(steps) AND s.state = 'dead'
        RETURNING s.id, s.flow_id
    )
    SELECT array_agg(id), array_agg(DISTINCT flow_id) INTO ended, flows FROM marked;
    IF ended IS NOT NULL THEN
        PERFORM jobretry_flow_settle(flows, ended || jobretry_flow_release(ended, 'cancelled'), true);
    END IF;
    RETURN COALESCE(cardinality(ended), 0);
END
$function$;

-- jobretry_flow_cancel(flow, actor): a flow cancelled by an operator (flows/service.py): its
-- waiting and ready steps cancelled and their jobs deleted, its running ones asked to stop (their
-- workers bury them as "cancelled" at the next heartbeat). Returns nothing for a flow already
-- completed or cancelled.
CREATE OR REPLACE FUNCTION jobretry_flow_cancel(flow bigint, actor text)
 RETURNS TABLE(cancelled integer, stopping integer)
 LANGUAGE plpgsql
AS $function$
DECLARE
    ended bigint[];
BEGIN
    PERFORM 1 FROM django_jobretry_flowstep AS s WHERE s.flow_id = flow ORDER BY s.id FOR UPDATE;
    UPDATE django_jobretry_flow AS f SET state = 'cancelled', cancelled_by = actor,
        finished_at = statement_timestamp()
    WHERE f.id = flow AND f.state IN ('running', 'blocked');
    IF NOT FOUND THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM django_jobretry_job AS j USING django_jobretry_flowstep AS s
        WHERE j.flow_step_id = s.id AND s.flow_id = flow AND j.status IN ('waiting', 'ready')
        RETURNING j.flow_step_id
    ), marked AS (
        UPDATE django_jobretry_flowstep AS s SET state = 'cancelled', ended_at = statement_timestamp()
        FROM gone WHERE s.id = gone.flow_step_id
        RETURNING s.id
    )
    SELECT array_agg(id) INTO ended FROM marked;
    UPDATE django_jobretry_flow AS f SET open_steps = f.open_steps - (
        SELECT count(*) FROM django_jobretry_flowstep AS s WHERE s.id = ANY(ended) AND s.role <> 'on_death')
    WHERE f.id = flow;
    cancelled := COALESCE(cardinality(ended), 0);
    UPDATE django_jobretry_job AS j SET cancel_requested_by = actor,
        cancel_requested_at = COALESCE(j.cancel_requested_at, statement_timestamp())
    FROM django_jobretry_flowstep AS s
    WHERE j.flow_step_id = s.id AND s.flow_id = flow AND j.status = 'running';
    GET DIAGNOSTICS stopping = ROW_COUNT;
    RETURN NEXT;
END
$function$;
