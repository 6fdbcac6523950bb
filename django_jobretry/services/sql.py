"""SQL fragments shared by the worker transitions.

Raw SQL here is deliberate: each transition is one statement that both picks
and changes its rows (claim, heartbeat, recovery), which the ORM cannot say.
"""

from __future__ import annotations

import json
from typing import Any

from django_jobretry.models import DeadLetter, Job

JOB = Job._meta.db_table
DEAD = DeadLetter._meta.db_table

#: The fence every worker write carries (spec §4 rule 3): same job, still
#: running, same attempt, same lease token.
FENCE = "j.status = 'running' AND j.attempts = d.attempts AND j.lease_token = d.token"

CLEAR_LEASE = "lease_owner = '', lease_token = NULL, lease_expires_at = NULL"


def trimmed(array_sql: str, limit_sql: str) -> str:
    """The last ``limit`` elements of a jsonb array, so the history stays bounded."""
    return (
        f"(SELECT COALESCE(jsonb_agg(e ORDER BY i), '[]'::jsonb) "
        f"FROM jsonb_array_elements({array_sql}) WITH ORDINALITY AS t(e, i) "
        f"WHERE i > jsonb_array_length({array_sql}) - {limit_sql})"
    )


def stamped(entry_sql: str) -> str:
    """A history entry with the database's time of the event added."""
    return f"({entry_sql} || jsonb_build_object('at', statement_timestamp()))"


#: Columns copied from a Job row into its DeadLetter row.
DEAD_COLUMNS = (
    "job_id, task_name, queue_name, policy_name, priority, args, kwargs, reason, attempts, "
    "max_attempts, errors, last_error_class, last_error, unique_key, requeue_count, "
    "requeue_history, enqueued_at, first_attempt_at, dead_at"
)


def as_json(value: Any) -> Any:
    """Django leaves jsonb undecoded on raw cursors; decode it if so."""
    return json.loads(value) if isinstance(value, str | bytes) else value
