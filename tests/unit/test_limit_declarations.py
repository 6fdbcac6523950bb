"""Limit declarations: what each means, and a clear error naming the field for each bad one."""

from __future__ import annotations

from typing import Any

import pytest

from django_jobretry import job
from django_jobretry.limits import check_queue_limits, check_task_limit_keys, declare_task
from django_jobretry.policy.limits import MAX_KEY_CHARS, InvalidLimit, Limit, Rate, fill_key, window_bound


def test_a_rate_reads_count_and_period_with_a_burst_of_one_unless_given() -> None:
    assert Rate.parse("x", "100/m") == Rate(100, 60.0, 1)
    assert Rate.parse("x", " 60 / s ", 5) == Rate(60, 1.0, 5)
    assert Rate.parse("x", "60/s").per_second == 60
    assert window_bound(Rate(60, 1.0, 1), 1.0) == 61


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"rate": "100/d"}, "rate '100/d' is invalid: write it as 'N/s', 'N/m' or 'N/h'"),
        ({"rate": "0/s"}, "rate '0/s' is invalid"),
        ({"rate": 5}, "rate 5 is invalid"),
        ({"concurrency": 0}, "concurrency=0 is invalid: an integer from 1 to 100,000"),
        ({"concurrency": True}, "concurrency=True is invalid"),
        ({"concurrency": "3"}, "concurrency='3' is invalid"),
        ({"concurrency_key": "tenant:{tenant_id}"}, "needs concurrency=N"),
        ({"concurrency": 1, "concurrency_key": "tenant"}, "names no argument"),
        ({"concurrency": 1, "concurrency_key": "{t.id}"}, "'{t.id}' is not allowed"),
        ({"concurrency": 1, "concurrency_key": "{t!r}"}, "'{t}' is not allowed"),
        ({"concurrency": 1, "concurrency_key": "{t:>9}"}, "'{t}' is not allowed"),
        ({"concurrency": 1, "concurrency_key": "{"}, "is not a template"),
        ({"burst": 3}, "burst=3 needs a rate"),
        ({"rate": "1/s", "burst": 0}, "burst=0 is invalid"),
    ],
)
def test_a_bad_declaration_names_where_which_field_and_what_is_allowed(
    options: dict[str, object], says: str
) -> None:
    with pytest.raises(InvalidLimit) as caught:
        Limit.declare("@job app.sync", **options)
    assert str(caught.value).startswith("@job app.sync: ")
    assert says in str(caught.value)


def test_nothing_declared_is_no_limit() -> None:
    assert Limit.declare("x") is None


def test_a_key_is_filled_in_from_the_arguments_and_bounded() -> None:
    assert fill_key("tenant:{tenant_id}/{kind}", {"tenant_id": 42, "kind": "sync"}) == "tenant:42/sync"
    with pytest.raises(InvalidLimit, match="names 'kind', which this call does not pass"):
        fill_key("{kind}", {})
    with pytest.raises(InvalidLimit, match=f"at most {MAX_KEY_CHARS}"):
        fill_key("{v}", {"v": "x" * (MAX_KEY_CHARS + 1)})


def test_job_refuses_a_key_naming_an_argument_the_function_does_not_take() -> None:
    with pytest.raises(InvalidLimit, match="names 'tenant_id', which sync\\(\\) does not take"):

        @job(name="tests.unit.limits.sync", concurrency=1, concurrency_key="tenant:{tenant_id}")
        def sync(customer_id: int) -> None: ...


def test_check_e050_names_each_bad_queue_limit(settings: Any) -> None:
    settings.JOBRETRY = {
        **settings.JOBRETRY,
        "QUEUE_LIMITS": {"partner": {"concurrency": 0}, "mail": {"rate": "9/d"}, "ok": {"concurrency": 2}},
    }
    errors = check_queue_limits()
    assert [error.id for error in errors] == ["django_jobretry.E050", "django_jobretry.E050"]
    assert "JOBRETRY[\"QUEUE_LIMITS\"]['partner']: concurrency=0 is invalid" in errors[0].msg
    assert "['mail']: rate '9/d' is invalid" in errors[1].msg


def test_check_e051_names_a_key_argument_the_task_does_not_take() -> None:
    def sync(customer_id: int) -> None: ...

    definition = job(name="tests.unit.limits.e051")(sync)
    declare_task(definition.name, Limit(1, "tenant:{tenant_id}"))
    try:
        errors = [error for error in check_task_limit_keys() if definition.name in error.msg]
    finally:
        declare_task(definition.name, None)
    assert [error.id for error in errors] == ["django_jobretry.E051"]
    assert "names 'tenant_id', which sync() does not take" in errors[0].msg
