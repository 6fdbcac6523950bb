"""A stop signal never waits on a lock its own thread holds: the handler hands it to a relay thread.

The worker's main loop clears and waits on ``threading.Event``s all the time,
each guarded by a plain (not reentrant) lock; Python runs a signal handler in
the main thread between two bytecodes, so a handler that sets an Event can
land while that thread holds the Event's lock, and wait for itself for good.
worker/lifecycle.py ``relay`` writes the signal to a pipe instead, and a
thread of its own acts on it.

Before the worker takes over the signals (``remember_stop_requests``, while
Django imports every jobs.py) the handler only assigns an attribute, which
takes no lock either: a second signal landing at any line it runs is handled
at once. A process of its own shows it, under faulthandler's deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

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


#: A process starting the way a runworker does, then stopped by a SIGTERM during which, at every line
#: the handler runs (in it or in what it calls), a SIGINT lands once. A handler still running at the
#: deadline is stuck: faulthandler prints where and exits 1. ``event``: the negative control, a
#: handler that sets a threading.Event (what the start-up path did before).
SECOND_SIGNAL_DURING_THE_FIRST = """
import faulthandler, os, signal, sys, threading
import django

django.setup()
from django_jobretry.worker import lifecycle

if sys.argv[1:] == ["event"]:
    requested = threading.Event()
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda signum, frame: requested.set())
else:
    lifecycle.remember_stop_requests()
handler = signal.getsignal(signal.SIGTERM).__code__
landed = set()

def second_signal(frame, event, arg):
    inside = frame
    while inside is not None and inside.f_code is not handler:
        inside = inside.f_back
    if inside is not None and event == "line" and (frame.f_code, frame.f_lineno) not in landed:
        landed.add((frame.f_code, frame.f_lineno))
        os.kill(os.getpid(), signal.SIGINT)  # os.kill runs the handler of a signal to itself at once
    return second_signal

faulthandler.dump_traceback_later(float(os.environ["DEADLINE"]), exit=True)
sys.settrace(second_signal)
os.kill(os.getpid(), signal.SIGTERM)
sys.settrace(None)
faulthandler.cancel_dump_traceback_later()
print(len(landed), lifecycle.StartUp.stop_requested)
"""


def second_signal_during_the_first(*args: str, deadline: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SECOND_SIGNAL_DURING_THE_FIRST, *args],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DEADLINE": str(deadline)},
        capture_output=True,
        text=True,
        timeout=60,  # django.setup() and the deadline, on a busy machine
        check=False,
    )


def test_a_second_signal_while_the_start_up_handler_runs_is_remembered_too() -> None:
    done = second_signal_during_the_first(deadline=DEADLINE)
    assert done.returncode == 0, done.stderr
    landed, stop_requested = done.stdout.split()
    assert int(landed) >= 1  # the second signal did land inside the first one's handler
    assert stop_requested == "True"


def test_negative_control_a_start_up_handler_setting_an_event_is_stuck_by_the_second_signal() -> None:
    stuck = second_signal_during_the_first("event", deadline=1.0)  # stuck for good: any deadline expires
    assert stuck.returncode == 1, stuck.stdout + stuck.stderr
    assert "Timeout" in stuck.stderr, stuck.stderr
    assert "in set" in stuck.stderr, stuck.stderr  # the Event's set(), inside the first handler's set()
