"""`deadletters import-django-q2` against forged and hostile Failure rows (issue 17, points 2, 3, 11, 12).

django-q2's Task table is not signed: whoever can write it chooses the
pickles and the function path the import reads. Rows are made by django-q2's
own save path (tests/integration/django_q2/test_deadletters_import_django_q2.py) and
then edited in SQL, as an attacker with database access would.
"""

from __future__ import annotations

import base64
import io
import os
import pickle
import sys
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from django_jobretry.contrib.django_q2.failure_rows import PAGE_BYTES
from django_jobretry.deadletters.external import ExternalDeadLetter, import_dead_letters
from django_jobretry.models import DeadLetter, DeadReason, ImportedFailure
from tests.integration.django_q2.test_deadletters_import_django_q2 import TASKS, failed, imported

pytestmark = pytest.mark.django_db


def plant(path: str) -> tuple[str, ...]:
    """What a hostile pickle calls when it is loaded: it leaves a file behind."""
    Path(path).write_text("the pickle ran code")
    return ()


class Planted:
    """Pickles to a call of :func:`plant` (a stand-in for ``os.system``)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return plant, (self.path,)


class Unprintable:
    """A class that still exists, whose instances cannot be shown."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def store(task_id: str, column: str, value: object) -> None:
    """Put ``value`` in a pickled column as picklefield writes it (base64 of the pickle)."""
    text = base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode()
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE django_q_task SET {column} = %s WHERE id = %s", [text, task_id])


def command(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("deadletters", "import-django-q2", *args, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


@pytest.mark.parametrize("dry_run", [False, True], ids=["import", "dry-run"])
def test_a_pickle_that_would_run_code_is_never_loaded(tmp_path: Path, dry_run: bool) -> None:
    marker = tmp_path / "ran"
    good = failed("good")
    hostile = {column: failed(column) for column in ("args", "kwargs", "result")}
    store(hostile["args"].pk, "args", (Planted(marker),))
    store(hostile["kwargs"].pk, "kwargs", {"x": Planted(marker)})
    store(hostile["result"].pk, "result", Planted(marker))
    code, out = command(*(["--dry-run"] if dry_run else []))
    assert not marker.exists()  # nothing in the rows ran
    assert code == 1
    for column, task in hostile.items():
        what = "result" if column == "result" else "arguments"
        assert (
            f"not imported: django-q2 task {task.pk}: its {what} cannot be unpickled here: it refers to "
            f"{__name__}.plant, which is not plain data"
        ) in out
    assert set(imported()) == (set() if dry_run else {good.pk})


def test_only_task_functions_of_the_project_are_signed() -> None:
    good = failed("good", hook=f"{TASKS}.succeed")
    hooked = failed("hooked")
    forged = {
        failed("shell", func="os.system").pk: "'os.system' is not in one of the project's installed apps",
        failed("cmd", func="django.core.management.call_command").pk: "is not in one of the project's",
        failed("zen", func="this.s").pk: "'this.s' is not in one of the project's installed apps",
        failed("reexported", func=f"{TASKS}.retry_policy").pk: f"is not a function defined in {TASKS}",
        failed("class", func=f"{TASKS}.FatalError").pk: f"is not a function defined in {TASKS}",
        failed("missing", func="tests.jobs_app.no_such_module.f").pk: "cannot be imported here",
        failed("dots", func="os.path..join").pk: "is not a dotted path of a module-level function",
        hooked.pk: "its hook 'os.system' is not in one of the project's",
    }
    with connection.cursor() as cursor:  # not through save_task, which would call the hook
        cursor.execute("UPDATE django_q_task SET hook = 'os.system' WHERE id = %s", [hooked.pk])
    code, out = command()
    assert code == 1
    assert set(imported()) == {good.pk}  # nothing forged was signed
    for task_id, why in forged.items():
        line = next(line for line in out.splitlines() if f"django-q2 task {task_id}:" in line)
        assert why in line
    assert "this" not in sys.modules  # a path outside the apps is refused before anything is imported
    assert not ImportedFailure.objects.filter(external_id__in=list(forged)).exists()  # a later run retries


def test_each_row_is_handled_on_its_own() -> None:
    good = failed("good")
    nan, huge, unprintable = failed("nan"), failed("huge"), failed("unprintable")
    store(nan.pk, "args", (float("nan"),))
    store(huge.pk, "args", (10**5000,))
    store(unprintable.pk, "args", (Unprintable(),))
    code, out = command()
    assert code == 1  # skipped and named, not a crash (it was exit 4, nothing imported)
    dead = imported()
    assert set(dead) == {good.pk, nan.pk, huge.pk}
    assert dead[nan.pk].args == ["nan"]
    assert dead[huge.pk].args == ["<int of 16610 bits>"]
    assert f"not imported: django-q2 task {unprintable.pk}: its arguments cannot be unpickled here" in out
    assert f"{__name__}.Unprintable, which is not plain data" in out


def test_memory_follows_the_page_not_the_table() -> None:
    rows = 48
    argument = os.urandom(512 * 1024).hex()  # 1 MiB of text per row
    tasks = [failed(str(i)).pk for i in range(rows)]
    text = base64.b64encode(pickle.dumps((argument,), protocol=pickle.HIGHEST_PROTOCOL)).decode()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE django_q_task SET args = %s WHERE id = ANY(%s)", [text, tasks])
    payload = len(text) * rows  # 64 MiB of pickles
    del argument
    tracemalloc.start()
    try:
        code, _ = command()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (code, len(imported())) == (0, rows)
    # All rows at once held every argument (1.3 GiB for 100 MiB); a page holds PAGE_BYTES of them.
    assert payload > 12 * PAGE_BYTES
    assert peak < payload / 2, f"peak {peak / 2**20:.0f} MiB for {payload / 2**20:.0f} MiB of failures"
    assert DeadLetter.objects.count() == rows


def nested(depth: int) -> str:
    """A picklefield text of a list nested ``depth`` deep, written by hand: pickle.dumps cannot."""
    raw = b"\x80\x05" + b"]" * depth + b"a" * (depth - 1) + b"."
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize("dry_run", [False, True], ids=["import", "dry-run"])
def test_a_row_that_cannot_be_signed_or_stored_is_skipped_alone(
    dry_run: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 35: one such row aborted the whole import (exit 4), nothing imported."""
    good, surrogate, deep = failed("good"), failed("surrogate"), failed("deep")
    late, endless = failed("late"), failed("endless")
    store(surrogate.pk, "args", ("name-\udcff",))
    store(surrogate.pk, "result", "boom \udcff : Traceback\nValueError: \udcff")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE django_q_task SET args = %s WHERE id = %s", [nested(100_000), deep.pk])
        cursor.execute("UPDATE django_q_task SET started = '9999-12-31' WHERE id = %s", [late.pk])
        cursor.execute("UPDATE django_q_task SET stopped = 'infinity' WHERE id = %s", [endless.pk])
    code, out = command(*(["--dry-run"] if dry_run else []))
    assert code == 1
    refused = {
        deep.pk: "its arguments are nested too deep to be signed for requeue",
        late.pk: "its started time 9999-12-31 00:00:00+00 is outside years 1 to 9999",
        endless.pk: "its stopped time infinity is outside years 1 to 9999",
    }
    for task_id, why in refused.items():
        assert f"not imported: django-q2 task {task_id}: {why}" in out
        [record] = [r for r in caplog.records if getattr(r, "external_id", None) == task_id]
        assert (record.levelname, record.outcome, record.reason) == ("WARNING", "import_skipped", why)  # type: ignore[attr-defined]
    if dry_run:
        assert not DeadLetter.objects.exists()
        return
    dead = imported()
    assert set(dead) == {good.pk, surrogate.pk}  # every other row imported
    assert dead[surrogate.pk].args == ["name-\\udcff"]
    assert not ImportedFailure.objects.filter(external_id__in=list(refused)).exists()  # left for a later run


def test_a_row_failing_in_an_unforeseen_way_is_skipped_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_jobretry.contrib.django_q2 import importer
    from django_jobretry.contrib.django_q2.rendering import arguments as shown

    good, odd = failed("good"), failed("odd")

    def arguments(args: Any, kwargs: Any) -> Any:
        if args == ("odd",):
            raise LookupError("the rendering broke")
        return shown(args, kwargs)

    monkeypatch.setattr(importer, "arguments", arguments)
    code, out = command()
    assert code == 1
    assert f"not imported: django-q2 task {odd.pk}: it cannot be imported here (LookupError)" in out
    assert set(imported()) == {good.pk}


def test_a_letter_the_database_refuses_costs_the_others_nothing() -> None:
    """What the importer's checks miss, the database refuses: that letter alone is left out."""

    def letter(external_id: str, enqueued_at: datetime) -> ExternalDeadLetter:
        return ExternalDeadLetter(
            source="django_q2",
            external_id=external_id,
            task_name="shop.q2_task",
            queue_name="q2",
            policy_name="q2",
            args=[],
            kwargs={},
            reason=DeadReason.EXHAUSTED,
            attempts=1,
            max_attempts=1,
            errors=[],
            enqueued_at=enqueued_at,
            dead_at=None,
        )

    now = timezone.now()
    result = import_dead_letters(
        [letter("a", now), letter("b", datetime(9999, 12, 31, tzinfo=UTC)), letter("c", now)]
    )
    assert sorted(result.created) == ["a", "c"]
    assert result.refused == {"b": "the database refused it (jobretry_dead_enqueued_at_holdable)"}
    assert sorted(ImportedFailure.objects.values_list("external_id", flat=True)) == ["a", "c"]
