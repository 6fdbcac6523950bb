"""Putting a django-q2 task back on its queue: a Redis retry after its delay, a dead letter's requeue.

Both re-send the package django-q2 signed, without the keys a finished run added
(``RUN_KEYS``).

**Retries on the Redis broker**: a one-off Schedule puts the task back
after the delay. The Redis broker pops a task from its list (BLPOP) and never hears of it
again: no acknowledgement, no redelivery. When the monitor learns that a
task failed, Redis no longer has it, and Redis has no delayed delivery. So
the retry must be a new delivery, durable while it waits, with nothing
sleeping in a worker.

django-q2 has one durable timer: its ``Schedule`` table, which the cluster's
scheduler (in the guard process) reads about every 30 seconds. A retry is a
Schedule of type ONCE (deleted after it fires) for this cluster, due at now
plus the policy's delay, whose function is :func:`redeliver` and whose one
argument is the task package as django-q2 signs it (a ``str``, so the
scheduler's ``literal_eval`` of ``args`` gives it back), carrying attempt + 1
and the error history. When it fires, :func:`redeliver` runs as an ordinary
task (opted out of the policies, its success not saved) and pushes the
package back on the task's list. So delays are rounded up to the
scheduler's next run: a retry comes between ``delay`` and about ``delay +
30 s`` after the failure.

Writes: one Schedule row per retry, none on success. The scheduler already
queries the Schedule table whether or not the adapter is there.

Duplicates: the scheduler pushes a due task and deletes the Schedule in one
database transaction that cannot include the push; a guard dying between
the two makes the next scheduler run push it again. :func:`redeliver` pushes
a given attempt of a given task once: a Redis ``SET NX`` on a key of its
own, in the same Lua script as the push, kept :data:`DEDUPE_SECONDS`.

The dotted path of :func:`redeliver` is stored in pending Schedule rows:
keep it where it is.

**Requeue of a dead letter** (:func:`resubmit`): the same task goes back to
django-q2, never to our jobs table. Called by the dead-letter service (deadletters/service.py) under its row
lock, in its transaction: the task is put in django-q2's ORM queue and the
service deletes the dead letter (deadletters/external.py) in that one
transaction, so the guarded compare-and-swap, permissions, admin, CLI and
signals are the ones every dead letter has.

What is replayed is the package django-q2 itself signed (SECRET_KEY), kept in
``external_payload``: the same function, arguments, group, timeout, hook and
cluster. A new task id is drawn (django-q2's Task rows are unique by id);
the attempt count starts again at 1 and the history and requeue provenance
come along.

On docs/design.md#rule-10 ("nothing read from the database is imported"):
django-q2 runs a task by locating its function path, which it reads from the
queue table; replaying one does no more than that. The path comes from the
signed package (a row edited by hand fails the signature check), and is
located here first so that a function that no longer exists is refused with
a clear error while the dead letter is kept.
"""

from __future__ import annotations

import logging
import pydoc
import sys
from datetime import datetime, timedelta
from typing import Any

from django.core.signing import BadSignature
from django.utils import timezone

from django_jobretry.contrib.django_q2 import KEY, retry_policy
from django_jobretry.deadletters.external import Resubmitted
from django_jobretry.exceptions import CannotResubmit
from django_jobretry.jobs.history import REQUEUE_ERROR_CHARS, RequeueEntry
from django_jobretry.models import DeadLetter

logger = logging.getLogger("django_jobretry")

#: Keys a finished run adds to a package; a fresh delivery starts without them.
RUN_KEYS = ("result", "success", "stopped", "ack_id", "time_taken", "attempt_count")
#: The function a retry's Schedule runs; stored in the rows, so a stable path.
REDELIVER = "django_jobretry.contrib.django_q2.redelivery.redeliver"

#: Keys the worker hook adds to the carried state for the monitor; they do not travel on.
VERDICT_KEYS = ("failure", "ack_id", "timeout")

#: How long a redelivery is remembered to drop a second push of the same attempt (one day).
DEDUPE_SECONDS = 86_400

#: SET NX the attempt's key, and only if it was not there push the package (atomic in Redis).
PUSH_ONCE = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then
  return redis.call('RPUSH', KEYS[2], ARGV[1])
end
return 0
"""


def is_redis(broker: object) -> bool:
    """Whether ``broker`` is django-q2's Redis broker (without importing ``redis`` otherwise)."""
    module = sys.modules.get("django_q.brokers.redis_broker")
    return module is not None and isinstance(broker, module.Redis)


def package_of(task: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The package as it was delivered, from the finished task: what a retry re-sends.

    The monitor's task dict has the run's keys added (result, success, ...),
    lost the ``timeout`` the worker popped (the hook kept it in ``state``),
    and carries the worker's verdict beside the adapter's state.
    """
    package = {key: value for key, value in task.items() if key not in RUN_KEYS}
    if "timeout" in state:
        package["timeout"] = state["timeout"]
    package[KEY] = {key: value for key, value in state.items() if key not in VERDICT_KEYS}
    return package


def schedule(package: dict[str, Any], delay: timedelta, now: datetime) -> Any:
    """The one Schedule row that delivers ``package`` (its next attempt) again after ``delay``."""
    from django_q.models import Schedule
    from django_q.signing import SignedPackage

    attempt = package[KEY]["attempt"]
    return Schedule.objects.create(
        name=f"jobretry retry {package['id']} #{attempt}"[:100],
        func=REDELIVER,
        args=repr(SignedPackage.dumps(package)),
        kwargs=repr({"q_options": {"save": False}}),
        schedule_type=Schedule.ONCE,
        repeats=-1,  # a ONCE schedule with negative repeats is deleted when it fires
        next_run=now + delay,
        cluster=package.get("cluster"),  # only the cluster that ran it takes it
    )


@retry_policy(None)  # a failed redelivery is django-q2's own Failure row, never a retry of a retry
def redeliver(signed: str) -> str:
    """Run by the cluster when a retry's Schedule fires: the package goes back on its list, once."""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    package = SignedPackage.loads(signed)  # refuses a package django-q2 did not sign
    broker = get_broker(package.get("cluster"))
    attempt = (package.get(KEY) or {}).get("attempt")
    extra = {"task": str(package.get("func")), "attempt": attempt}
    if is_redis(broker):
        key = f"{broker.list_key}:jobretry:{package['id']}:{attempt}"
        pushed = broker.connection.eval(PUSH_ONCE, 2, key, broker.list_key, signed, DEDUPE_SECONDS)
    else:  # the ORM broker retries in place and never schedules this; kept working anyway
        pushed = broker.enqueue(signed)
    outcome = "redelivered" if pushed else "duplicate_dropped"
    logger.log(
        logging.INFO if pushed else logging.WARNING,
        "django-q2 task %s attempt %s: %s",
        package["id"],
        attempt,
        "redelivered" if pushed else "already redelivered, duplicate dropped",
        extra={**extra, "outcome": outcome},
    )
    return outcome


def resubmit(dead: DeadLetter, actor: str) -> Resubmitted:
    """The dead letter's task put back in its cluster's queue: a new task id, attempt 1 again."""
    from django_q.brokers import get_broker
    from django_q.humanhash import uuid
    from django_q.signing import SignedPackage

    row = DeadLetter.objects.filter(pk=dead.pk).first()
    if row is None or not row.external_payload:
        raise CannotResubmit(dead.pk, "it has no django-q2 package to replay")
    try:
        package = SignedPackage.loads(row.external_payload)
    except BadSignature as exc:
        raise CannotResubmit(dead.pk, "its django-q2 package does not match this SECRET_KEY") from exc
    func = package.get("func")
    if isinstance(func, str) and not callable(pydoc.locate(func)):
        raise CannotResubmit(dead.pk, f"django-q2 cannot locate the function {func!r} here")
    now = timezone.now()
    entry: RequeueEntry = {
        "dead_letter_id": row.pk,
        "job_id": row.job_id,
        "external_id": row.external_id,
        "reason": row.reason,
        "attempts": row.attempts,
        "last_error": row.last_error[:REQUEUE_ERROR_CHARS],
        "dead_at": row.dead_at.isoformat(),
        "by": actor,
        "at": now.isoformat(),
        "enqueued_at": row.enqueued_at.isoformat(),
        "first_attempt_at": row.first_attempt_at.isoformat() if row.first_attempt_at else None,
    }
    for key in RUN_KEYS:
        package.pop(key, None)
    tag = uuid()
    package.update(id=tag[1], started=now)
    package[KEY] = {
        "policy": row.policy_name,
        "attempt": 1,
        "errors": row.errors,
        "enqueued_at": row.enqueued_at.isoformat(),
        "requeue_count": row.requeue_count + 1,
        "requeue_history": [*row.requeue_history, entry],
    }
    get_broker(package.get("cluster")).enqueue(SignedPackage.dumps(package))
    return Resubmitted(
        pk=str(tag[1]),
        task_name=row.task_name,
        queue_name=row.queue_name,
        requeue_count=row.requeue_count + 1,
        source=row.source,
    )
