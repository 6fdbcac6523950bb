"""The harness running the upstream task tests on our backend (devtools/upstream_contract.py).

`make versions` runs the upstream tests themselves; these check the harness's own decisions: the
test files come out of an sdist byte for byte, an exclusion covers what it names and nothing more,
and the substitution swaps DummyBackend alone. Django 6+ only (tests/conftest.py).
"""

from __future__ import annotations

import io
import tarfile
import unittest
from pathlib import Path
from typing import Any

import pytest
from django.test import SimpleTestCase, override_settings

from devtools import upstream_selection as selection
from devtools.upstream_contract import each_test, extract


def sdist(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"django-9.9/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_extract_copies_the_named_files_byte_for_byte_and_nothing_else(tmp_path: Path) -> None:
    test_file = b"class T:\r\n    x = '\xc3\xa9'\n\n"  # CRLF, UTF-8, a trailing blank line: kept as they are
    archive = sdist(
        tmp_path / "django-9.9.tar.gz",
        {"tests/tasks/test_x.py": test_file, "tests/tasks/tasks.py": b"t", "tests/other/test_y.py": b"y"},
    )
    extract(archive, {"tests/tasks/": "tasks/"}, tmp_path / "out")
    out = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.py"))
    assert out == ["tasks/tasks.py", "tasks/test_x.py"]
    assert (tmp_path / "out" / "tasks" / "test_x.py").read_bytes() == test_file


def test_extract_refuses_a_member_that_would_land_outside_its_folder(tmp_path: Path) -> None:
    archive = sdist(tmp_path / "django-9.9.tar.gz", {"tests/tasks/../../../escaped.py": b"x"})
    with pytest.raises(
        ValueError, match=r"'django-9\.9/tests/tasks/\.\./\.\./\.\./escaped\.py' would land outside"
    ):
        extract(archive, {"tests/tasks/": "tasks/"}, tmp_path / "out")
    assert list(tmp_path.rglob("escaped.py")) == []


@pytest.mark.parametrize(
    ("test_id", "key"),
    [
        pytest.param(
            "tests.tests.DatabaseBackendWorkerTestCase.test_run_after_priority",
            "tests.tests.DatabaseBackendWorkerTestCase.test_run_after_priority",
            id="a-test-listed-alone-shows-its-own-reason",
        ),
        pytest.param(
            "tests.tests.DatabaseBackendWorkerTestCase.test_run_after",
            "tests.tests.DatabaseBackendWorkerTestCase",
            id="a-class-covers-its-tests",
        ),
        pytest.param(
            "tasks.test_immediate_backend.ImmediateBackendTestCase.test_result",
            "tasks.test_immediate_backend",
            id="a-module-covers-its-tests",
        ),
        pytest.param(
            "tasks.test_tasks.TaskTestCase.test_enqueue_task_asyncio", None, id="not-a-prefix-of-a-name"
        ),
        pytest.param("tasks.test_tasks.TaskTestCase.test_get_result", None, id="not-listed"),
    ],
)
def test_an_exclusion_covers_the_test_its_class_or_its_module_and_nothing_more(
    test_id: str, key: str | None
) -> None:
    found = selection.excluded_because(test_id)
    assert (found[0] if found else None) == key
    if found:
        assert found[1] == selection.EXCLUDED[key]


def test_no_required_test_is_excluded() -> None:
    assert [test for test in selection.REQUIRED if selection.excluded_because(test)] == []


@override_settings(
    TASKS={
        "default": {"BACKEND": selection.DUMMY, "QUEUES": ["default", "queue_1"]},
        "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend", "QUEUES": []},
    },
    USE_TZ=True,
)
class PinsDummy(SimpleTestCase):
    __test__ = False  # a specimen for the substitution, not a test of this suite

    def test_nothing(self) -> None:
        pass


@override_settings(TASKS={"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}})
class PinsImmediate(SimpleTestCase):
    __test__ = False

    def test_nothing(self) -> None:
        pass


def overridden(cls: type[SimpleTestCase]) -> dict[str, Any]:
    """What the class-level override_settings holds (django-stubs does not declare it)."""
    return cls.__dict__["_overridden_settings"]  # type: ignore[no-any-return]


def substituted(monkeypatch: pytest.MonkeyPatch, cls: type[SimpleTestCase]) -> Any:
    monkeypatch.setattr(selection, "SUBSTITUTED", (f"{cls.__module__}.{cls.__qualname__}",))
    monkeypatch.setattr(cls, "_overridden_settings", overridden(cls))  # undone after the test
    monkeypatch.setattr(cls, "databases", cls.databases)
    return cls


def test_the_substitution_swaps_the_default_backend_alone_and_opens_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cls = substituted(monkeypatch, PinsDummy)
    selection.substitute(cls("test_nothing"))
    selection.substitute(cls("test_nothing"))  # the class's second test: already done
    assert overridden(cls) == {
        "TASKS": {
            "default": {"BACKEND": selection.CONTRACT_BACKEND, "QUEUES": ["default", "queue_1"]},
            "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend", "QUEUES": []},
        },
        "USE_TZ": True,
    }
    assert cls.databases == {"default"}


def test_a_listed_class_that_no_longer_pins_dummybackend_stops_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cls = substituted(monkeypatch, PinsImmediate)
    with pytest.raises(
        RuntimeError, match=r"PinsImmediate no longer pins .*DummyBackend: review SUBSTITUTED"
    ):
        selection.substitute(cls("test_nothing"))


def test_a_class_not_listed_is_left_alone() -> None:
    before = dict(overridden(PinsDummy))
    selection.substitute(PinsDummy("test_nothing"))
    assert (overridden(PinsDummy), PinsDummy.databases) == (before, set())


def test_each_test_flattens_suites_of_suites_in_order() -> None:
    first, second, third = PinsDummy("test_nothing"), PinsImmediate("test_nothing"), PinsDummy("test_nothing")
    suite = unittest.TestSuite([unittest.TestSuite([first, unittest.TestSuite([second])]), third])
    assert list(each_test(suite)) == [first, second, third]
