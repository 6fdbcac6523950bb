"""A key from ``unique_args`` is a function of the bound values of those arguments, nothing else.

However a call is written (positional, keyword, a default left out), two
calls that bind the named arguments to equal values take one key, and
calls that bind them differently take different keys. The property runs
against the real key and against a deliberately broken one (the negative
control: the key of the call as written), which it must reject.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_jobretry.conf.uniqueness import Uniqueness

type KeyOf = Callable[[tuple[Any, ...], dict[str, Any]], str | None]

#: One failure per run: the negative control expects an AssertionError, not an ExceptionGroup.
PROPERTY = settings(max_examples=300, deadline=None, report_multiple_bugs=False)
VALUES = st.one_of(
    st.integers(), st.text(max_size=30), st.booleans(), st.none(), st.lists(st.integers(), max_size=3)
)


def send(order_id: Any, copy: Any = "customer", *, note: Any = "") -> None:
    """The task: keyed by order and copy; the note is not part of the key."""


UNIQUE = Uniqueness(args=("order_id", "copy"))


def real_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    return UNIQUE.key_for("app.send", send, args, kwargs)


def as_written_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Broken on purpose: the call as written, not as bound."""
    return f"app.send:{args!r}:{sorted(kwargs.items())!r}"


@st.composite
def calls(draw: st.DrawFn, order_id: Any, copy: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """One way of writing ``send(order_id, copy)`` with some note: positional, keyword or by default."""
    note = {"note": draw(VALUES)} if draw(st.booleans()) else {}
    styles = ["positional", "keywords", "mixed"] + (["default"] if copy == "customer" else [])
    style = draw(st.sampled_from(styles))
    if style == "positional":
        return (order_id, copy), note
    if style == "keywords":
        return (), {"order_id": order_id, "copy": copy, **note}
    if style == "mixed":
        return (order_id,), {"copy": copy, **note}
    return (order_id,), note


def check_keys(key_of: KeyOf, data: st.DataObject) -> None:
    first, second = data.draw(VALUES), data.draw(VALUES)
    copies = data.draw(
        st.sampled_from([("customer", "customer"), ("customer", "office"), ("office", "office")])
    )
    one = data.draw(calls(first, copies[0]))
    other = data.draw(calls(second, copies[1]))
    same = json.dumps([first, copies[0]]) == json.dumps([second, copies[1]])  # values as stored
    assert (key_of(*one) == key_of(*other)) is same, (one, other)


@PROPERTY
@given(st.data())
def test_the_key_depends_on_the_bound_values_only(data: st.DataObject) -> None:
    check_keys(real_key, data)


def test_negative_control_the_call_as_written_is_caught() -> None:
    @PROPERTY
    @given(st.data())
    def broken(data: st.DataObject) -> None:
        check_keys(as_written_key, data)

    with pytest.raises(AssertionError):
        broken()
