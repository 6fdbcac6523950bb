"""``progress()``'s checks and its throttle, on a clock the test moves (jobs/progress.py).

The throttle decides which calls cost a statement: the first, then one an
interval at most, then the last value at the attempt's end. Counted here
without a database; tests/integration/progress/ counts the statements
themselves. The negative control, a reporter without an interval, writes
at every call: the counts below would catch a throttle that let them through.
"""

from __future__ import annotations

import math
import uuid

import pytest

from django_jobretry import InvalidProgress, progress
from django_jobretry.display import progress_words
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.jobs.progress import LARGEST, Progress, Reporter, checked
from django_jobretry.models.progress import NOTE_MAX_LENGTH

CALLS = 10_000


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def attempt() -> ClaimedJob:
    return ClaimedJob(1, "t", "default", "default", "[]", "{}", 1, 3, uuid.uuid4(), 1, 0)


def writes(reporter: Reporter, clock: Clock, calls: int, seconds: float) -> tuple[int, Progress | None]:
    """``calls`` offers spread evenly over ``seconds``: how many were to be written, and the final write."""
    written = 0
    for done in range(1, calls + 1):
        clock.now = seconds * (done - 1) / calls
        written += reporter.offer(checked(done, calls)) is not None
    return written, reporter.unwritten()


@pytest.mark.parametrize("seconds", [0.0, 0.5, 0.9999, 1.0, 2.5, 60.0])
def test_calls_cost_one_write_an_interval_and_the_last_value_at_the_end(seconds: float) -> None:
    clock = Clock()
    reporter = Reporter(attempt(), interval=1.0, clock=clock)
    during, final = writes(reporter, clock, CALLS, seconds)
    # The first call, then the first call at least an interval after the last write: at most one
    # write a second besides the first, and (the calls being 1/CALLS of the run apart) hardly fewer.
    last_call = seconds * (CALLS - 1) / CALLS
    assert during <= 1 + math.floor(last_call)
    assert during >= 1 + math.floor(last_call / (1 + seconds / CALLS))
    assert final == Progress(CALLS, CALLS)  # the last call's value was kept, and goes at the end


def test_negative_control_without_an_interval_every_call_writes() -> None:
    clock = Clock()
    during, final = writes(Reporter(attempt(), interval=0.0, clock=clock), clock, CALLS, 1.0)
    assert (during, final) == (CALLS, None)


def test_the_last_value_is_written_at_the_end_only_when_it_was_not_already() -> None:
    clock = Clock()
    reporter = Reporter(attempt(), interval=1.0, clock=clock)
    assert reporter.unwritten() is None  # nothing reported: nothing to write
    assert reporter.offer(checked(1, 3)) == Progress(1, 3)
    assert reporter.unwritten() is None
    assert reporter.offer(checked(2, 3)) is None  # within the interval: kept
    clock.now = 5.0
    assert reporter.offer(checked(2, 3)) == Progress(2, 3)  # due: the latest goes
    assert reporter.offer(checked(2, 3)) is None  # the same value again: nothing to write
    assert reporter.unwritten() is None


def test_a_value_kept_where_it_cannot_be_written_goes_at_the_next_call_that_can() -> None:
    clock = Clock()
    reporter = Reporter(attempt(), interval=1.0, clock=clock)
    assert reporter.offer(checked(1, 3), writable=False) is None
    assert reporter.offer(checked(2, 3)) == Progress(2, 3)  # the first write, though not the first call
    clock.now = 9.0
    assert reporter.offer(checked(3, 3), writable=False) is None
    assert reporter.unwritten() == Progress(3, 3)


def test_a_refused_write_leaves_the_value_to_be_written_again() -> None:
    """What Reporter.write does when the database refuses: written is forgotten."""
    reporter = Reporter(attempt(), interval=1.0, clock=Clock())
    due = reporter.offer(checked(1, 3))
    assert due is not None
    reporter.written = None  # as a refused write leaves it
    assert reporter.unwritten() == Progress(1, 3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ((-1,), "done must be a whole number from 0 to 9223372036854775807, not -1"),
        ((1.5,), "done must be a whole number from 0 to 9223372036854775807, not 1.5"),
        ((True,), "done must be a whole number from 0 to 9223372036854775807, not True"),
        (("3",), "done must be a whole number from 0 to 9223372036854775807, not '3'"),
        (
            (LARGEST + 1,),
            "done must be a whole number from 0 to 9223372036854775807, not 9223372036854775808",
        ),
        ((1, -5), "total must be a whole number from 0 to 9223372036854775807, not -5"),
        ((1, 2.0), "total must be a whole number from 0 to 9223372036854775807, not 2.0"),
        ((11, 10), "done (11) is more than total (10)"),
        ((1, 10, None), "note must be a string, not NoneType"),
        ((1, 10, b"bytes"), "note must be a string, not bytes"),
    ],
)
def test_bad_values_are_refused_naming_the_field_and_value(call: tuple[object, ...], message: str) -> None:
    with pytest.raises(InvalidProgress) as caught:
        progress(*call)  # type: ignore[arg-type]
    assert str(caught.value) == f"progress(): {message}"
    assert isinstance(caught.value, ValueError)


def test_outside_a_job_a_good_call_does_nothing() -> None:
    """No database here: pytest-django would fail a query this call made."""
    progress(3, 10, note="shell")


def test_values_in_range_are_kept_and_a_long_or_unstorable_note_is_cleaned() -> None:
    assert checked(0) == Progress(0)
    assert checked(0, 0) == Progress(0, 0)
    assert checked(LARGEST, LARGEST, "") == Progress(LARGEST, LARGEST, None)
    assert checked(5, None, "a\x00b\ud800") == Progress(5, None, "a\\0b?")
    long = checked(1, 2, "x" * 1000).note
    assert long is not None
    assert len(long) == NOTE_MAX_LENGTH
    assert long.endswith("... [800 characters cut]")


@pytest.mark.parametrize(
    ("done", "total", "words"),
    [
        (None, None, ""),
        (420, None, "420 done"),
        (420, 1000, "420 of 1,000 (42%)"),
        (999, 1000, "999 of 1,000 (99%)"),
        (1000, 1000, "1,000 of 1,000 (100%)"),
        (0, 0, "0 of 0"),
    ],
)
def test_progress_in_words(done: int | None, total: int | None, words: str) -> None:
    assert progress_words(done, total) == words
