"""Workflows: the flow, its steps and edges, each job's step, the status "waiting", and the functions
that advance a flow in the same statement as its steps' successes, burials, requeues and discards
(docs/workflows.md; the current text of the functions is jobs/functions.sql).
"""

import datetime

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

FLOW_FUNCTIONS = r"""
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
"""

DROP_FLOW_FUNCTIONS = """
DROP FUNCTION IF EXISTS jobretry_flow_cancel(bigint, text);
DROP FUNCTION IF EXISTS jobretry_flow_discarded(bigint[]);
DROP FUNCTION IF EXISTS jobretry_flow_revived(bigint[]);
DROP FUNCTION IF EXISTS jobretry_flow_died(bigint[], bigint[]);
DROP FUNCTION IF EXISTS jobretry_flow_succeeded(bigint[]);
DROP FUNCTION IF EXISTS jobretry_flow_settle(bigint[], bigint[], boolean);
DROP FUNCTION IF EXISTS jobretry_flow_release(bigint[], text);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0035_snooze_time_and_probe_turns"),
    ]

    operations = [
        migrations.CreateModel(
            name="Flow",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("running", "Running"),
                            ("blocked", "Blocked by a dead letter"),
                            ("completed", "Completed"),
                            ("cancelled", "Cancelled"),
                        ],
                        default="running",
                        max_length=9,
                    ),
                ),
                ("steps", models.PositiveIntegerField()),
                ("open_steps", models.PositiveIntegerField()),
                ("blocked_by", models.BigIntegerField(blank=True, null=True)),
                ("blocked_at", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("cancelled_by", models.CharField(blank=True, default="", max_length=150)),
            ],
            options={
                "permissions": [("cancel_flow", "Can cancel flows")],
            },
        ),
        migrations.CreateModel(
            name="FlowEdge",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "on_dead",
                    models.CharField(
                        choices=[
                            ("block", "Wait for the dead letter's requeue"),
                            ("run", "Run anyway"),
                            ("skip", "Skip (cancel) the child"),
                        ],
                        default="block",
                        max_length=5,
                    ),
                ),
                ("satisfied", models.BooleanField(default=False)),
            ],
        ),
        migrations.CreateModel(
            name="FlowStep",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200)),
                (
                    "role",
                    models.CharField(
                        choices=[
                            ("step", "Step"),
                            ("on_success", "On success"),
                            ("on_complete", "On completion"),
                            ("on_death", "On death"),
                        ],
                        default="step",
                        max_length=11,
                    ),
                ),
                ("task_name", models.CharField(max_length=200)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("waiting", "Waiting for its parents"),
                            ("live", "Ready or running"),
                            ("succeeded", "Succeeded"),
                            ("dead", "Dead letter"),
                            ("cancelled", "Cancelled"),
                            ("discarded", "Discarded"),
                        ],
                        max_length=9,
                    ),
                ),
                ("waiting_on", models.PositiveIntegerField(default=0)),
                ("reads_results", models.BooleanField(default=False)),
                ("keeps_result", models.BooleanField(default=False)),
                ("dead_letter_id", models.BigIntegerField(blank=True, null=True)),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name="job",
            name="jobretry_job_status_valid",
        ),
        migrations.AlterField(
            model_name="job",
            name="status",
            field=models.CharField(
                choices=[
                    ("ready", "Ready"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("waiting", "Waiting for its parents"),
                ],
                default="ready",
                max_length=9,
            ),
        ),
        migrations.AddIndex(
            model_name="flow",
            index=models.Index(fields=["state", "created_at"], name="jobretry_flow_state"),
        ),
        migrations.AddIndex(
            model_name="flow",
            index=models.Index(
                condition=models.Q(("blocked_by__isnull", False)),
                fields=["blocked_by"],
                name="jobretry_flow_blocked",
            ),
        ),
        migrations.AddIndex(
            model_name="flow",
            index=models.Index(
                condition=models.Q(("finished_at__isnull", False)),
                fields=["finished_at"],
                name="jobretry_flow_finished",
            ),
        ),
        migrations.AddConstraint(
            model_name="flow",
            constraint=models.CheckConstraint(
                condition=models.Q(("state__in", ["running", "blocked", "completed", "cancelled"])),
                name="jobretry_flow_state_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="flow",
            constraint=models.CheckConstraint(
                condition=models.Q(("open_steps__lte", models.F("steps"))), name="jobretry_flow_open_le_steps"
            ),
        ),
        migrations.AddConstraint(
            model_name="flow",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("blocked_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("blocked_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_flow_blocked_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="flow",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("created_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("created_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_flow_created_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="flow",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("finished_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("finished_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_flow_finished_at_holdable",
            ),
        ),
        migrations.AddField(
            model_name="flowstep",
            name="flow",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="step_rows",
                to="django_jobretry.flow",
            ),
        ),
        migrations.AddField(
            model_name="flowedge",
            name="child",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="parent_edges",
                to="django_jobretry.flowstep",
            ),
        ),
        migrations.AddField(
            model_name="flowedge",
            name="parent",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="child_edges",
                to="django_jobretry.flowstep",
            ),
        ),
        migrations.AddField(
            model_name="deadletter",
            name="flow_step",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="django_jobretry.flowstep",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="flow_step",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="django_jobretry.flowstep",
            ),
        ),
        migrations.AddIndex(
            model_name="deadletter",
            index=models.Index(
                condition=models.Q(("flow_step__isnull", False)),
                fields=["flow_step"],
                name="jobretry_dead_flow_step",
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("flow_step__isnull", False)),
                fields=["flow_step"],
                name="jobretry_job_flow_step",
            ),
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=models.CheckConstraint(
                condition=models.Q(("status__in", ["ready", "running", "succeeded", "waiting"])),
                name="jobretry_job_status_valid",
            ),
        ),
        migrations.AddIndex(
            model_name="flowstep",
            index=models.Index(
                condition=models.Q(("dead_letter_id__isnull", False)),
                fields=["flow", "dead_letter_id"],
                name="jobretry_flowstep_dead",
            ),
        ),
        migrations.AddConstraint(
            model_name="flowstep",
            constraint=models.UniqueConstraint(fields=("flow", "name"), name="jobretry_flowstep_unique_name"),
        ),
        migrations.AddConstraint(
            model_name="flowstep",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("state__in", ["waiting", "live", "succeeded", "dead", "cancelled", "discarded"])
                ),
                name="jobretry_flowstep_state_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="flowstep",
            constraint=models.CheckConstraint(
                condition=models.Q(("role__in", ["step", "on_success", "on_complete", "on_death"])),
                name="jobretry_flowstep_role_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="flowstep",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("ended_at__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)),
                    ("ended_at__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)),
                ),
                name="jobretry_flowstep_ended_at_holdable",
            ),
        ),
        migrations.AddConstraint(
            model_name="flowedge",
            constraint=models.UniqueConstraint(fields=("parent", "child"), name="jobretry_flowedge_unique"),
        ),
        migrations.AddConstraint(
            model_name="flowedge",
            constraint=models.CheckConstraint(
                condition=models.Q(("parent", models.F("child")), _negated=True),
                name="jobretry_flowedge_not_self",
            ),
        ),
        migrations.AddConstraint(
            model_name="flowedge",
            constraint=models.CheckConstraint(
                condition=models.Q(("on_dead__in", ["block", "run", "skip"])),
                name="jobretry_flowedge_on_dead_valid",
            ),
        ),
        # A waiting step holds its unique key like a ready or running job.
        migrations.RemoveConstraint(
            model_name="job",
            name="jobretry_job_unique_live_key",
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    ("status__in", ("ready", "running", "waiting")), ("unique_key__isnull", False)
                ),
                fields=("unique_key",),
                name="jobretry_job_unique_live_key",
            ),
        ),
        migrations.RunSQL(FLOW_FUNCTIONS, DROP_FLOW_FUNCTIONS),
    ]
