"""The stale-completion invariant: every accepted end of an attempt came from the attempt's holder.

Why a check of its own: the fence (docs/design.md#rule-3) refuses the
outcome of a worker that lost its lease, and the worker logs the refusal.
Counting refusals proves nothing about acceptances: a stale success that got
through would be written onto the row's *current* attempt, look like that
attempt's success, and its own attempt would pass as lost to the fault that
paused it. So the holder of each attempt is identified without trusting the
fence, from what the database saw:

* the *holder* of attempt N is the process whose session wrote the claim
  (``ready -> running`` with attempts N, the last claim before the end): the
  audit's ``writer``, ``chaos-<pid>``. The claim, not the ledger, names it,
  because attempts of hostile rows (an unknown task, arguments that do not
  fit) end without a handler and so without a ledger row;
* an *end* is every transition out of ``running`` that only the holder may
  write: a success, a retry or a release back to ready, a burial into the
  dead letters. Lease recoveries (their new history entry ended
  ``lease_expired``) are written by whichever worker finds the expired lease,
  and are not ends of this kind.

An end is a stale completion accepted when it was written by a process other
than the holder; when it ends an attempt other than the last one claimed;
when the history entry it adds names another attempt (a stale failure of the
holder's own earlier attempt); or when it is a success or handler failure
committed before the attempt's own handler ended (ledger ``ended_at``): the
worker records an outcome only after its handler returned, so that outcome
was another handler's, typically an earlier attempt of the same job in the
same process. (A stale success of that same process committed after the
current handler ended looks like the current one's: the blind spot
docs/reliability.md names.)
"""

from __future__ import annotations

from typing import Any

from chaos.invariants import Check, _rows

#: Entries a worker writes only after the attempt's handler returned or raised.
AFTER_THE_HANDLER = ("error", "fatal", "unknown_task")

STALE_COMPLETIONS = """
WITH ends AS (
    SELECT a.id, a.at, a.job_id, a.writer, a.old_attempts AS attempt, a.entry,
           CASE WHEN a.new_status = 'succeeded' THEN 'success'
                WHEN a.attempts < a.old_attempts THEN 'release'
                ELSE 'retry' END AS what
    FROM chaos_audit AS a
    WHERE a.source = 'job' AND a.op = 'update' AND a.old_status = 'running' AND a.new_status <> 'running'
    UNION ALL
    SELECT a.id, a.at, a.job_id, a.writer, a.attempts,
           (SELECT d.entry FROM chaos_audit AS d WHERE d.source = 'dead' AND d.op = 'insert'
              AND d.job_id = a.job_id AND d.id > a.id ORDER BY d.id LIMIT 1),
           'burial'
    FROM chaos_audit AS a
    WHERE a.source = 'job' AND a.op = 'delete' AND a.old_status = 'running'
)
SELECT e.job_id, e.attempt, e.what, e.writer, e.entry ->> 'attempt', e.entry ->> 'ended',
       c.writer, c.attempts,
       extract(epoch FROM (SELECT max(l.ended_at) FROM chaos_attempt AS l
                           WHERE l.job_id = e.job_id AND l.attempt = e.attempt) - e.at)
FROM ends AS e
LEFT JOIN LATERAL (
    SELECT c.writer, c.attempts FROM chaos_audit AS c
    WHERE c.source = 'job' AND c.op = 'update' AND c.row_id = e.job_id
      AND c.old_status = 'ready' AND c.new_status = 'running' AND c.id < e.id
    ORDER BY c.id DESC LIMIT 1
) AS c ON TRUE
WHERE NOT (e.what IN ('retry', 'burial') AND e.entry ->> 'ended' IS NOT DISTINCT FROM 'lease_expired')
ORDER BY e.id
"""


def stale_completions() -> Check:
    """Ends of attempts written by anyone but the attempt's holder, or for another attempt."""
    rows = _rows(STALE_COMPLETIONS)
    check = Check("stale completions accepted", len(rows))
    for job_id, attempt, what, writer, entry_attempt, ended, holder, held, handler_left in rows:
        how = f" ({ended})" if what in ("retry", "burial") else ""
        where = f"job {job_id} attempt {attempt}: {what}{how}"
        if holder is None:
            check.violations.append(f"{where} by {writer}, and no claim of the job before it")
            continue
        if held != attempt:
            check.violations.append(f"{where} by {writer}, but the last claim was attempt {held}")
        if writer != holder:
            check.violations.append(f"{where} written by {writer}; {holder} claimed that attempt")
        if what in ("retry", "burial") and entry_attempt != str(attempt):
            check.violations.append(f"{where}: its history entry is for attempt {entry_attempt}")
        outcome = what == "success" or (what != "release" and ended in AFTER_THE_HANDLER)
        if outcome and handler_left is not None and handler_left > 0:
            check.violations.append(
                f"{where} accepted while the attempt's handler still ran ({float(handler_left):.3f}s more)"
            )
    return check


RECOVERIES = """
SELECT count(*) FROM chaos_audit
WHERE entry ->> 'ended' = 'lease_expired'
  AND ((source = 'job' AND op = 'update' AND old_status = 'running' AND new_status = 'ready'
        AND attempts = old_attempts)
       OR (source = 'dead' AND op = 'insert'))
"""


def figures() -> dict[str, Any]:
    """What the check could not attribute to a holder, and how often its ledger rule applied."""
    recoveries = _rows(RECOVERIES)[0][0]
    ended, started = _rows("SELECT count(ended_at), count(*) FROM chaos_attempt")[0]
    return {
        "lease recoveries (ends by whoever found the lease expired)": recoveries,
        "handler ends recorded (ledger ended_at)": f"{ended} of {started}",
    }
