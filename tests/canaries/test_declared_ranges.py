"""The version ranges pyproject.toml declares are the ones CI tests, at both ends.

The full suites run on the newest Django and django-q2 and on Django 5.2
(noxfile.py ``tests``); ``make versions`` (noxfile.py ``UPSTREAM``) runs the
oldest django-q2 and Django 6.0. A range widened or narrowed in one place
and not the other fails here.
"""

from __future__ import annotations

import re
import tomllib

from tests.processes import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
NOXFILE = (ROOT / "noxfile.py").read_text()


def declared(name: str) -> tuple[str, str]:
    """The (lower, upper) bounds of ``name`` in the project's dependencies and its django-q2 extra."""
    found = {
        spec
        for spec in [
            *PYPROJECT["project"]["dependencies"],
            *PYPROJECT["project"]["optional-dependencies"]["django-q2"],
        ]
        if re.match(rf"{re.escape(name)}\s*[<>=]", spec)
    }
    assert len(found) == 1, found
    match = re.fullmatch(rf"{re.escape(name)}>=([\d.]+),<([\d.]+)", found.pop().replace(" ", ""))
    assert match, found
    return match.group(1), match.group(2)


def test_the_oldest_django_declared_gets_the_full_suite_and_the_newest_is_the_default() -> None:
    lower, upper = declared("django")
    series = re.search(r'@nox\.parametrize\("django", \[([^]]*)\]\)', NOXFILE)
    assert series, "noxfile.py's tests session lists no Django series"
    tested = re.findall(r'"([\d.]+)"', series.group(1))
    assert tested[0] == lower, (tested, lower)
    newest = re.search(r"^NEWEST_DJANGO := ([\d.]+)$", (ROOT / "Makefile").read_text(), re.M)
    assert newest, "the Makefile names no NEWEST_DJANGO"
    assert newest.group(1) == tested[-1], (newest.group(1), tested)
    major, minor = map(int, upper.split("."))
    assert f"{major}.{minor - 1}" == tested[-1], (
        f"pyproject allows Django < {upper}; the newest tested is {tested[-1]}"
    )


def test_the_oldest_django_q2_declared_is_the_one_make_versions_installs() -> None:
    lower, upper = declared("django-q2")
    pinned = re.findall(r'"django-q2==([\d.]+)"', NOXFILE)
    assert len(pinned) == 1, pinned
    assert pinned[0].startswith(f"{lower}."), (
        f"pyproject allows django-q2 >= {lower}; make versions runs {pinned[0]}"
    )
    assert upper == "2", upper
    assert '"django-6.0": ("6.0"' in NOXFILE, "the task backend's oldest Django (6.0) has no pass"
