"""Worker-side hooks: classify a failed django-q2 task where its exception is alive.

django-q2 runs a task in a worker process and hands the finished task dict
to its monitor process; only the worker sees the exception. So:

1. ``pre_execute`` notes which policy covers the task (per function:
   :func:`~django_jobretry.contrib.django_q2.retry_policy`, else the
   setting) and when the attempt started. No database access.
2. django-q2 calls its error reporter inside the ``except`` block of a
   failed task; the adapter chains a reporter of its own in front of any
   configured one, which classifies ``sys.exc_info()`` with the policy and
   renders the error (outside django-q2's timer lock).
3. ``post_execute_in_worker`` (under the timer lock: kept tiny) copies the
   verdict into ``task["jobretry"]`` with the broker's ``ack_id`` and sets
   ``ack_failure`` to False, so the monitor leaves the broker row to us.
   A successful task is left untouched: the success path writes nothing.

A claim file marks the running task, so that the replacement of a worker
killed mid-task counts the lost attempt (:mod:`.claims`).

On a broker without redelivery (Redis: a task is popped, never
acknowledged, ``ack_id`` is None) the task dict is the only copy left, and
a retry re-sends it; django-q2's worker pops the task's own ``timeout``
before ``pre_execute``, so :func:`popped_by_worker` reads it back for the
retry to keep.

The monitor then writes the decision (:mod:`.monitor`). When the reporter
could not run, the failure is classified from django-q2's result text as
retryable.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from django_jobretry.conf import jobretry_settings
from django_jobretry.contrib.django_q2 import KEY, POLICY_ATTRIBUTE, claims
from django_jobretry.jobs.history import AttemptEnd, render_error
from django_jobretry.policy import Classification, ErrorKind
from django_jobretry.registry import policy_for
from django_jobretry.signatures import mismatch

logger = logging.getLogger("django_jobretry")

_UNSET = object()

#: The rule recorded when a task's arguments do not fit its function (fatal at once).
ARGUMENTS_RULE = "the task's arguments do not match the function's signature"


def configured_policy() -> str | None:
    """JOBRETRY["DJANGO_Q2"]["POLICY"], or None when the setting is absent."""
    raw = jobretry_settings.raw
    section = raw.get("DJANGO_Q2") if isinstance(raw, dict) else None
    name = section.get("POLICY") if isinstance(section, dict) else None
    return name if isinstance(name, str) else None


def policy_name_for(func: Callable[..., Any] | None) -> str | None:
    """The policy covering ``func``: its ``retry_policy``, else the setting's; None: not covered."""
    chosen = getattr(func, POLICY_ATTRIBUTE, _UNSET)
    return configured_policy() if chosen is _UNSET else chosen  # type: ignore[return-value]


@dataclass
class Running:
    """The task this worker process runs now (django-q2 workers run one at a time)."""

    policy: str | None
    func_name: str
    started: datetime
    failure: dict[str, Any] | None = None
    #: What django-q2's worker took out of the task before pre_execute (Redis only): its timeout.
    popped: dict[str, Any] = field(default_factory=dict)
    #: Why the task's arguments do not fit its function, found before the call; None: they fit.
    mismatch: str | None = None


class _Current:
    """The task this worker process runs now (one slot: a worker runs one task at a time)."""

    running: Running | None = None


def on_pre_execute(sender: Any, func: Callable[..., Any] | None, task: dict[str, Any], **kwargs: Any) -> None:
    name = getattr(func, "__qualname__", None) or str(task.get("func"))
    running = _Current.running = Running(policy_name_for(func), str(name), timezone.now())
    if running.policy is not None and callable(func):
        running.mismatch = _mismatch(func, task.get("args"), task.get("kwargs"))
    if running.policy is not None:  # a worker killed from here on still counts the attempt
        if task.get("ack_id") is None and not task.get("sync"):  # Redis: a retry re-sends this dict
            running.popped = popped_by_worker()
        claims.claim(task, running.policy, running.started.isoformat(), running.popped)


def _mismatch(func: Callable[..., Any], args: object, kwargs: object) -> str | None:
    """Why django-q2's call of ``func`` with the task's arguments will fail; bound before the call."""
    if not isinstance(args, list | tuple) or not isinstance(kwargs, dict | None):
        return None
    return mismatch(func, args, kwargs or {})


def popped_by_worker() -> dict[str, Any]:
    """The task's own ``timeout``, which django-q2's worker popped before ``pre_execute``.

    The worker keeps it in a local (``timer_value``, beside ``timeout``, the
    cluster's). Read-only, from the worker's frame up the stack; a layout
    where it is not found keeps nothing, and the retry runs under the
    cluster's timeout. Equal to the cluster's, it needs no keeping.
    """
    from django_q import worker

    code = getattr(getattr(worker, "worker", None), "__code__", None)
    frame = inspect.currentframe()
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    if frame is None:
        return {}
    own, default = frame.f_locals.get("timer_value", _UNSET), frame.f_locals.get("timeout", _UNSET)
    return {} if own is _UNSET or own == default else {"timeout": own}


def classify(
    policy_name: str, func_name: str, error: BaseException, *, mismatch: str | None = None
) -> dict[str, Any]:
    """The verdict on ``error`` under ``policy_name``: kind, how it ended, its text.

    ``mismatch`` (the arguments do not fit the function, found before the
    call) makes the call's own TypeError fatal: every attempt raises it.
    """
    from django_q.exceptions import TimeoutException

    policy = policy_for(func_name, policy_name)
    ended = AttemptEnd.ERROR
    if isinstance(error, TimeoutException):  # like our own timeouts: always worth retrying
        classification, ended = Classification(ErrorKind.RETRYABLE), AttemptEnd.TIMEOUT
    elif mismatch is not None and isinstance(error, TypeError):
        classification = Classification(ErrorKind.FATAL, rule=ARGUMENTS_RULE)
    else:
        try:
            classification = policy.classify(error, name=policy_name)
        except Exception:  # the error is user code; what cannot be classified is retried
            classification = Classification(ErrorKind.RETRYABLE)
    rendered = render_error(error)
    delay = classification.requested_delay
    return {
        "kind": classification.kind.value,
        "ended": ended.value,
        "requested_delay": None if delay is None else delay.total_seconds(),
        "error_class": rendered.error_class,
        "message": rendered.message,
        "traceback": rendered.traceback,
        "rule": classification.rule,
    }


def from_result_text(result: object) -> dict[str, Any]:
    """The fallback verdict from django-q2's ``"{error} : {traceback}"`` text: retryable."""
    text = str(result or "")
    message, _, trace = text.partition(" : ")
    last = trace.strip().splitlines()[-1] if trace.strip() else ""
    error_class = last.partition(":")[0] if ":" in last else ""
    return {
        "kind": ErrorKind.RETRYABLE.value,
        "ended": AttemptEnd.ERROR.value,
        "requested_delay": None,
        "error_class": error_class,
        "message": message,
        "traceback": trace,
    }


class Reporter:
    """Chained in front of django-q2's error reporter; called in the task's ``except`` block."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def report(self) -> None:
        try:
            running, error = _Current.running, sys.exc_info()[1]
            if running is not None and running.policy is not None and error is not None:
                stale = running.mismatch
                running.failure = classify(running.policy, running.func_name, error, mismatch=stale)
        except Exception:
            logger.exception(
                "could not classify a django-q2 task's error", extra={"outcome": "classify_error"}
            )
        finally:
            if self.inner is not None:
                self.inner.report()


def on_post_execute_in_worker(
    sender: Any, func: Callable[..., Any] | None, task: dict[str, Any], **kwargs: Any
) -> None:
    running, _Current.running = _Current.running, None
    if running is not None and running.policy is not None:
        claims.release()
    if running is None or running.policy is None or task.get("success") or task.get("sync"):
        return
    state = dict(task.get(KEY) or {})
    state.setdefault("first_attempt_at", running.started.isoformat())
    state.update(
        policy=running.policy,
        failure=running.failure or from_result_text(task.get("result")),
        ack_id=task.get("ack_id"),
        **running.popped,
    )
    task[KEY] = state
    # async_task copies Q_CLUSTER["ack_failures"] into every package: the row is ours now.
    task["ack_failure"] = False


def install_reporter() -> bool:
    """Chain :class:`Reporter` into django-q2's worker; False if its layout is not the known one."""
    from django_q import worker

    current = getattr(worker, "error_reporter", _UNSET)
    if current is _UNSET:
        return False
    if not isinstance(current, Reporter):
        worker.error_reporter = Reporter(current)
    return True
