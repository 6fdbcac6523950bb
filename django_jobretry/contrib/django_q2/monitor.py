"""Monitor-side: write the policy's decision on a failed django-q2 task.

Runs in django-q2's monitor process on ``post_execute``, after django-q2
saved its Task row and left the broker row unacknowledged (the worker hook
set ``ack_failure`` to False).

ORM broker: in one transaction, with the broker row locked and still leased
to this delivery (``lock`` in the future):

- Retry: the row gets a new payload (attempt + 1, the history) and a
  ``lock`` at now + the policy's delay; django-q2's pusher delivers it again
  when the lock passes. Durable: nothing sleeps, a restart loses nothing.
- Give up: the row is deleted and one DeadLetter (source "django_q2") is
  inserted, so django-q2 never delivers the task again.

A row whose lock already passed was redelivered (or acknowledged) meanwhile:
the outcome is stale and changes nothing, like our own fenced writes
(docs/design.md#rule-3).

Redis broker: the task already left Redis when it was delivered, so there is
no row to fence against and no stale outcome (Redis never delivers a task
twice). Retry: one Schedule row that re-sends the package after the delay
(:mod:`.redelivery`). Give up: one DeadLetter; nothing is left to delete.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from django_jobretry.conf import jobretry_settings
from django_jobretry.contrib.django_q2 import KEY, redelivery
from django_jobretry.contrib.django_q2.announce import Judgement, announce
from django_jobretry.contrib.django_q2.rendering import arguments, json_safe
from django_jobretry.deadletters.external import ExternalDeadLetter, bury_external
from django_jobretry.jobs.decisions import decide
from django_jobretry.jobs.history import AttemptEnd, AttemptEntry, attempt_entry
from django_jobretry.models import DeadLetter, DeadLetterSource, DeadReason
from django_jobretry.policy import ErrorKind, GiveUp, Retry
from django_jobretry.registry import policy_for

logger = logging.getLogger("django_jobretry")


def on_post_execute(sender: Any, task: dict[str, Any], **kwargs: Any) -> None:
    state = task.get(KEY)
    if task.get("success") or not isinstance(state, dict) or "failure" not in state:
        return  # success, or a task no policy covers: django-q2's own behaviour
    try:
        record_failure(task, state)
    except Exception:  # never take django-q2's monitor down
        logger.exception(
            "could not record the failure of django-q2 task %s",
            task.get("id"),
            extra={"task": str(task.get("func")), "outcome": "record_error"},
        )


def entry_for(attempt: int, failure: dict[str, Any], worker: str, now: datetime) -> AttemptEntry:
    """The history entry of a failed attempt, from the worker's verdict."""
    kind = ErrorKind(failure["kind"])
    ended = AttemptEnd.FATAL if kind is ErrorKind.FATAL else AttemptEnd(failure["ended"])
    entry = attempt_entry(
        attempt,
        ended,
        kind,
        worker,
        error_class=failure.get("error_class", ""),
        message=failure.get("message", ""),
        traceback_text=failure.get("traceback", ""),
        rule=failure["rule"] if isinstance(failure.get("rule"), str) else None,
    )
    entry["at"] = now.isoformat()
    return entry


def judge(package: dict[str, Any], state: dict[str, Any], now: datetime) -> Judgement:
    """Decide on the attempt ``package`` was delivered for; ``package[KEY]`` becomes what travels on.

    On a retry that is attempt + 1 and the history with this attempt; on
    giving up, the final state the dead letter keeps.
    """
    from django_q.conf import Conf
    from django_q.utils import get_func_repr

    func_name = get_func_repr(package["func"])
    policy_name = str(state["policy"])
    policy = policy_for(func_name, policy_name)
    failure = state["failure"]
    carried = dict(package.get(KEY) or {})
    attempt = int(carried.get("attempt", 1))
    first = carried.get("first_attempt_at") or state.get("first_attempt_at")
    entry = entry_for(attempt, failure, f"django-q2 {Conf.CLUSTER_NAME}", now)
    requested = failure.get("requested_delay")
    decision = decide(
        policy,
        attempt,
        ErrorKind(failure["kind"]),
        elapsed=max(now - datetime.fromisoformat(first), timedelta(0)) if first else None,
        requested_delay=None if requested is None else timedelta(seconds=requested),
        max_attempts=policy.max_attempts,
    )
    reason = None
    if isinstance(decision, GiveUp):
        reason = DeadReason(decision.reason.value)
        if reason is DeadReason.EXHAUSTED and entry["ended"] == AttemptEnd.WORKER_EXIT:
            reason = DeadReason.LEASE_EXPIRED  # like our own jobs: the last attempt was lost
    else:
        entry["delay"] = decision.delay.total_seconds()
    limit = jobretry_settings.error_history_limit
    errors = [*carried.get("errors", []), entry][-limit:]
    carried.update(policy=policy_name, errors=errors, first_attempt_at=first)
    carried.setdefault("enqueued_at", _iso(package.get("started")) or now.isoformat())
    package[KEY] = carried if reason is not None else {**carried, "attempt": attempt + 1}
    return Judgement(decision, attempt, policy.max_attempts, func_name, entry, reason)


def record_failure(task: dict[str, Any], state: dict[str, Any]) -> None:
    """Write the decision on a failed attempt the way the task's broker needs it."""
    from django_q.brokers import get_broker
    from django_q.brokers.orm import ORM

    broker = get_broker(task.get("cluster"))
    if isinstance(broker, ORM) and state.get("ack_id") is not None:
        _record_orm(task, state)
    elif redelivery.is_redis(broker):
        _record_redis(task, state)
    else:
        logger.warning(
            "django-q2 task %s failed on a broker the adapter does not support (%s): not handled",
            task.get("id"),
            type(broker).__name__,
            extra={"outcome": "unsupported_broker"},
        )


def _record_orm(task: dict[str, Any], state: dict[str, Any]) -> None:
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    now = timezone.now()
    rows = OrmQ.objects.using(Conf.ORM)
    with transaction.atomic(using=Conf.ORM):
        row = rows.select_for_update().filter(pk=state["ack_id"], lock__gt=now).first()
        if row is None:
            logger.warning(
                "django-q2 task %s failed after its broker row was redelivered; outcome ignored",
                task.get("id"),
                extra={"task": str(task.get("func")), "outcome": "stale_ignored"},
            )
            return
        package = SignedPackage.loads(row.payload)
        judged = judge(package, state, now)
        dead: DeadLetter | None = None
        if judged.reason is not None:
            dead = bury(package, judged, judged.reason, queue=row.key)
            rows.filter(pk=row.pk).delete()
        elif isinstance(judged.decision, Retry):
            rows.filter(pk=row.pk).update(
                lock=now + judged.decision.delay, payload=SignedPackage.dumps(package)
            )
    announce(judged, package, queue=row.key, dead=dead)


def _record_redis(task: dict[str, Any], state: dict[str, Any]) -> None:
    """One write: the retry's Schedule row, or the dead letter. Redis has nothing left to change."""
    now = timezone.now()
    package = redelivery.package_of(task, state)
    judged = judge(package, state, now)
    queue = str(package.get("cluster") or "")
    dead: DeadLetter | None = None
    if judged.reason is not None:
        dead = bury(package, judged, judged.reason, queue=queue)
    elif isinstance(judged.decision, Retry):
        redelivery.schedule(package, judged.decision.delay, now)
    announce(judged, package, queue=queue, dead=dead)


def _text(value: object) -> str:
    """A name or group from the package (user text, a surrogate possibly), as a column takes it."""
    shown = json_safe("" if value is None else value)
    return shown if isinstance(shown, str) else str(shown)


def _iso(value: object) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


def bury(package: dict[str, Any], judged: Judgement, reason: DeadReason, *, queue: str) -> DeadLetter:
    """The one DeadLetter of a django-q2 task that will not be retried again (``package[KEY]``: its state)."""
    from django_q.signing import SignedPackage

    carried = package[KEY]
    first = carried.get("first_attempt_at")
    args, kwargs = arguments(package.get("args"), package.get("kwargs"))
    return bury_external(
        ExternalDeadLetter(
            source=DeadLetterSource.DJANGO_Q2,
            external_id=str(package["id"]),
            task_name=_text(judged.func_name),
            queue_name=queue,
            policy_name=str(carried["policy"]),
            args=args,
            kwargs=kwargs,
            reason=reason,
            attempts=judged.attempt,
            max_attempts=judged.max_attempts,
            errors=carried["errors"],
            enqueued_at=datetime.fromisoformat(carried["enqueued_at"]),
            dead_at=None,
            external_name=_text(package.get("name")),
            external_group=None if package.get("group") is None else _text(package["group"]),
            external_payload=SignedPackage.dumps(package),
            first_attempt_at=datetime.fromisoformat(first) if first else None,
            requeue_count=int(carried.get("requeue_count", 0)),
            requeue_history=carried.get("requeue_history", []),
        )
    )
