"""Retries on django-q2's Redis broker: a one-off Schedule puts the task back after the delay.

The Redis broker pops a task from its list (BLPOP) and never hears of it
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
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime, timedelta
from typing import Any

from django_jobretry.contrib.django_q2 import KEY, retry_policy
from django_jobretry.contrib.django_q2.resubmit import RUN_KEYS

logger = logging.getLogger("django_jobretry")

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
