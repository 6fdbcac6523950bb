"""A stop signal never waits on a lock its own thread holds: the handler hands it to a relay thread.

The worker's main loop clears and waits on ``threading.Event``s all the time,
each guarded by a plain (not reentrant) lock; Python runs a signal handler in
the main thread between two bytecodes, so a handler that sets an Event can
land while that thread holds the Event's lock, and wait for itself for good.
worker/lifecycle.py ``relay`` writes the signal to a pipe instead, and a
thread of its own acts on it.
"""

from __future__ import annotations

import signal
import threading

from django_jobretry.worker.lifecycle import relay

DEADLINE = 5.0


def test_a_signal_while_its_thread_holds_the_lock_the_stop_needs_is_acted_on_once_it_is_free() -> None:
    lock = threading.Lock()  # as an Event's: the stop takes it to set the Event
    done = threading.Event()
    heard: list[int] = []

    def act(signum: int) -> None:
        with lock:
            heard.append(signum)
        done.set()

    handle = relay(act)
    with lock:  # the main loop inside Event.clear() or Event.wait(), when the signal lands
        handle(signal.SIGTERM, None)  # returns at once
        assert not done.is_set()
    assert done.wait(DEADLINE)
    assert heard == [signal.SIGTERM]


def test_negative_control_a_handler_taking_the_lock_in_the_thread_that_holds_it_cannot() -> None:
    lock = threading.Lock()
    with lock:  # what a handler setting the Event itself would do, in the thread that holds its lock
        assert not lock.acquire(timeout=0.5)
