"""instants.check_json: what jsonb refuses is refused before any query, without recursion (issue 35)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from django_jobretry.exceptions import InvalidJob
from django_jobretry.models.instants import check_json


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('"a\\u0000"', "the value contains a NUL character"),
        ('{"k": ["\\ud800"]}', "the value contains a lone surrogate"),
        ('{"\\udc80": 1}', "a key in the value contains a lone surrogate"),
        ("[NaN]", "holds nan"),
        ('{"k": -Infinity}', "holds -inf"),
        ("1e400", "holds inf"),
        ("[" * 5 + "]" * 5, "nested deeper than 4 levels"),
    ],
)
def test_what_jsonb_refuses_is_refused_naming_the_subject(text: str, said: str) -> None:
    with pytest.raises(InvalidJob, match=said):
        check_json("the value", json.loads(text), max_depth=4)


@pytest.mark.parametrize("value", [[[["leaf"]]], {"a": {"b": {"c": []}}}, 1e300, "é\u2028", None, [[[[]]]]])
def test_what_jsonb_takes_passes(value: Any) -> None:
    check_json("the value", value, max_depth=4)


def test_a_value_nested_far_past_the_recursion_limit_is_refused_not_a_recursion_error() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(InvalidJob, match="nested deeper than 32 levels"):
        check_json("the value", value, max_depth=32)
