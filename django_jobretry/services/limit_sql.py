"""The limited claim: jobs with a lane, taken only while their limits have room.

Limits are declared in code and settings (limits/declare.py) and enforced here,
in the database, so they hold across any number of workers and hosts.
``jobretry_pick_limited()`` (migration 0026) chooses the jobs:

- lanes in turn: each lane's first due job, then each lane's second, so one
  busy key or task cannot starve the others;
- every slot group (a queue, a task, a key) and bucket it needs is locked
  with ``pg_try_advisory_xact_lock``: a lock another claim holds skips those
  jobs this round and never waits, so claims cannot deadlock or queue up;
- running jobs are counted after the lock, so a slot is a running job: it
  frees when its job leaves "running" by a fenced transition or by lease
  recovery, and a stale worker, whose writes are fenced, cannot free it twice;
- a rate's bucket is refilled and spent on the database clock.

The jobs chosen are claimed by the ordinary claim's UPDATE; the time each
was due before it is added to ``held_seconds``, so waiting for a slot
does not count against ``retry_for``. The statement also returns, as
``rate_wait``, the seconds until a rate lets the next job start (NULL: no
job was held by a rate), so a worker can claim again then.
"""

from __future__ import annotations

from django_jobretry.holds.sql import held_seconds
from django_jobretry.services.statements import claim_picked

#: Time a limited job was due but unclaimed, added as it is claimed.
WAITED = f" held_seconds = {held_seconds('j.run_at', 'statement_timestamp()')},"

LIMITED_CLAIM = f"""
    WITH pick AS MATERIALIZED (
        SELECT * FROM jobretry_pick_limited(%(limit)s, %(queues)s::text[], %(limits)s::jsonb)
    ),
    picked AS (SELECT id FROM pick WHERE id IS NOT NULL),
    claimed AS ({claim_picked(WAITED)})
    SELECT w.rate_wait, c.*
    FROM (SELECT min(wait) AS rate_wait FROM pick) AS w LEFT JOIN claimed AS c ON TRUE
"""
