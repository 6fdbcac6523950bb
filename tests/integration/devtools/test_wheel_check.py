"""devtools.wheel_check names every package file a wheel lacks, data files first among them.

The real build, install and demo run in CI (`make wheel-check`, a couple of
minutes with a fresh venv); here wheels are zipped from the checkout's own
package files, so the comparison is judged in milliseconds, with and without
the files a wheel most easily loses.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from devtools.wheel_check import PACKAGE, REQUIRED, ROOT, missing_from


def _package_files() -> list[str]:
    return sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / PACKAGE).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


def _wheel(where: Path, names: list[str]) -> Path:
    wheel = where / "django_jobretry-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in names:
            archive.writestr(name, "")
        archive.writestr("django_jobretry-0.dist-info/RECORD", "")
    return wheel


def test_a_wheel_of_every_package_file_lacks_nothing(tmp_path):
    assert missing_from(_wheel(tmp_path, _package_files())) == []


@pytest.mark.parametrize("lost", REQUIRED)
def test_a_lost_data_file_is_named(tmp_path, lost):
    files = [name for name in _package_files() if name != lost]

    assert missing_from(_wheel(tmp_path, files)) == [lost]


def test_a_lost_directory_names_each_of_its_files(tmp_path):
    files = _package_files()
    templates = [name for name in files if name.startswith(f"{PACKAGE}/templates/")]
    migrations = [name for name in files if name.startswith(f"{PACKAGE}/migrations/")]

    missing = missing_from(_wheel(tmp_path, [name for name in files if name not in templates]))
    assert missing == templates
    assert len(templates) > 20
    assert len(migrations) > 30
    assert missing_from(_wheel(tmp_path, [name for name in files if name not in migrations])) == migrations
