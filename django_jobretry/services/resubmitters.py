"""Requeue of dead letters that came from another system (django-q2): a registry of resubmitters.

A dead letter of another source is not revived as one of our jobs: it goes
back to the system it came from. The adapter registers how (its
``AppConfig.ready()``); the dead-letter service asks here, under the row
lock it holds, so the guarded compare-and-swap is the same for every source.
The adapter only hands the task back; the dead letter's delete is written
here, so every write of a dead letter stays in services/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

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


#: How a dead letter of another source is handed back: (locked dead letter, actor) ->
#: Resubmitted. Called in the transaction that holds the dead letter's row lock; it
#: writes only to the other system, in that transaction.
type Resubmitter = Callable[[DeadLetter, str], Resubmitted]
_resubmitters: dict[str, Resubmitter] = {}


def register_resubmitter(source: str, resubmitter: Resubmitter) -> None:
    """Route requeues of dead letters from ``source`` to ``resubmitter``."""
    _resubmitters[source] = resubmitter


def resubmitter_for(dead: DeadLetter) -> Resubmitter:
    """The requeue of ``dead``: its source's resubmitter, then the delete of the dead letter.

    CannotResubmit when no adapter registered one for the source.
    """
    hand_back = _resubmitters.get(dead.source)
    if hand_back is None:
        raise CannotResubmit(dead.pk, f"no adapter for source {dead.source!r} is installed")
    return partial(_resubmit, hand_back)


def _resubmit(hand_back: Resubmitter, dead: DeadLetter, actor: str) -> Resubmitted:
    """Hand the task back, then delete its dead letter: both in the caller's transaction, or neither."""
    resubmitted = hand_back(dead, actor)
    DeadLetter.objects.filter(pk=dead.pk).delete()
    return resubmitted
