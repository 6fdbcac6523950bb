"""The django-q2 claim directory is private: made 0700 by us, refused when anyone else could use it.

Its name is predictable in the shared temporary directory, so another user
can create it first. Each test points the temporary directory at its own
``tmp_path`` and prepares the claim directory as such a user would leave it;
a real worker hook then starts a task, or a real cluster runs some. A
refused directory is never used, and never stops the claims or the cluster:
they go to a private fallback (contrib/django_q2/claims.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django_q.models import OrmQ, Task
from django_q.tasks import async_task

from django_jobretry.contrib.django_q2 import claims, hooks
from django_jobretry.contrib.django_q2.apps import check_django_q2
from django_jobretry.models import DeadLetter
from tests.integration.django_q2.test_django_q2_cluster import DEADLINE, TASKS
from tests.jobs_app import q2_tasks
from tests.processes import wait_until
from tests.q2_asserts import pushed
from tests.q2_cluster import running

pytestmark = pytest.mark.django_db
NOBODY = 65534


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The claim directory's path, under a temporary directory of this test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(claims, "_settled", {})
    monkeypatch.setattr(claims, "_claimed", {})
    return claims.directory()


def start_a_task() -> dict[str, Any]:
    """pre_execute of one queued task, as a worker runs it; the claim is written if it can be."""
    async_task("tests.jobs_app.q2_tasks.always_fail", "c")
    task = pushed()
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


def only_root(case: str) -> None:
    if case == "another owner" and os.geteuid() != 0:
        pytest.skip("only root can give a directory to another user")


def listing(path: Path) -> list[str]:
    return sorted(p.name for p in Path(os.path.realpath(path)).iterdir())


@pytest.mark.parametrize("case", list(PREPARED))
def test_a_directory_someone_else_could_use_is_refused_and_a_private_one_used_instead(
    place: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    prepare, why = PREPARED[case]
    only_root(case)
    prepare(place)
    before = listing(place)
    [problem] = [p for p in check_django_q2() if p.id == "django_jobretry.W039"]
    fallback = claims.fallbacks(place)[0]
    assert why in problem.msg
    assert f"workers keep their claims in {fallback} instead" in problem.msg
    with caplog.at_level(logging.WARNING, logger="django_jobretry"):
        start_a_task()
    assert listing(place) == before  # no claim written there
    assert listing(fallback) == [f"{os.getpid()}.claim"]
    found = os.lstat(fallback)
    assert (stat.S_IMODE(found.st_mode), found.st_uid) == (0o700, os.geteuid())
    [record] = [r for r in caplog.records if getattr(r, "outcome", None) == "claim_dir_fallback"]
    assert record.levelname == "WARNING"
    message = record.getMessage()
    assert message.startswith(f"the django-q2 claim directory {place} {why}")
    assert message.endswith(f": claims are kept in {fallback} instead")
    assert (record.refused, record.used) == (str(place), str(fallback))  # type: ignore[attr-defined]
    claims.release()
    assert listing(fallback) == []


def test_the_fallbacks_cannot_be_named_in_advance(place: Path, settings: Any) -> None:
    """Named by an HMAC under SECRET_KEY: the same in every process of the cluster, unknown to others."""
    first = claims.fallbacks(place)
    assert len(set(first)) == claims.FALLBACKS
    assert {p.parent for p in first} == {place.parent}
    assert claims.fallbacks(place) == first
    settings.SECRET_KEY = "another project" + "s key"
    assert set(claims.fallbacks(place)).isdisjoint(first)


def test_a_fallback_taken_too_is_skipped_for_the_next(place: Path) -> None:
    world_writable(place)
    taken, used = claims.fallbacks(place)[:2]
    symlinked(taken)  # as if someone had seen its name once and made it first after a cleanup
    start_a_task()
    assert (listing(place), listing(used)) == ([], [f"{os.getpid()}.claim"])
    claims.release()


def test_a_directory_taken_over_after_a_cleaner_removed_it_is_left_for_a_fallback(place: Path) -> None:
    start_a_task()  # this process settles on the default directory
    claims.release()
    place.rmdir()  # a temporary-files cleaner
    symlinked(place)  # and someone quicker than the next worker
    OrmQ.objects.all().delete()
    start_a_task()
    used = claims.fallbacks(place)[0]
    assert (listing(place), listing(used)) == ([], [f"{os.getpid()}.claim"])
    claims.release()


def test_with_every_place_refused_tasks_run_unclaimed_and_it_is_said(
    place: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for path in [place, *claims.fallbacks(place)]:
        path.mkdir(mode=0o777)
        path.chmod(0o777)
    [problem] = [p for p in check_django_q2() if p.id == "django_jobretry.W039"]
    assert "nor is any fallback, so workers write and read no claims" in problem.msg
    with caplog.at_level(logging.ERROR, logger="django_jobretry"):
        start_a_task()  # the hook does not raise: the task runs
    assert not list(place.parent.glob("*/*.claim"))
    [record] = [r for r in caplog.records if getattr(r, "outcome", None) == "claim_dir_unsafe"]
    assert record.getMessage().startswith(
        f"the django-q2 claim directory {place} is open to other users (mode 777, expected 700), "
        "and so is every fallback"
    )
    claims.release()


def test_claims_planted_in_an_open_directory_are_not_read(place: Path) -> None:
    start_a_task()  # a real task whose queue row a planted claim names
    claims.release()
    row = OrmQ.objects.get()
    place.chmod(0o777)  # as if another user had made it so
    planted = {"ack_id": row.pk, "id": "x", "func": "f", "cluster": None, "policy": "q2", "started": "now"}
    dead_pid = 2**22 + 17  # beyond pid_max's default: never a running process
    (place / f"{dead_pid}.claim").write_text(json.dumps(planted))
    claims.recover_lost()  # reads the fallback, which holds nothing
    assert (place / f"{dead_pid}.claim").exists()  # left alone
    assert OrmQ.objects.get().payload == row.payload  # no lost attempt recorded for it
    assert not DeadLetter.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_directory_taken_by_another_user_neither_stops_the_cluster_nor_loses_its_claims(
    place: Path,
) -> None:
    """Issue 35: the cluster ran no task for 45 s. Now it claims in a private place and says so."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a directory to another user")
    foreign(place)
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(contextlib.contextmanager(running)(env={"TMPDIR": str(place.parent)}))
        done = async_task(f"{TASKS}.succeed", "runs")
        killed = async_task(f"{TASKS}.kill_own_worker", "claimed")
        wait_until(Task.objects.filter(id=done, success=True).exists, timeout=DEADLINE, what="the task")
        # Each killed attempt is counted only if its claim, written by the dying worker, was read
        # by its replacement: both use the same private directory.
        wait_until(DeadLetter.objects.filter(external_id=killed).exists, timeout=DEADLINE, what="dead letter")
        output = cluster.output
    dead = DeadLetter.objects.get(external_id=killed)
    assert [e["ended"] for e in dead.errors] == ["worker_exit"] * 3
    # The refused directory is left as it was: another user's, empty.
    assert (os.lstat(place).st_uid, list(place.iterdir())) == (NOBODY, [])
    [used] = [p for p in place.parent.iterdir() if p.name.startswith(f"{place.name}-")]
    assert used == claims.fallbacks(place)[0]  # every process, this one too, names the same
    found = os.lstat(used)
    assert (stat.S_ISDIR(found.st_mode), stat.S_IMODE(found.st_mode), found.st_uid) == (True, 0o700, 0)
    assert list(used.iterdir()) == []  # every claim released or taken
    assert f"the django-q2 claim directory {place} belongs to uid {NOBODY}" in output
    assert f"claims are kept in {used} instead" in output
