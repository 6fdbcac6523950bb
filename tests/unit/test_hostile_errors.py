"""A handler's exception is user code: classifying and rendering it must survive anything."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from django_jobretry import ErrorKind, RetryableError, RetryPolicy
from django_jobretry.policy.errors import requested_delay


class NoInit(RetryableError):
    def __init__(self) -> None:  # skips super().__init__()
        pass


class RaisingDelay(RetryableError):
    def __init__(self) -> None:  # no .delay set, so reading it goes to __getattr__
        pass

    def __getattr__(self, name: str) -> object:
        if name == "delay":
            raise RuntimeError("no delay today")
        raise AttributeError(name)


def with_delay(value: object) -> RetryableError:
    error = RetryableError("x")
    error.delay = value  # type: ignore[assignment]
    return error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RetryableError("x", delay=30), timedelta(seconds=30)),
        (RetryableError("x", delay=0), timedelta(0)),
        (RetryableError("x"), None),
        (NoInit(), None),
        (RaisingDelay(), None),
        (with_delay("soon"), None),
        (with_delay(-1), None),
        (with_delay(timedelta(days=10**6)), None),
        (with_delay(float("nan")), None),
        (with_delay(True), None),
        (with_delay(timedelta(seconds=5)), timedelta(seconds=5)),
    ],
)
def test_requested_delay_is_trusted_only_when_valid(
    error: RetryableError, expected: timedelta | None
) -> None:
    assert requested_delay(error) == expected


def test_classify_survives_a_retryable_error_without_init() -> None:
    classification = RetryPolicy().classify(NoInit())
    assert (classification.kind, classification.requested_delay) == (ErrorKind.RETRYABLE, None)


# -- rendering (Django layer, no database) ---------------------------------------------------------


class ExitOnStr(Exception):
    def __str__(self) -> str:
        raise SystemExit(1)


class ExitOnStrAndRepr(ExitOnStr):
    def __repr__(self) -> str:
        raise KeyboardInterrupt


def test_a_str_that_raises_system_exit_falls_back_to_repr() -> None:
    from django_jobretry.jobs.history import render_error

    rendered = render_error(ExitOnStr("boom"))
    assert (rendered.error_class, rendered.message) == (f"{__name__}.ExitOnStr", "ExitOnStr('boom')")


def test_when_str_and_repr_both_raise_the_class_is_still_recorded() -> None:
    from django_jobretry.jobs.history import render_error

    rendered = render_error(ExitOnStrAndRepr())
    assert (rendered.error_class, rendered.message) == (
        f"{__name__}.ExitOnStrAndRepr",
        "<unprintable ExitOnStrAndRepr>",
    )


def test_a_str_that_never_returns_is_cut_off() -> None:
    from django_jobretry.jobs.history import render_error

    release = threading.Event()

    class Hangs(Exception):
        def __str__(self) -> str:
            release.wait(30)
            return "late"

    try:
        rendered = render_error(Hangs(), timeout=0.05)
    finally:
        release.set()
    assert rendered.error_class.endswith(".Hangs")
    assert (rendered.message, rendered.traceback) == ("the error's text did not render within 0.05 s", "")
