"""The invariants, checked by SQL once every process is stopped.

Each check returns how many things it looked at and which of them violate
it. Definitions (docs/reliability.md repeats them):

* a key's *terminal* is a succeeded job (still there, or deleted by the
  pruner after succeeding), a dead letter, or a dead letter deleted by an
  operator's discard (one an operator recorded the intent to discard);
* an *accepted outcome* of an attempt is its success, or a failure
  recorded in the history with ``ended`` error, fatal or unknown_task;
* an attempt that started (ledger row) without an accepted outcome was
  *lost mid-run*: the only way the job's handler runs twice for one
  failure. It must be explained by a fault whose window overlaps the
  attempt's life, from its start (less SLACK) until it was recovered (plus
  SLACK), on the same worker or on all of them.

Which process wrote each end of an attempt (a stale outcome accepted would
otherwise pass here as the current attempt's success) is checked in
chaos/stale.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from django_jobretry.conf import jobretry_settings
from django_jobretry.exceptions import UnknownPolicy


@dataclass
class Check:
    name: str
    checked: int
    violations: list[str] = field(default_factory=list)
    #: Lines printed after the violations that help explain them (worker log lines, say).
    context: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def _rows(sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or {})
        return list(cursor.fetchall())


TERMINALS = """
WITH live AS (SELECT unique_key AS k, count(*) AS n FROM django_jobretry_job
              WHERE status IN ('ready', 'running') GROUP BY 1),
succ AS (SELECT unique_key AS k, count(*) AS n FROM (
            SELECT unique_key FROM django_jobretry_job WHERE status = 'succeeded'
            UNION ALL
            SELECT unique_key FROM chaos_audit
            WHERE source = 'job' AND op = 'delete' AND old_status = 'succeeded'
         ) AS s GROUP BY 1),
dead AS (SELECT unique_key AS k, count(*) AS n FROM django_jobretry_deadletter GROUP BY 1),
requeued AS (SELECT (requeue_history -> -1 ->> 'dead_letter_id')::bigint AS id FROM chaos_audit
             WHERE source = 'job' AND op = 'insert' AND requeue_count > 0
               AND jsonb_typeof(requeue_history) = 'array'),
discarded AS (SELECT a.unique_key AS k, count(*) AS n FROM chaos_audit AS a
              WHERE a.source = 'dead' AND a.op = 'delete'
                AND NOT EXISTS (SELECT 1 FROM requeued AS r WHERE r.id = a.row_id)
                AND EXISTS (SELECT 1 FROM chaos_intent AS i
                            WHERE i.dead_letter_id = a.row_id AND i.action = 'discard')
              GROUP BY 1)
SELECT e.key, e.kind, COALESCE(live.n, 0), COALESCE(succ.n, 0), COALESCE(dead.n, 0), COALESCE(discarded.n, 0)
FROM chaos_enqueued AS e
LEFT JOIN live ON live.k = e.key LEFT JOIN succ ON succ.k = e.key
LEFT JOIN dead ON dead.k = e.key LEFT JOIN discarded ON discarded.k = e.key
"""


def terminals() -> tuple[Check, Check, dict[str, int]]:
    """(no job lost, one terminal per key, counts of how keys ended)."""
    lost = Check("no job lost (every key succeeded, dead, or discarded)", 0)
    double = Check("at most one terminal per key", 0)
    ends = {"succeeded": 0, "dead letter": 0, "discarded by operator": 0}
    for key, kind, live, succ, dead, discarded in _rows(TERMINALS):
        lost.checked += 1
        double.checked += 1
        total = succ + dead + discarded
        if live or not total:
            lost.violations.append(f"{key} ({kind}): live={live} terminals={total}")
        if total > 1:
            double.violations.append(f"{key} ({kind}): succeeded={succ} dead={dead} discarded={discarded}")
        for name, n in zip(ends, (succ, dead, discarded), strict=True):
            ends[name] += n
    return lost, double, ends


def final_transitions() -> Check:
    """Per job id: at most one accepted success or burial; a succeeded job never changes again."""
    rows = _rows("""
        SELECT job_id, count(*) FROM (
            SELECT job_id FROM chaos_audit WHERE source = 'job' AND op = 'update' AND new_status = 'succeeded'
            UNION ALL SELECT job_id FROM chaos_audit WHERE source = 'dead' AND op = 'insert'
        ) AS f GROUP BY 1
    """)
    check = Check("at most one accepted final transition per job", len(rows))
    check.violations += [f"job {job_id}: {n} final transitions" for job_id, n in rows if n > 1]
    changed = _rows(
        "SELECT job_id, new_status FROM chaos_audit WHERE op = 'update' AND old_status = 'succeeded'"
    )
    check.violations += [f"job {job_id}: succeeded, then {status}" for job_id, status in changed]
    return check


#: A requeued job carries its dead letter's history, whose entries number the attempts of the job
#: that died: entries older than the job row are not this job's (``own``), or the original's fatal
#: attempt 1 would pass for the requeued job's attempt 1, and a lost attempt's end could be a
#: time from before its job existed.
LOST_ATTEMPTS = """
WITH born AS (
    SELECT row_id AS job_id, min(at) AS at FROM chaos_audit WHERE source = 'job' AND op = 'insert' GROUP BY 1
), own AS (
    SELECT e.* FROM chaos_entry AS e LEFT JOIN born AS b ON b.job_id = e.job_id
    WHERE b.at IS NULL OR e.at IS NULL OR e.at >= b.at
), accepted AS (
    SELECT job_id, attempt FROM own WHERE ended IN ('error', 'fatal', 'unknown_task')
    UNION SELECT job_id, attempts FROM chaos_audit WHERE op = 'update' AND new_status = 'succeeded'
), lost AS (
    SELECT a.job_id, a.attempt, a.pid, a.started_at, a.ended_at AS handler_ended_at,
           (SELECT min(e.at) FROM own AS e
            WHERE e.job_id = a.job_id AND e.attempt = a.attempt) AS ended_at,
           (SELECT string_agg(DISTINCT e.ended, ',') FROM own AS e
            WHERE e.job_id = a.job_id AND e.attempt = a.attempt) AS ended,
           EXISTS (SELECT 1 FROM chaos_attempt AS b
                   WHERE b.job_id = a.job_id AND b.attempt > a.attempt) AS rerun
    FROM chaos_attempt AS a
    WHERE NOT EXISTS (SELECT 1 FROM accepted AS c WHERE c.job_id = a.job_id AND c.attempt = a.attempt)
), faults AS (
    SELECT kind, target_pid, started_at, ended_at FROM chaos_fault
    UNION ALL SELECT 'poison', pid, started_at, started_at FROM chaos_attempt WHERE poison
)
SELECT l.job_id, l.attempt, l.pid, l.rerun,
       (SELECT string_agg(DISTINCT f.kind, ',') FROM faults AS f
        WHERE (f.target_pid IS NULL OR f.target_pid = l.pid)
          AND f.ended_at >= l.started_at - %(slack)s
          AND f.started_at <= COALESCE(l.ended_at, 'infinity') + %(slack)s),
       l.started_at, l.handler_ended_at, l.ended_at, l.ended,
       (SELECT f.kind || ' ' || to_char(f.started_at, 'HH24:MI:SS.MS') || '-'
               || to_char(f.ended_at, 'HH24:MI:SS.MS') FROM faults AS f
        WHERE f.target_pid IS NULL OR f.target_pid = l.pid
        ORDER BY least(abs(extract(epoch FROM f.ended_at - l.started_at)),
                       abs(extract(epoch FROM f.started_at - COALESCE(l.ended_at, l.started_at))))
        LIMIT 1)
FROM lost AS l
"""


#: An attempt lost with no fault near it: its worker's pid, when it started, when it was ended (None: never).
Unexplained = tuple[int, datetime, datetime | None]


def duplicate_starts(slack: timedelta) -> tuple[Check, Check, dict[str, int], list[Unexplained]]:
    """(lost attempts explained by a fault, one start per claimed attempt, lost attempts by fault kind,
    the lost attempts no fault explains)."""
    rows = _rows(LOST_ATTEMPTS, {"slack": slack})
    check = Check("duplicate starts only for attempts in flight at a fault", len(rows))
    unexplained: list[Unexplained] = []
    by_kind: dict[str, int] = {"rerun after a lost attempt": 0}
    for job_id, attempt, pid, rerun, kinds, started, handler_ended, ended_at, ended, nearest in rows:
        by_kind["rerun after a lost attempt"] += int(rerun)
        if kinds is None:
            check.violations.append(
                f"job {job_id} attempt {attempt} (pid {pid}) lost with no fault near it: started "
                f"{_clock(started)}, handler ended {_clock(handler_ended)}, ended {ended or 'never'} at "
                f"{_clock(ended_at)}; nearest fault of that worker: {nearest or 'none'}"
            )
            unexplained.append((pid, started, ended_at))
        else:
            for kind in kinds.split(","):
                by_kind[kind] = by_kind.get(kind, 0) + 1
    twice = _rows("SELECT job_id, attempt, count(*) FROM chaos_attempt GROUP BY 1, 2 HAVING count(*) > 1")
    once = Check("one start per claimed attempt", _rows("SELECT count(*) FROM chaos_attempt")[0][0])
    once.violations += [f"job {j} attempt {a} started {n} times" for j, a, n in twice]
    return check, once, by_kind, unexplained


def _clock(at: Any) -> str:
    """A timestamp of the database (UTC) to the millisecond; "-" for none."""
    return "-" if at is None else f"{at:%H:%M:%S}.{at.microsecond // 1000:03d}"


NO_CLAIM_AFTER_CANCEL = """
SELECT c.job_id, c.requested_at,
       (SELECT count(*) FROM chaos_audit AS a
        WHERE a.source = 'job' AND a.op = 'update' AND a.row_id = c.job_id
          AND a.old_status = 'ready' AND a.new_status = 'running' AND a.at > c.requested_at),
       (SELECT string_agg(d.new_status, ',') FROM chaos_audit AS d
        WHERE d.source = 'dead' AND d.op = 'insert' AND d.job_id = c.job_id)
FROM chaos_cancel AS c
"""


def no_claim_after_cancel() -> tuple[Check, dict[str, int]]:
    """(no job started again once its cancel was requested, how the cancelled jobs ended).

    The cancel held the job's row when it was written, so a claim written
    after it was made after the request: the request was lost (a retry or a
    lease recovery handed the job out again).
    """
    rows = _rows(NO_CLAIM_AFTER_CANCEL)
    check = Check("no job claimed again after its cancel was requested", len(rows))
    ends = {"cancelled": 0, "otherwise": 0}
    for job_id, requested_at, claims, reasons in rows:
        if claims:
            check.violations.append(f"job {job_id}: claimed {claims} times after its cancel ({requested_at})")
        ends["cancelled" if reasons and "cancelled" in reasons.split(",") else "otherwise"] += 1
    return check, ends


def attempts_bounded() -> Check:
    rows = _rows("""
        SELECT 'job ' || id, attempts, max_attempts FROM django_jobretry_job
        UNION ALL SELECT 'dead letter ' || id, attempts, max_attempts FROM django_jobretry_deadletter
        UNION ALL SELECT 'ledger of job ' || a.job_id, max(a.attempt), min(m.max_attempts)
            FROM chaos_attempt AS a
            JOIN chaos_audit AS m ON m.row_id = a.job_id AND m.source = 'job' AND m.op = 'insert'
            GROUP BY a.job_id
    """)
    check = Check("attempts never above max_attempts", len(rows))
    check.violations += [f"{what}: {n} > {cap}" for what, n, cap in rows if n > cap]
    return check


def _policy_bounds(name: str, attempt: int) -> tuple[float, float]:
    try:
        policy = jobretry_settings.policy(name)
    except UnknownPolicy:
        policy = jobretry_settings.policy("default")  # the documented fallback
    low, high = policy.bounds(attempt)
    return low.total_seconds(), high.total_seconds()


def retry_delays() -> Check:
    """Every stored retry delay within the policy's jitter band; no retry started before it was due."""
    rows = _rows("""
        SELECT e.job_id, e.policy_name, e.attempt, e.delay, e.ended,
               extract(epoch FROM (SELECT min(a.started_at) FROM chaos_attempt AS a
                                   WHERE a.job_id = e.job_id AND a.attempt = e.attempt + 1) - e.at)
        FROM chaos_entry AS e WHERE e.delay IS NOT NULL
    """)
    check = Check("retry delays within the policy's bounds, and waited for", len(rows))
    for job_id, policy_name, attempt, delay, ended, waited in rows:
        low, high = _policy_bounds(policy_name, attempt)
        # A shutdown's hold is no retry delay: no band, but it must be waited for too.
        if ended != "shutdown" and not low - 1e-6 <= delay <= high + 1e-6:
            check.violations.append(f"job {job_id} attempt {attempt}: delay {delay} not in [{low}, {high}]")
        if waited is not None and float(waited) < delay - 1e-3:
            check.violations.append(
                f"job {job_id} attempt {attempt + 1} started {waited}s after, delay {delay}"
            )
    return check


PROVENANCE = """
SELECT j.row_id, j.requeue_count, j.requeue_history,
       (SELECT count(*) FROM chaos_audit AS d WHERE d.source = 'dead' AND d.op = 'insert'
          AND d.row_id = (j.requeue_history -> -1 ->> 'dead_letter_id')::bigint
          AND d.job_id = (j.requeue_history -> -1 ->> 'job_id')::bigint
          AND d.new_status = j.requeue_history -> -1 ->> 'reason'
          AND COALESCE(jsonb_array_length(d.requeue_history), 0) = j.requeue_count - 1),
       (SELECT count(*) FROM chaos_audit AS d WHERE d.source = 'dead' AND d.op = 'delete'
          AND d.row_id = (j.requeue_history -> -1 ->> 'dead_letter_id')::bigint),
       (SELECT count(*) FROM chaos_intent AS i WHERE i.action = 'requeue'
          AND i.dead_letter_id = (j.requeue_history -> -1 ->> 'dead_letter_id')::bigint)
FROM chaos_audit AS j
WHERE j.source = 'job' AND j.op = 'insert' AND j.requeue_count > 0
"""

KEYS = ("dead_letter_id", "job_id", "reason", "attempts", "dead_at", "by", "at")


def provenance() -> Check:
    """Every requeued job chains to the dead letter it came from; one job per requeued dead letter."""
    rows = _rows(PROVENANCE)
    check = Check("requeue provenance complete", len(rows))
    seen: dict[Any, int] = {}
    for job_id, count, raw_history, dead_found, dead_deleted, intended in rows:
        history = json.loads(raw_history) if isinstance(raw_history, str | bytes) else raw_history
        last = history[-1] if isinstance(history, list) and history else {}
        if not isinstance(history, list) or len(history) != count:
            check.violations.append(f"job {job_id}: requeue_count {count}, history {history!r:.80}")
        if any(last.get(key) in (None, "") for key in KEYS):
            check.violations.append(f"job {job_id}: incomplete requeue entry {last!r:.120}")
        if not (dead_found and dead_deleted and intended):
            check.violations.append(f"job {job_id}: its dead letter does not match ({last!r:.120})")
        seen[last.get("dead_letter_id")] = seen.get(last.get("dead_letter_id"), 0) + 1
    check.violations += [f"dead letter {d} requeued into {n} jobs" for d, n in seen.items() if n > 1]
    vanished = _rows("""
        SELECT a.row_id FROM chaos_audit AS a WHERE a.source = 'dead' AND a.op = 'delete'
          AND NOT EXISTS (SELECT 1 FROM chaos_intent AS i WHERE i.dead_letter_id = a.row_id)
    """)
    check.violations += [f"dead letter {d} deleted with no operator intent" for (d,) in vanished]
    return check
