"""Hostile values at the enqueue boundary, checked without a database (issue 8).

Validation is pure: each of these raises InvalidJob naming the argument and
what is allowed, never the value (it may be a secret), and never a
RecursionError, a ValueError from Python's int-to-text limit or an endless
walk. What PostgreSQL itself does with them is in
tests/integration/jobs/test_enqueue_hostile.py.
"""

from __future__ import annotations

import json
import re
from collections import deque
from types import MappingProxyType
from typing import Any

import pytest

from django_jobretry.exceptions import InvalidJob
from django_jobretry.validation import (
    INT_MAX,
    INT_MIN,
    check_queue_name,
    check_result_shape,
    check_task_name,
    check_unique_key,
    encode_arguments,
)

PRIVATE = "hunter2"  # stands for a secret in an argument: never in a message


def check(*args: Any, max_depth: int = 32, max_bytes: int = 65_536, **kwargs: Any) -> tuple[Any, Any]:
    return encode_arguments("t", args, kwargs, max_bytes=max_bytes, max_depth=max_depth)[:2]


def refused(*args: Any, max_depth: int = 32, max_bytes: int = 65_536, **kwargs: Any) -> str:
    with pytest.raises(InvalidJob) as caught:
        check(*args, max_depth=max_depth, max_bytes=max_bytes, **kwargs)
    return str(caught.value)


def nested(depth: int, *, as_dict: bool = False) -> Any:
    """A value `depth` levels deep (the outermost container is level 1)."""
    value: Any = "leaf"
    for _ in range(depth - 1):
        value = {"k": value} if as_dict else [value]
    return value


class TestLoneSurrogates:
    @pytest.mark.parametrize(
        ("args", "kwargs", "where"),
        [
            ((f"{PRIVATE}\ud800",), {}, "positional argument 0"),
            (("ok", [1, {"a": [f"{PRIVATE}\udfff"]}]), {}, "positional argument 1"),
            (({f"{PRIVATE}\ud800": 1},), {}, "a dict key in positional argument 0"),
            (({"a": {"b": f"\udc80{PRIVATE}"}},), {}, "positional argument 0"),
            ((), {"token": f"{PRIVATE}\ud800"}, "keyword argument 'token'"),
            ((), {"ok": 1, f"{PRIVATE}\ud800": 1}, "the name of keyword argument 1 "),
            # A surrogate pair is two code points in Python, not one character: PostgreSQL would
            # join them into one emoji and the handler would get something else.
            (("\ud83d\ude00",), {}, "positional argument 0"),
        ],
    )
    def test_refused_naming_the_argument_not_the_value(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], where: str
    ) -> None:
        message = refused(*args, **kwargs)
        assert message.startswith(where)
        assert "lone surrogate (a code point from U+D800 to U+DFFF)" in message
        assert "pass valid text" in message
        assert PRIVATE not in message
        assert "\\ud" not in message.lower()
        assert not re.search(r"[\ud800-\udfff]", message)

    def test_valid_non_ascii_text_is_kept(self) -> None:
        text = "héllo 😀 中文 \U0010ffff \ufffd"
        kwargs = {"clé": {"ключ": text}}
        assert encode_arguments("t", (text,), kwargs, max_bytes=1000, max_depth=32)[:2] == ([text], kwargs)

    @pytest.mark.parametrize("key", [f"{PRIVATE}\ud800", "\ud83d\ude00", f"{PRIVATE}\x00"])
    def test_unique_key(self, key: str) -> None:
        with pytest.raises(InvalidJob, match=r"^unique_key contains a (lone surrogate|NUL)") as caught:
            check_unique_key(key)
        assert PRIVATE not in str(caught.value)

    def test_unique_key_other_messages_are_unchanged(self) -> None:
        with pytest.raises(
            InvalidJob, match="unique_key '' is invalid: a string of 1-200 characters, or None"
        ):
            check_unique_key("")
        assert check_unique_key("héllo-😀") == "héllo-😀"

    @pytest.mark.parametrize("check_name", [check_task_name, check_queue_name])
    @pytest.mark.parametrize("name", ["jobs\ud800", "jobs\n", "jobs\x00", "jobs\u0661"])
    def test_task_and_queue_names_are_ascii_only(self, check_name: Any, name: str) -> None:
        # "$" in the old patterns also matched before a trailing newline.
        with pytest.raises(InvalidJob, match="is invalid: use 1-"):
            check_name(name)


class TestKeywordNames:
    def test_a_nul_in_a_name(self) -> None:
        message = refused(**{f"{PRIVATE}\x00": 1})
        assert message.startswith(
            "the name of keyword argument 0 (counting from 0) of task 't' contains a NUL"
        )
        assert PRIVATE not in message

    def test_a_name_that_is_not_a_string(self) -> None:
        # Only reachable through bulk_enqueue's (args, kwargs) pairs or the service itself.
        with pytest.raises(
            InvalidJob, match=r"keyword argument name 1 of task 't' is a int; .* must be strings"
        ):
            encode_arguments("t", (), {1: "x"}, max_bytes=1000, max_depth=32)  # type: ignore[dict-item]


class TestIntegers:
    @pytest.mark.parametrize("number", [0, -1, 2**53 - 1, 2**53 + 1, -(2**53) - 1, INT_MAX, INT_MIN, True])
    def test_64_bit_integers_are_kept(self, number: int) -> None:
        args, _ = check([number], n=number)
        assert args == [[number]]
        assert type(args[0][0]) is type(number)

    @pytest.mark.parametrize(
        "number",
        [INT_MAX + 1, INT_MIN - 1, 2**64, 10**100, -(10**1000), 10**5000, 10**100_000],
        ids=["2**63", "-2**63-1", "2**64", "10**100", "-10**1000", "10**5000", "10**100000"],
    )
    def test_larger_integers_are_refused_with_the_range(self, number: int) -> None:
        # 10**5000 used to escape as a ValueError: Python refuses to write ints over 4300 digits.
        message = refused(1, {"a": [number]})
        assert message == (
            "positional argument 1 of task 't' contains an integer outside "
            "-9223372036854775808..9223372036854775807 (a signed 64-bit integer, PostgreSQL's bigint); "
            "pass a larger number as a string"
        )

    def test_named_when_a_keyword_argument(self) -> None:
        assert refused(amount=2**63).startswith("keyword argument 'amount' of task 't' contains an integer")


class TestFloats:
    @pytest.mark.parametrize("number", [0.0, -0.0, 0.1, 5e-324, -5e-324, 1e-300, 9999999999999998.0, -1e15])
    def test_floats_below_1e16_are_kept(self, number: float) -> None:
        args, _ = check(number)
        assert args == [number]
        assert isinstance(args[0], float)

    @pytest.mark.parametrize("number", [1e16, -1e16, 1.2345678901234568e17, 1e308, -1.7976931348623157e308])
    def test_floats_jsonb_turns_into_integers_are_refused(self, number: float) -> None:
        message = refused([number])
        assert message.startswith("positional argument 0 of task 't' contains a float of magnitude 1e16")
        assert "pass it as a string, or as an int" in message

    def test_nan_message_is_unchanged(self) -> None:
        assert (
            refused(x=float("-inf"))
            == "keyword argument 'x' of task 't' is -inf; JSON has no NaN or infinity"
        )


class TestDepth:
    @pytest.mark.parametrize("max_depth", [32, 1000])
    @pytest.mark.parametrize("as_dict", [False, True])
    def test_100000_levels_are_invalid_not_a_recursion_error(self, max_depth: int, as_dict: bool) -> None:
        message = refused(nested(100_000, as_dict=as_dict), max_depth=max_depth, max_bytes=16 * 1024 * 1024)
        assert message == (
            f"positional argument 0 of task 't' is nested deeper than {max_depth} levels (MAX_ARGS_DEPTH)"
        )

    def test_exactly_the_limit_is_accepted_even_at_1000(self) -> None:
        # The largest MAX_ARGS_DEPTH the settings allow; the old recursive check hit RecursionError here.
        for as_dict in (False, True):
            value = nested(1000, as_dict=as_dict)
            assert check(value, max_depth=1000)[0] == [value]
            refused(nested(1001, as_dict=as_dict), max_depth=1000)

    def test_keys_and_values_of_a_dict_are_one_level_deeper(self) -> None:
        assert check({"a": 1}, [], {}, max_depth=2)[0] == [{"a": 1}, [], {}]
        assert check([{}], max_depth=2)[0] == [[{}]]
        for deep in ([{"a": 1}], [["a"]], {"a": {"b": 1}}, {"a": ["b"]}):
            assert "nested deeper than 2 levels" in refused(deep, max_depth=2)

    def test_a_list_that_contains_itself(self) -> None:
        loop: list[Any] = []
        loop.append(loop)
        assert "nested deeper than 32 levels" in refused(x=loop)

    def test_a_dict_that_contains_itself(self) -> None:
        loop: dict[str, Any] = {}
        loop["self"] = loop
        assert "nested deeper than 32 levels" in refused(loop)


class TestSize:
    @pytest.mark.timeout(10)
    def test_shared_parts_are_not_walked_forever(self) -> None:
        # 2**30 leaves, 31 levels: the walk stops once it has seen more values than bytes allowed.
        value: Any = [0]
        for _ in range(30):
            value = [value, value]
        assert refused(value) == (
            "arguments of task 't' hold more than 65536 values, so more than 65536 bytes as JSON; the limit "
            "is 65536 (JOBRETRY['MAX_ARGS_BYTES']). Pass an id and load the data in the job instead."
        )

    def test_dict_keys_count_as_values(self) -> None:
        assert "hold more than 100 values" in refused({str(i): None for i in range(51)}, max_bytes=100)

    def test_the_exact_size_message_is_unchanged(self) -> None:
        assert refused("x" * 2000, max_bytes=1024) == (
            "arguments of task 't' are 2009 bytes as JSON; the limit is 1024 (JOBRETRY['MAX_ARGS_BYTES']). "
            "Pass an id and load the data in the job instead."
        )

    def test_the_limit_counts_the_pair_as_one_json_array(self) -> None:
        """[args,kwargs] as compact JSON: exactly at the limit passes, one byte over is refused."""
        args, kwargs = ("é" * 10, [1, None]), {"k": {"n": 2.5}}
        size = len(json.dumps([list(args), kwargs], separators=(",", ":")).encode())
        fits = encode_arguments("t", args, kwargs, max_bytes=size, max_depth=32)
        assert (fits.args, fits.kwargs) == (["é" * 10, [1, None]], {"k": {"n": 2.5}})
        with pytest.raises(InvalidJob, match=f"are {size} bytes as JSON"):
            encode_arguments("t", args, kwargs, max_bytes=size - 1, max_depth=32)

    def test_the_text_bound_is_the_text_the_copies_come_from(self) -> None:
        checked = encode_arguments("t", ((1, 2), "ü"), {"b": (True,)}, max_bytes=1000, max_depth=32)
        assert (json.loads(checked.args_json), json.loads(checked.kwargs_json)) == (
            checked.args,
            checked.kwargs,
        )
        assert (checked.args, checked.kwargs) == ([[1, 2], "ü"], {"b": [True]})


def deep(wrap: Any, levels: int = 5000) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = wrap(value)
    return value


class TestResultShape:
    """A result's depth and size, before Django's recursive conversion walks any Mapping or Sequence."""

    @staticmethod
    def shape_refused(value: Any, max_depth: int = 32, max_bytes: int = 65_536) -> str:
        with pytest.raises(InvalidJob) as caught:
            check_result_shape("t", value, max_bytes=max_bytes, max_depth=max_depth)
        return str(caught.value)

    @pytest.mark.parametrize(
        "value",
        [
            pytest.param(lambda: deep(lambda inner: deque([inner])), id="deque"),
            pytest.param(lambda: deep(lambda inner: MappingProxyType({"k": inner})), id="proxy"),
            # normalize_json converts dict keys too: a key can be a deep tuple.
            pytest.param(lambda: {deep(lambda inner: (inner,)): 1}, id="in-a-key"),
        ],
    )
    def test_any_container_django_converts_counts_a_level(self, value: Any) -> None:
        assert self.shape_refused(value()) == (
            "the return value of task 't' is nested deeper than 32 levels (MAX_ARGS_DEPTH)"
        )

    def test_leaves_are_left_to_the_full_check_after_conversion(self) -> None:
        # bytes (Django decodes them), sets (Django refuses them) and NaN are not its concern.
        leaves = [b"raw", {1, 2}, float("nan"), {1: "non-string key"}]
        check_result_shape("t", leaves, max_bytes=64, max_depth=3)

    def test_shared_parts_are_counted_not_converted(self) -> None:
        value: Any = (0,)
        for _ in range(30):
            value = (value, value)
        assert "the return value of task 't' hold more than 65536 values" in self.shape_refused(value)
