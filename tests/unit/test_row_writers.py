"""One module writes job and dead-letter rows: the state machine reads in one place.

Every transition of a job (insert, claim, succeed, retry, snooze, park, release, cancel, bury,
revive, discard, prune) is a statement in ``django_jobretry/jobs/statements.py``; the functions
around it decide *when* to run one, never write a row of their own. Workflows and every later
capability touch these transitions: a second writer hidden in a capability folder is how a fence
or a history line gets forgotten. This test finds writers by what they write, in SQL text and in
ORM calls on the two models, and plants a writer to show it would be found.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "django_jobretry"
#: The one module allowed to write job and dead-letter rows.
STATEMENTS = PACKAGE / "jobs" / "statements.py"

#: The two tables, as SQL text formats them in: by the names jobs/sql.py gives them (JOB, DEAD),
#: or straight from the model, quoted or not (``{quote(Job._meta.db_table)}``).
TABLE = r"\{(?:JOB|DEAD|(?:\w+\()?(?:Job|DeadLetter)\._meta\.db_table\)?)\}"
#: SQL that changes rows of the two tables.
SQL_WRITE = re.compile(rf"\b(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+{TABLE}", re.IGNORECASE)
#: ORM writes on the two models, or on a queryset's model or a row of theirs handed around by name.
ORM_WRITE = re.compile(
    r"\b(?:Job|DeadLetter|\w+\.model)\.objects\b[^\n]*\."
    r"(?:update|delete|bulk_create|bulk_update|create|get_or_create|update_or_create)\("
    r"|\bdead(?:_letter)?\.(?:save|delete)\("
    r"|\bjob\.(?:save|delete)\("
)


def writers(root: Path) -> set[Path]:
    """The modules under ``root`` (migrations aside) that write job or dead-letter rows."""
    found = set()
    for module in root.rglob("*.py"):
        if "migrations" in module.parts:
            continue
        text = module.read_text(encoding="utf-8")
        if SQL_WRITE.search(text) or ORM_WRITE.search(text):
            found.add(module)
    return found


def test_only_the_statements_module_writes_job_and_dead_letter_rows() -> None:
    found = sorted(path.relative_to(ROOT).as_posix() for path in writers(PACKAGE))
    assert found == [STATEMENTS.relative_to(ROOT).as_posix()], "writers: " + ", ".join(found)


def test_a_planted_sql_writer_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "holds" / "sql.py"
    planted.parent.mkdir()
    planted.write_text('PARK = f"UPDATE {JOB} SET run_at = %(until)s WHERE id = ANY(%(ids)s)"\n')
    assert writers(tmp_path) == {planted}


def test_a_planted_orm_writer_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "repairs.py"
    planted.write_text("DeadLetter.objects.filter(pk=dead.pk).update(args=new_args)\n")
    assert writers(tmp_path) == {planted}


def test_every_writer_form_of_the_package_is_found(tmp_path: Path) -> None:
    """The forms the package has used: the model's table quoted in, a queryset's model, a row saved."""
    forms = {
        "insert.py": 'INTO = f"INSERT INTO {quote(Job._meta.db_table)} ({columns})"\n',
        "repair.py": 'SQL = f"UPDATE {Job._meta.db_table} SET requeue_history = %s WHERE id = %s"\n',
        "prune.py": "count, _ = rows.model.objects.filter(pk__in=batch).delete()\n",
        "imports.py": "created = DeadLetter.objects.using(using).bulk_create(rows)\n",
        "bury.py": "dead.save(using=using, force_insert=True)\n",
        "discard.py": 'DISCARD = f"DELETE FROM {DEAD} WHERE id = ANY(%s::bigint[])"\n',
    }
    for name, text in forms.items():
        (tmp_path / name).write_text(text)
    assert writers(tmp_path) == {tmp_path / name for name in forms}


def test_reads_are_not_writers(tmp_path: Path) -> None:
    reader = tmp_path / "status.py"
    reader.write_text(
        'COUNT = f"SELECT count(*) FROM {JOB} WHERE status = %(status)s"\nJob.objects.filter(pk=1).exists()\n'
    )
    assert writers(tmp_path) == set()
