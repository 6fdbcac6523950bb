"""Requeue of dead letters that came from another system (django-q2): a registry of resubmitters.

A dead letter of another source is not revived as one of our jobs: it goes
back to the system it came from. The adapter registers how (its
``AppConfig.ready()``); the dead-letter service asks here, under the row
lock it holds, so the guarded compare-and-swap is the same for every source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django_jobretry.exceptions import CannotResubmit
from django_jobretry.models import DeadLetter


@dataclass(frozen=True)
class Resubmitted:
    """A dead letter handed back to the system it came from, instead of becoming a Job.

    ``pk`` is that system's new task id (django-q2: the task's uuid hex).
    """

    pk: str
    task_name: str
    queue_name: str
    requeue_count: int
    source: str


#: How a dead letter of another source is requeued: (locked dead letter, actor) ->
#: Resubmitted. Called in the transaction that holds the dead letter's row lock;
#: it deletes the row itself.
type Resubmitter = Callable[[DeadLetter, str], Resubmitted]
_resubmitters: dict[str, Resubmitter] = {}


def register_resubmitter(source: str, resubmitter: Resubmitter) -> None:
    """Route requeues of dead letters from ``source`` to ``resubmitter``."""
    _resubmitters[source] = resubmitter


def resubmitter_for(dead: DeadLetter) -> Resubmitter:
    """The resubmitter of ``dead``'s source; CannotResubmit when no adapter registered one."""
    resubmit = _resubmitters.get(dead.source)
    if resubmit is None:
        raise CannotResubmit(dead.pk, f"no adapter for source {dead.source!r} is installed")
    return resubmit
