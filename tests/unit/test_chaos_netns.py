"""`make chaos-netns` where it cannot run: one clear line on stderr, exit 2, nothing started."""

from __future__ import annotations

import os
import shutil

import pytest

from chaos import netns
from chaos.run import main


def test_without_root_the_namespace_variant_says_why_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)

    assert main(["--size", "partition", "--netns"]) == 2

    out, err = capsys.readouterr()
    assert (out, err) == (
        "",
        "chaos --netns: needs root (network namespaces and veth pairs); "
        "`make chaos-partition` needs neither\n",
    )


def test_without_ip_the_namespace_variant_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: None)

    assert netns.unavailable() == "needs the ip command (iproute2)"
