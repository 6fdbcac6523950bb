"""Arguments bind to the function's signature: refused at enqueue, fatal at once when stale at run time.

Before: ``record.enqueue("k", "extra")`` was stored and the worker retried
the call's TypeError on the whole schedule before it became a dead letter.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from django_jobretry import FatalError, RetryPolicy, testing
from django_jobretry.decorators import job
from django_jobretry.exceptions import InvalidArguments, InvalidJob
from django_jobretry.jobs.history import AttemptEnd
from django_jobretry.models import DeadLetter, DeadReason, Job
from django_jobretry.signatures import call_signature
from django_jobretry.worker.runner import STALE_ARGUMENTS_RULE
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db


@job(name="tests.signatures.push_order", policy="three")
def push_order(order_id: int, *, note: str = "") -> None:
    Execution.objects.create(key=f"order {order_id}", attempt=0, pid=0)


@job(name="tests.signatures.bug_inside", policy="three")
def bug_inside(key: str) -> None:
    Execution.objects.create(key=key, attempt=0, pid=0)
    raise TypeError(f"unsupported operand inside the job for {key}")


@job(name="tests.signatures.refuses_values", policy=RetryPolicy(max_attempts=5, fatal_errors=[LookupError]))
def refuses_values(key: str) -> None:
    raise KeyError(key)


@job(name="tests.signatures.gives_up", policy="three")
def gives_up(key: str) -> None:
    raise FatalError(f"order {key} is gone")


class TestEnqueueRefusesCallsTheFunctionCannotTake:
    @pytest.mark.parametrize(
        ("args", "kwargs", "message"),
        [
            pytest.param(
                (1, 2, 3),
                {},
                r"^tests\.signatures\.push_order\(\) cannot take these arguments: too many positional "
                r"arguments \(3 positional arguments given; "
                r"the signature is push_order\(order_id, \*, note=\.\.\.\)\)$",
                id="too-many-positional",
            ),
            pytest.param(
                (1,), {"colour": "red"}, "got an unexpected keyword argument 'colour'", id="unknown-keyword"
            ),
            pytest.param((), {}, "missing a required argument: 'order_id'", id="missing"),
            pytest.param((1,), {"order_id": 1}, "multiple values for argument 'order_id'", id="twice"),
            pytest.param(
                (1, "a note"), {}, "too many positional arguments", id="keyword-only-given-by-position"
            ),
        ],
    )
    def test_a_call_that_does_not_bind_is_refused_naming_the_function_and_nothing_is_written(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(InvalidJob, match=message) as refused:
            push_order.enqueue(*args, **kwargs)
        assert isinstance(refused.value, TypeError), "Python's exception for such a call, and Django's"
        assert Job.objects.count() == 0

    def test_the_message_holds_no_argument_value(self) -> None:
        with pytest.raises(InvalidArguments) as refused:
            push_order.enqueue(1, colour="secret-token-123")  # type: ignore[call-arg]
        assert "secret-token-123" not in str(refused.value)

    def test_calls_that_bind_are_stored(self) -> None:
        push_order.enqueue(1)
        push_order.enqueue(order_id=2, note="gift")
        jobs.takes_anything.enqueue(1, 2, 3, colour="red")
        assert Job.objects.count() == 3

    def test_bulk_enqueue_with_one_call_that_does_not_bind_writes_none_of_the_batch(self) -> None:
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
            ((1,), {}),
            ((2,), {}),
            ((3,), {"colour": "red"}),
        ]
        with pytest.raises(InvalidArguments, match=r"unexpected keyword argument 'colour'"):
            push_order.bulk_enqueue(calls)
        assert Job.objects.count() == 0

    def test_a_refused_call_inside_a_transaction_leaves_the_callers_work(self) -> None:
        with transaction.atomic():
            with pytest.raises(InvalidJob):
                push_order.enqueue(1, 2)  # type: ignore[call-arg, arg-type]
            push_order.enqueue(3)
        assert list(Job.objects.values_list("args", flat=True)) == [[3]]

    def test_the_signature_is_read_once_per_function(self) -> None:
        push_order.enqueue(1)
        assert call_signature(push_order.func) is call_signature(push_order.using(priority=3).func)


class TestStaleArgumentsAreFatalOnTheFirstAttempt:
    def test_arguments_that_no_longer_bind_make_a_dead_letter_after_one_attempt(self) -> None:
        stored = push_order.enqueue(1)
        # The function's signature changed since the enqueue: as if push_order now took one argument less.
        Job.objects.filter(pk=stored.pk).update(args=[1, "extra"])
        testing.run_jobs(include_scheduled=True)
        dead = DeadLetter.objects.get()
        assert (dead.reason, dead.attempts, Execution.objects.count()) == (DeadReason.FATAL, 1, 0)
        entry = dead.errors[-1]
        assert (entry["kind"], entry["ended"], entry["rule"]) == (
            "fatal",
            AttemptEnd.FATAL,
            STALE_ARGUMENTS_RULE,
        )
        assert entry["error_class"] == "django_jobretry.exceptions.StaleArguments"
        assert entry["message"].startswith(
            "the stored arguments do not match tests.signatures.push_order's signature: "
            "too many positional arguments"
        )

    def test_a_type_error_raised_inside_the_function_is_retried_as_before(self) -> None:
        bug_inside.enqueue("k")
        testing.run_jobs(include_scheduled=True)
        dead = DeadLetter.objects.get()
        assert (dead.reason, dead.attempts, Execution.objects.count()) == (DeadReason.EXHAUSTED, 3, 3)
        assert [entry["kind"] for entry in dead.errors] == ["retryable"] * 3
        assert all("rule" not in entry for entry in dead.errors)


class TestTheRuleThatMadeAnErrorFatalIsRecorded:
    def test_a_fatal_error_raised_by_the_job(self) -> None:
        gives_up.enqueue("k")
        testing.run_jobs()
        assert DeadLetter.objects.get().errors[-1]["rule"] == "FatalError raised by the job"

    def test_an_error_in_the_policys_fatal_errors(self) -> None:
        refuses_values.enqueue("k")
        testing.run_jobs()
        rule = DeadLetter.objects.get().errors[-1]["rule"]
        assert rule == "KeyError is a subclass of LookupError, which is in the fatal_errors of the policy"
