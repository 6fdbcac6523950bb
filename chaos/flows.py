"""Flows under chaos (issue 38): flows of five steps and two callbacks while workers are killed.

Each flow is a diamond and a tail, A -> (B, C) -> D -> E, with an on_success
and an on_complete callback: seven jobs of the ``chaos.flow_step`` task
(chaos/jobs.py), each run written to the ledger (``chaos_attempt``) with the
database's clock at its start, its flow step as its job's context names it
and its own label from its arguments. The audit keeps every job row's flow
step, so a step's accepted successes are counted across its job ids. The
checks, once every process is stopped:

* every flow completed: enqueued once (by its name), completed, nothing open,
  with one callback of each kind;
* no step lost: every step, callbacks included, succeeded, and no job nor dead
  letter of it is left;
* each step succeeded exactly once: one accepted success per step. A killed
  attempt may have run its handler already (at-least-once), so successes are
  counted, not runs; that makes each callback run once per flow. Every run is
  of the step its arguments name;
* no step started before its parents succeeded: each step's first ledger start
  is after the accepted success of every parent (a callback's parents are all
  five steps).

Stale completions are the harness's own check (chaos/stale.py), over every
job, flow steps included: the fence refuses the success of a worker that lost
its lease, and with it the flow's advance, written by the same statement.
"""

# ruff: noqa: S311 - seeded randomness picks step durations, not secrets

from __future__ import annotations

import random
import threading
import time
from typing import Any

from django.db import connection

from chaos import jobs
from chaos.invariants import Check, _rows
from chaos.workload import _retrying
from django_jobretry.flows import Step, Workflow
from django_jobretry.models import Flow

#: The ordinary steps of every flow and their parents, in the order they are added.
SHAPE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("A", ()),
    ("B", ("A",)),
    ("C", ("A",)),
    ("D", ("B", "C")),
    ("E", ("D",)),
)
CALLBACKS = ("on_success", "on_complete")

#: chaos.flow_step's arguments: (flow key, step label, seconds, retryable failures before success).
Arguments = tuple[str, str, float, int]


def plan(key: str, rng: random.Random) -> dict[str, Arguments]:
    """Each step's and callback's arguments: up to 0.6 s of work, one in eight failing once first."""
    return {
        label: (key, label, round(rng.uniform(0.05, 0.6), 2), int(rng.random() < 0.125))
        for label in (*(name for name, _ in SHAPE), *CALLBACKS)
    }


def declare(key: str, arguments: dict[str, Arguments]) -> Workflow:
    flow = Workflow(key)
    added: dict[str, Step] = {}
    for name, parents in SHAPE:
        after = [added[parent] for parent in parents]
        added[name] = flow.add(jobs.flow_step, *arguments[name], after=after, name=name)
    flow.on_success(jobs.flow_step, *arguments["on_success"])
    flow.on_complete(jobs.flow_step, *arguments["on_complete"])
    return flow


def enqueue_flow(key: str, arguments: dict[str, Arguments], *, deadline: float) -> None:
    """Enqueue the flow exactly once, whatever the database does meanwhile.

    A flow is stored in one transaction, so after a failed attempt it is
    either there (by its name, unique in a run: the commit succeeded but its
    reply was lost) or not at all.
    """

    def attempt() -> None:
        flow_id = Flow.objects.filter(name=key).values_list("pk", flat=True).first()
        if flow_id is None:
            flow_id = declare(key, arguments).enqueue().pk
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO chaos_flow_enqueued (key, flow_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                [key, flow_id],
            )

    _retrying(attempt, deadline=deadline)


class FlowFeeder(threading.Thread):
    """Enqueues ``count`` flows evenly over ``seconds``; ``gate`` pauses it (database restart)."""

    def __init__(self, count: int, seconds: float, seed: int, gate: threading.Lock, deadline: float) -> None:
        super().__init__(name="chaos-flow-feeder", daemon=True)
        self.count, self.seconds, self.gate, self.deadline = count, seconds, gate, deadline
        self.rng = random.Random(seed + 1)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            start = time.monotonic()
            for i in range(self.count):
                time.sleep(max(0.0, start + i * self.seconds / self.count - time.monotonic()))
                key = f"flow-{i}"
                arguments = plan(key, self.rng)
                with self.gate:
                    enqueue_flow(key, arguments, deadline=self.deadline)
        except BaseException as exc:  # reported by the flows' first check, which then fails the run
            self.error = exc
        finally:
            connection.close()


FLOWS = """
SELECT e.key, count(f.id), min(f.state), max(f.open_steps), bool_and(f.finished_at IS NOT NULL),
       min(f.steps), (SELECT string_agg(s.role, ',' ORDER BY s.role) FROM django_jobretry_flowstep AS s
                      WHERE s.flow_id = min(f.id) AND s.role <> 'step')
FROM chaos_flow_enqueued AS e LEFT JOIN django_jobretry_flow AS f ON f.name = e.key
GROUP BY e.key ORDER BY e.key
"""

#: Each step of the enqueued flows: its state, what is left of it, its accepted successes, its runs.
STEPS = """
SELECT f.name, s.name, s.role, s.state,
       (SELECT count(*) FROM django_jobretry_job AS j
          WHERE j.flow_step_id = s.id AND j.status <> 'succeeded'),
       (SELECT count(*) FROM django_jobretry_deadletter AS d WHERE d.flow_step_id = s.id),
       (SELECT count(*) FROM chaos_audit AS a WHERE a.flow_step_id = s.id AND a.source = 'job'
          AND a.op = 'update' AND a.new_status = 'succeeded'),
       (SELECT count(*) FROM chaos_attempt AS l WHERE l.flow_step_id = s.id),
       (SELECT count(*) FROM chaos_attempt AS l WHERE l.flow_step_id = s.id
          AND l.step IS DISTINCT FROM f.name || ':' || CASE WHEN s.role = 'step' THEN s.name ELSE s.role END)
FROM chaos_flow_enqueued AS e
JOIN django_jobretry_flow AS f ON f.name = e.key
JOIN django_jobretry_flowstep AS s ON s.flow_id = f.id
ORDER BY f.id, s.id
"""

#: Each edge: the child's first start (ledger, database clock) and the parent's first accepted success.
EDGES = """
SELECT f.name, p.name, c.name,
       (SELECT min(l.started_at) FROM chaos_attempt AS l WHERE l.flow_step_id = c.id),
       (SELECT min(a.at) FROM chaos_audit AS a WHERE a.flow_step_id = p.id AND a.source = 'job'
          AND a.op = 'update' AND a.new_status = 'succeeded')
FROM chaos_flow_enqueued AS e
JOIN django_jobretry_flow AS f ON f.name = e.key
JOIN django_jobretry_flowstep AS c ON c.flow_id = f.id
JOIN django_jobretry_flowedge AS g ON g.child_id = c.id
JOIN django_jobretry_flowstep AS p ON p.id = g.parent_id
ORDER BY f.id, c.id, p.id
"""


def completed(expected: int, feeder_error: BaseException | None = None) -> Check:
    """Every flow fed is there once, completed, with its seven steps and one callback of each kind."""
    rows = _rows(FLOWS)
    check = Check("every flow enqueued once and completed", len(rows))
    if feeder_error is not None:
        check.violations.append(f"the flow feeder failed: {feeder_error!r}")
    if len(rows) != expected:
        check.violations.append(f"{len(rows)} flows recorded as enqueued, {expected} fed")
    callbacks = ",".join(sorted(CALLBACKS))
    for key, found, state, open_steps, finished, steps, roles in rows:
        if found != 1:
            check.violations.append(f"{key}: {found} flows of that name")
        elif (state, open_steps, finished) != ("completed", 0, True):
            check.violations.append(f"{key}: {state} with {open_steps} open steps, finished: {finished}")
        elif (steps, roles) != (len(SHAPE) + len(CALLBACKS), callbacks):
            check.violations.append(f"{key}: {steps} steps, callbacks {roles}")
    return check


def steps() -> tuple[Check, Check, dict[str, int]]:
    """(no step lost, each step succeeded exactly once, the runs counted)."""
    rows = _rows(STEPS)
    lost = Check("no flow step lost (every step succeeded, none waiting)", len(rows))
    once = Check("each flow step succeeded exactly once (each callback once per flow)", len(rows))
    figures = {"runs": 0, "steps run more than once": 0}  # a retry, or a run lost to a fault
    for flow, name, role, state, left, dead, successes, runs, mislabelled in rows:
        where = f"{flow} {name}" + ("" if role == "step" else f" ({role})")
        if state != "succeeded" or left or dead:
            lost.violations.append(f"{where}: {state}, {left} jobs left, {dead} dead letters")
        if successes != 1:
            once.violations.append(f"{where}: {successes} accepted successes")
        if runs == 0 or mislabelled:
            once.violations.append(f"{where}: {runs} runs recorded, {mislabelled} of another step")
        figures["runs"] += runs
        figures["steps run more than once"] += int(runs > 1)
    return lost, once, figures


def order() -> Check:
    """No step's first run started before each of its parents' accepted success."""
    rows = _rows(EDGES)
    check = Check("no flow step started before its parents succeeded", len(rows))
    for flow, parent, child, started, succeeded in rows:
        if started is not None and (succeeded is None or started <= succeeded):
            check.violations.append(
                f"{flow} {child} started {started:%H:%M:%S.%f}, its parent {parent} "
                + ("never succeeded" if succeeded is None else f"succeeded {succeeded:%H:%M:%S.%f}")
            )
    return check


def evaluate(expected: int, feeder_error: BaseException | None) -> tuple[list[Check], dict[str, Any]]:
    """The flows' checks and figures, for the run's table (chaos/report.py prints them)."""
    lost, once, counted = steps()
    checks = [completed(expected, feeder_error), lost, once, order()]
    figures = {
        "flows completed / enqueued": f"{_rows(COMPLETED)[0][0]} / {expected}",
        "flow step runs (ledger) / steps": f"{counted['runs']} / {lost.checked}",
        "flow steps run more than once (retried, or a run lost to a fault)": counted[
            "steps run more than once"
        ],
    }
    return checks, figures


COMPLETED = """
SELECT count(*) FROM chaos_flow_enqueued AS e JOIN django_jobretry_flow AS f ON f.name = e.key
WHERE f.state = 'completed'
"""
