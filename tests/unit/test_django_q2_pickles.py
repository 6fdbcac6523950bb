"""The import's unpickler builds plain data and refuses everything else before it is called."""

from __future__ import annotations

import base64
import datetime
import os
import pickle
import uuid
import zoneinfo
from decimal import Decimal

import pytest

from django_jobretry.contrib.django_q2.failure_rows import NotPlainData, plain_data


def column(value: object, protocol: int = pickle.HIGHEST_PROTOCOL) -> str:
    """``value`` as picklefield stores it: base64 text of the pickle."""
    return base64.b64encode(pickle.dumps(value, protocol=protocol)).decode()


def raw(opcodes: bytes) -> str:
    return base64.b64encode(opcodes).decode()


PLAIN = (
    None,
    True,
    -(10**30),
    1.5,
    2j,
    "text \udcff",
    b"\x00bytes",
    bytearray(b"ba"),
    [1, [2]],
    {"k": {1, 2}, "f": frozenset({3})},
    datetime.datetime(2025, 1, 31, 8, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    datetime.datetime(2025, 1, 31, 8, tzinfo=datetime.UTC),
    datetime.date(2025, 1, 31),
    datetime.time(8, 30),
    datetime.timedelta(days=2),
    Decimal("1.50"),
    uuid.UUID("12345678123456781234567812345678"),
)


@pytest.mark.parametrize("protocol", [3, 4, 5])
def test_plain_values_load_as_themselves(protocol: int) -> None:
    assert plain_data(column((PLAIN,), protocol)) == (PLAIN,)
    assert plain_data(None) is None


class Runs:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, ("true",)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (column(Runs()), "it refers to posix.system, which is not plain data"),
        (raw(b"cos\nsystem\n(S'true'\ntR."), "it refers to os.system, which is not plain data"),
        (raw(b"cbuiltins\ngetattr\n(cdatetime\ndatetime\nS'now'\ntR."), "looks up an attribute"),
        (raw(b"cbuiltins\nbytearray\n(I1000000000000\ntR."), "builds a bytearray from something other"),
        (column(ValueError("x")), "it refers to builtins.ValueError, which is not plain data"),
        (column([set]), "it holds a type, which is not plain data"),
        (raw(b"cbuiltins\ngetattr\n."), "it holds a function, which is not plain data"),
        (raw(b"c\x1b[2Jx\ny\n."), "it refers to \\x1b[2Jx.y, which"),  # no terminal codes in the reason
        ("gASVnotapickle", "not base64"),
        (raw(b"\x80\x05\x95"), "it is not a readable pickle of plain data"),
    ],
    ids=["reduce", "global", "getattr", "bytearray", "class", "type", "function", "escapes", "text", "cut"],
)
def test_anything_else_is_refused_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(NotPlainData) as info:
        plain_data(text)
    assert why in str(info.value)
