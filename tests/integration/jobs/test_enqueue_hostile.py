"""Hostile arguments against the real PostgreSQL (issue 8).

Each refusal is backed by a test of what PostgreSQL does with the value when
validation is bypassed (the ORM writes the row directly): that is what
enqueue() did before - a DataError quoting the arguments, or a row whose
arguments come back changed. Values that are accepted are read back the way
a worker reads them, through transitions.claim() and ClaimedJob.arguments().
Message wording is checked in tests/unit/test_validation_hostile.py.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import DataError, connection, transaction

from django_jobretry.exceptions import InvalidJob
from django_jobretry.jobs.claim import claim
from django_jobretry.models import Job
from django_jobretry.models.instants import EARLIEST, LATEST
from django_jobretry.validation import INT_MAX, INT_MIN
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

PRIVATE = "hunter2"  # stands for a secret in an argument: never in a message
TASK = "tests.jobs_app.jobs.takes_anything"


def write_unchecked(args: list[Any], kwargs: dict[str, Any] | None = None, **fields: Any) -> Job:
    """Insert a row the way enqueue() did once validation let a value through."""
    with transaction.atomic():
        return Job.objects.create(
            task_name=TASK,
            queue_name="default",
            policy_name="default",
            max_attempts=3,
            args=args,
            kwargs=kwargs or {},
            **fields,
        )


def claimed_arguments() -> tuple[list[Any], dict[str, Any]]:
    """The one ready job's arguments, decoded as the worker decodes them."""
    [claimed] = claim("hostile-test", 10, 30.0, None)
    return claimed.arguments()


def roundtrip(*args: Any, **kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
    jobs.takes_anything.enqueue(*args, **kwargs)
    return claimed_arguments()


def fail_on_any_query(*_: Any) -> None:
    raise AssertionError("validation touched the database")


def refused(*args: Any, **kwargs: Any) -> str:
    """enqueue()'s InvalidJob message; it is raised before any query, and nothing is written."""
    with pytest.raises(InvalidJob) as caught, connection.execute_wrapper(fail_on_any_query):
        jobs.takes_anything.enqueue(*args, **kwargs)
    assert Job.objects.count() == 0
    return str(caught.value)


HOSTILE_TEXT = [
    pytest.param((f"{PRIVATE}\ud800",), {}, "positional argument 0", id="argument"),
    pytest.param(({f"{PRIVATE}\udfff": 1},), {}, "a dict key in positional argument 0", id="dict-key"),
    pytest.param((1, ["a", {"b": [f"\udc80{PRIVATE}"]}]), {}, "positional argument 1", id="nested"),
    pytest.param((), {"token": f"{PRIVATE}\ud800"}, "keyword argument 'token'", id="kwarg"),
    pytest.param((), {f"{PRIVATE}\ud800": 1}, "the name of keyword argument 0", id="kwarg-name"),
    pytest.param((), {f"{PRIVATE}\x00": 1}, "the name of keyword argument 0", id="kwarg-name-nul"),
]


@pytest.mark.parametrize(("args", "kwargs", "where"), HOSTILE_TEXT)
def test_text_postgres_refuses_is_invalid_before_the_database(
    args: tuple[Any, ...], kwargs: dict[str, Any], where: str
) -> None:
    # Before: json.dumps writes "\ud800" (or "\u0000"), jsonb refuses the escape, and the
    # DataError's message carries the start of the statement - the arguments.
    with pytest.raises(DataError, match=r"invalid input syntax for type json|unsupported Unicode escape"):
        write_unchecked(list(args), kwargs)
    assert Job.objects.count() == 0

    message = refused(*args, **kwargs)
    assert message.startswith(where)
    assert PRIVATE not in message


def test_a_surrogate_pair_would_come_back_as_another_string() -> None:
    # Two surrogate code points are not an emoji to Python, but PostgreSQL joins their escapes into one.
    write_unchecked(["\ud83d\ude00"])
    assert claimed_arguments() == (["😀"], {})
    Job.objects.all().delete()
    assert "lone surrogate" in refused("\ud83d\ude00")


def test_valid_text_comes_back_unchanged() -> None:
    text = "héllo 😀 中文 \U0010ffff \ufffd \u2028"
    assert roundtrip(text, **{"clé": {"ключ": [text]}}) == ([text], {"clé": {"ключ": [text]}})


def test_a_surrogate_in_unique_key_is_invalid_before_the_database() -> None:
    # Before: psycopg could not encode the statement (UnicodeEncodeError, not even a DataError).
    with pytest.raises(UnicodeEncodeError):
        write_unchecked([], unique_key=f"{PRIVATE}\ud800")
    assert Job.objects.count() == 0

    with pytest.raises(InvalidJob, match=r"^unique_key contains a lone surrogate") as caught:
        jobs.record.using(unique_key=f"{PRIVATE}\ud800")
    assert PRIVATE not in str(caught.value)
    assert Job.objects.count() == 0


def test_non_ascii_unique_keys_still_deduplicate() -> None:
    first = jobs.record.using(unique_key="reçu-😀").enqueue("a")
    assert jobs.record.using(unique_key="reçu-😀").enqueue("b").pk == first.pk
    assert Job.objects.get().unique_key == "reçu-😀"


class TestIntegers:
    """jsonb keeps any integer exactly; the limit is a rule, set at 64 bits (docs/jobs.md#arguments)."""

    @pytest.mark.parametrize("number", [2**53 - 1, 2**53 + 1, INT_MAX, INT_MIN, -(2**53) - 1])
    def test_64_bit_integers_come_back_exactly(self, number: int) -> None:
        args, kwargs = roundtrip(number, [number], n={"n": number})
        assert (args, kwargs) == ([number, [number]], {"n": {"n": number}})
        assert type(args[0]) is int

    def test_they_fit_postgres_bigint(self) -> None:
        jobs.takes_anything.enqueue(INT_MAX, INT_MIN)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT (args->>0)::bigint, (args->>1)::bigint FROM {Job._meta.db_table}")
            assert cursor.fetchone() == (INT_MAX, INT_MIN)

    @pytest.mark.parametrize(
        "number",
        [2**63, INT_MIN - 1, 10**100, 10**1000, 10**100_000],
        ids=["2**63", "-2**63-1", "10**100", "10**1000", "10**100000"],
    )
    def test_larger_integers_are_refused_and_nothing_is_written(self, number: int) -> None:
        # Before: up to 4300 digits they were stored (and came back exactly); 10**100000 escaped
        # as Python's ValueError "Exceeds the limit (4300 digits) for integer string conversion".
        message = refused(key={"a": [number]})
        assert "keyword argument 'key'" in message
        assert "-9223372036854775808..9223372036854775807" in message

    def test_what_happens_beyond_64_bits_without_the_rule(self) -> None:
        write_unchecked([10**100, -(2**64), 10**4299])
        assert claimed_arguments() == ([10**100, -(2**64), 10**4299], {})
        Job.objects.all().delete()
        # Python will not write an int of more than 4300 digits as text (sys.int_info) ...
        with pytest.raises(ValueError, match="integer string conversion"):
            write_unchecked([10**5000])
        # ... and with that limit lifted, numeric refuses more than 131072 digits before the point.
        limit = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(0)
        try:
            with pytest.raises(DataError, match="value overflows numeric format"):
                write_unchecked([10**131072])
        finally:
            sys.set_int_max_str_digits(limit)


class TestFloats:
    @pytest.mark.parametrize("number", [0.1, 5e-324, -5e-324, 1e-300, 2.5e-8, 1.0, 9999999999999998.0, -1e15])
    def test_floats_below_1e16_come_back_equal_and_float(self, number: float) -> None:
        args, _ = roundtrip(number)
        assert args == [number]
        assert type(args[0]) is float

    def test_negative_zero_comes_back_as_zero(self) -> None:
        # numeric has no -0: equal under ==, but the sign is lost (documented).
        [back], _ = roundtrip(-0.0)
        assert back == 0.0
        assert math.copysign(1.0, back) == 1.0

    def test_postgres_turns_floats_from_1e16_into_integers(self) -> None:
        write_unchecked([1e16, 1e308, 1.7976931348623157e308])
        args, _ = claimed_arguments()
        assert [type(number) for number in args] == [int, int, int]
        assert args[0] == 1e16
        assert args[1] != 1e308  # 10**308 is not the float nearest to it
        assert args[2] != 1.7976931348623157e308

    @pytest.mark.parametrize("number", [1e16, -1e16, 1.2345678901234568e17, 1e308, -1.7976931348623157e308])
    def test_such_floats_are_refused_and_nothing_is_written(self, number: float) -> None:
        assert "float of magnitude 1e16 or more" in refused([1, number])


class TestDepth:
    @pytest.mark.parametrize("as_dict", [False, True])
    @pytest.mark.parametrize("max_depth", [32, 1000])
    def test_100000_levels_are_invalid_not_a_recursion_error(
        self, settings: Any, max_depth: int, as_dict: bool
    ) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "MAX_ARGS_DEPTH": max_depth}
        value: Any = "leaf"
        for _ in range(100_000):
            value = {"k": value} if as_dict else [value]
        assert f"nested deeper than {max_depth} levels" in refused(value)

    def test_the_deepest_allowed_arguments_reach_the_worker(self, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "MAX_ARGS_DEPTH": 1000}
        value: Any = "leaf"
        for level in range(999):
            value = {"k": value} if level % 2 else [value]
        assert roundtrip(value) == ([value], {})

    def test_a_cycle_is_invalid(self) -> None:
        loop: list[Any] = []
        loop.append({"again": loop})
        assert "nested deeper than 32 levels" in refused(loop)


@pytest.mark.timeout(20)
def test_shared_parts_are_refused_without_walking_them_all() -> None:
    value: Any = [0]
    for _ in range(30):
        value = [value, value]
    assert "hold more than 65536 values" in refused(value)


@pytest.mark.parametrize("bad", ["surrogate", "keyword-name"])
def test_bulk_enqueue_validates_the_same_way(bad: str) -> None:
    calls: list[tuple[Any, Any]] = [(("ok",), {}), ((f"{PRIVATE}\ud800",), {})]
    if bad == "keyword-name":
        calls = [(("ok",), {}), ((), {1: "a name that is not a string"})]
    with pytest.raises(InvalidJob) as caught:
        jobs.takes_anything.bulk_enqueue(calls)
    assert PRIVATE not in str(caught.value)
    assert Job.objects.count() == 0


WEST, EAST = timezone(timedelta(hours=-5)), timezone(timedelta(hours=5))
RUN_AFTER_OUT_OF_RANGE = [
    pytest.param(datetime.max.replace(tzinfo=WEST), id="datetime.max-west-of-utc"),
    pytest.param(datetime.min.replace(tzinfo=EAST), id="datetime.min-east-of-utc"),
    pytest.param(LATEST + timedelta(microseconds=1), id="just-after-the-range"),
    pytest.param(EARLIEST - timedelta(microseconds=1), id="just-before-the-range"),
    pytest.param(timedelta.max, id="timedelta.max"),
    pytest.param(timedelta.min, id="timedelta.min"),
    pytest.param(timedelta(days=3_000_000), id="8200-years-from-now"),
]
ENQUEUES: dict[str, Callable[[Any], Any]] = {
    "enqueue": lambda definition: definition.enqueue("x"),
    "bulk_enqueue": lambda definition: definition.bulk_enqueue([(("x",), {}), (("y",), {})]),
}


class TestRunAfter:
    """A run_after whose time Python cannot read back is refused before the INSERT (issue 17)."""

    @pytest.mark.parametrize("how", ENQUEUES)
    @pytest.mark.parametrize("run_after", RUN_AFTER_OUT_OF_RANGE)
    def test_out_of_range_is_invalid_before_the_database(self, run_after: Any, how: str) -> None:
        # Before: the row was inserted, then loading its run_at raised DataError ("timestamp too
        # large", or PostgreSQL's "timestamp out of range" for the delays).
        with pytest.raises(InvalidJob) as caught, connection.execute_wrapper(fail_on_any_query):
            ENQUEUES[how](jobs.takes_anything.using(run_after=run_after))
        given = "now plus this delay" if isinstance(run_after, timedelta) else "this time"
        assert str(caught.value) == (
            f"run_after {run_after!r} is out of range: {given} must be from 0001-01-02 to 9999-12-30 UTC"
        )
        assert Job.objects.count() == 0

    @pytest.mark.django_db(transaction=True)
    @pytest.mark.parametrize("how", ENQUEUES)
    def test_inside_atomic_no_ghost_job_commits_with_the_callers_transaction(self, how: str) -> None:
        # Before: the INSERT succeeded inside the caller's transaction before the DataError, so a
        # caller that went on (the enqueue "failed") committed the job along with its own work.
        with transaction.atomic():
            with pytest.raises(InvalidJob, match="run_after"):
                ENQUEUES[how](jobs.takes_anything.using(run_after=datetime.max.replace(tzinfo=WEST)))
            jobs.record.enqueue("the caller's own work")
        assert list(Job.objects.values_list("task_name", "args")) == [
            (jobs.record.name, ["the caller's own work"])
        ]

    @pytest.mark.parametrize(
        "run_after",
        [LATEST, EARLIEST, EARLIEST.astimezone(EAST), timedelta(days=-365)],
        ids=["latest", "earliest", "earliest-east-of-utc", "a-year-ago"],
    )
    def test_the_ends_of_the_range_are_stored_and_read_back(self, run_after: Any) -> None:
        job = jobs.takes_anything.using(run_after=run_after).enqueue("x")
        stored = Job.objects.get(pk=job.pk).run_at
        if isinstance(run_after, datetime):
            assert stored == run_after == job.run_at
        else:
            assert stored < datetime.now(UTC)
