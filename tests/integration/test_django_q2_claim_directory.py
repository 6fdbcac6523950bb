"""The django-q2 claim directory is private: made 0700 by us, refused when anyone else could use it.

Its name is predictable in the shared temporary directory, so another user
can create it first. Each test points the temporary directory at its own
``tmp_path`` and prepares the claim directory as such a user would leave it;
a real worker hook then starts a task.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from django_q.models import OrmQ
from django_q.signing import SignedPackage
from django_q.tasks import async_task

from django_jobretry.contrib.django_q2 import claims, hooks
from django_jobretry.contrib.django_q2.checks import check_django_q2
from django_jobretry.models import DeadLetter
from tests.jobs_app import q2_tasks

pytestmark = pytest.mark.django_db
NOBODY = 65534


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The claim directory's path, under a temporary directory of this test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(claims, "_paths", {})
    return claims.directory()


def start_a_task() -> dict[str, Any]:
    """pre_execute of one queued task, as a worker runs it; the claim is written if it can be."""
    async_task("tests.jobs_app.q2_tasks.always_fail", "c")
    row = OrmQ.objects.get()
    OrmQ.objects.filter(pk=row.pk).update(lock=timezone.now() + timedelta(seconds=6))
    task: dict[str, Any] = {**SignedPackage.loads(row.payload), "ack_id": row.pk}
    hooks.on_pre_execute("django_q", func=q2_tasks.always_fail, task=task)
    return task


def test_the_directory_is_created_private(place: Path) -> None:
    start_a_task()
    mode = os.lstat(place).st_mode
    assert (stat.S_ISDIR(mode), stat.S_IMODE(mode), os.lstat(place).st_uid) == (True, 0o700, os.geteuid())
    assert [p.name for p in place.iterdir()] == [f"{os.getpid()}.claim"]
    claims.release()
    assert list(place.iterdir()) == []
    assert check_django_q2() == []


def world_writable(place: Path) -> None:
    place.mkdir()
    place.chmod(0o777)


def foreign(place: Path) -> None:
    place.mkdir(mode=0o700)
    os.chown(place, NOBODY, NOBODY)


def symlinked(place: Path) -> None:
    target = place.with_name("elsewhere")
    target.mkdir(mode=0o700)
    place.symlink_to(target)


PREPARED: dict[str, tuple[Callable[[Path], None], str]] = {
    "mode 0777": (world_writable, "is open to other users (mode 777, expected 700)"),
    "another owner": (foreign, f"belongs to uid {NOBODY}, not to this user"),
    "a symbolic link": (symlinked, "is a symbolic link, not a directory"),
}


@pytest.mark.parametrize("case", list(PREPARED))
def test_a_directory_someone_else_could_use_is_refused_loudly(
    place: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    prepare, why = PREPARED[case]
    if case == "another owner" and os.geteuid() != 0:
        pytest.skip("only root can give a directory to another user")
    prepare(place)
    before = sorted(p.name for p in Path(os.path.realpath(place)).iterdir())
    with caplog.at_level(logging.ERROR, logger="django_jobretry"):
        start_a_task()
    assert sorted(p.name for p in Path(os.path.realpath(place)).iterdir()) == before  # no claim written
    [record] = [r for r in caplog.records if getattr(r, "outcome", None) == "claim_dir_unsafe"]
    assert f"the django-q2 claim directory {place} {why}" in record.getMessage()
    [problem] = [p for p in check_django_q2() if p.id == "django_jobretry.E039"]
    assert why in problem.msg
    claims.release()


def test_claims_planted_in_an_open_directory_are_not_read(place: Path) -> None:
    start_a_task()  # a real task whose queue row a planted claim names
    claims.release()
    row = OrmQ.objects.get()
    place.chmod(0o777)  # as if another user had made it so
    planted = {"ack_id": row.pk, "id": "x", "func": "f", "cluster": None, "policy": "q2", "started": "now"}
    dead_pid = 2**22 + 17  # beyond pid_max's default: never a running process
    (place / f"{dead_pid}.claim").write_text(json.dumps(planted))
    claims.recover_lost()
    assert (place / f"{dead_pid}.claim").exists()  # left alone
    assert OrmQ.objects.get().payload == row.payload  # no lost attempt recorded for it
    assert not DeadLetter.objects.exists()
