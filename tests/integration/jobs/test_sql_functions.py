"""django_jobretry/jobs/functions.sql holds the functions and triggers exactly as the migrations leave them.

The migrations are frozen history: the live body of a function is the text of
whichever migration last replaced it (0031 replaced 0026's
``jobretry_bucket_tokens``). The file is the current text in one place. Here,
on the migrated test database, every function named ``jobretry_%`` and every
trigger on the package's tables, as ``pg_get_functiondef()`` and
``pg_get_triggerdef()`` print them (the schema dropped, whitespace
collapsed), must equal the file's statement for it, and neither side may hold
one the other lacks. A new migration that replaces a function without the
same edit in the file fails here, and so does a file edit without the
migration. The controls plant each kind of difference and see it named.
"""

from __future__ import annotations

import re
from importlib.resources import files

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

FILE = files("django_jobretry") / "jobs" / "functions.sql"
WHERE = "django_jobretry/jobs/functions.sql"

#: A comment, a quoted string, a dollar-quoted body, or a statement's end, outside the other three.
_LEXEME = re.compile(
    r"(?P<comment>--[^\n]*)|'(?:[^']|'')*'|(?P<tag>\$(?:[A-Za-z_]\w*)?\$)(?s:.*?)(?P=tag)|(?P<end>;)"
)
_FUNCTION = re.compile(r"CREATE (?:OR REPLACE )?(?:FUNCTION|PROCEDURE) ([\w.\"]+)\(")
_PAREN_SPACE = re.compile(r"\( | \)")
_TRIGGER = re.compile(r"CREATE (?:OR REPLACE )?(?:CONSTRAINT )?TRIGGER (\S+) .*? ON (\S+) ")


def statements(text: str) -> list[str]:
    """The statements of ``text``, without the comments around them; each must end with ``;``."""
    found: list[str] = []
    kept: list[str] = []
    start = 0
    for lexeme in _LEXEME.finditer(text):
        if lexeme["comment"] or lexeme["end"]:
            kept.append(text[start : lexeme.start()])
            start = lexeme.end()
        if lexeme["end"]:
            found.append("".join(kept).strip())
            kept = []
    rest = ("".join(kept) + text[start:]).strip()
    if rest:
        raise ValueError(f"{WHERE}: a statement without its closing ';': {normalised(rest)[:80]}")
    return [statement for statement in found if statement]


def normalised(sql: str) -> str:
    """``sql`` with every run of whitespace one space, none after ``(`` or before ``)``.

    Indentation and line breaks do not count, so the file can be laid out to
    be read (a long argument list over several lines).
    """
    return _PAREN_SPACE.sub(lambda space: space[0].strip(), " ".join(sql.split()))


def key(statement: str) -> str:
    """What a statement defines: a function's name and arguments, or a trigger and its table."""
    text = normalised(statement)
    if function := _FUNCTION.match(text):
        depth = 0
        for at in range(function.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[at], 0)
            if depth == 0:
                return text[function.start(1) : at + 1]
    if trigger := _TRIGGER.match(text):
        return f"trigger {trigger[1]} on {trigger[2]}"
    raise ValueError(f"{WHERE} holds CREATE FUNCTION and CREATE TRIGGER statements only, not: {text[:80]}")


def in_file(text: str) -> dict[str, str]:
    """The file's definitions by what they define."""
    found: dict[str, str] = {}
    for statement in statements(text):
        if key(statement) in found:
            raise ValueError(f"{WHERE} defines {key(statement)} twice")
        found[key(statement)] = statement
    return found


def in_database() -> dict[str, str]:
    """The database's jobretry_% functions and the triggers on the package's tables, by what they define.

    The schema is dropped from the name being defined (the trigger's table):
    the file is the same whichever schema the project migrates into.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            r"""
            SELECT 'FUNCTION ' || quote_ident(n.nspname) || '.', 'FUNCTION ', pg_get_functiondef(p.oid)
            FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
            WHERE p.proname LIKE 'jobretry\_%'
            UNION ALL
            SELECT ' ON ' || quote_ident(n.nspname) || '.', ' ON ', pg_get_triggerdef(t.oid)
            FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
            JOIN pg_namespace AS n ON n.oid = c.relnamespace
            WHERE NOT t.tgisinternal AND (c.relname LIKE 'django\_jobretry\_%' OR t.tgname LIKE 'jobretry\_%')
            """
        )
        definitions = [text.replace(schema, bare, 1) for schema, bare, text in cursor.fetchall()]
    return {key(definition): definition for definition in definitions}


def drift(file: dict[str, str], database: dict[str, str]) -> list[str]:
    """How the file and the database differ, one message per definition, naming it."""
    problems = [
        f"{name} is in the migrated database, not in {WHERE}: add it there as the database prints it "
        f"(without the schema):\n{database[name]}"
        for name in sorted(database.keys() - file.keys())
    ]
    problems += [
        f"{name} is in {WHERE}, not in the migrated database: no migration creates it (or one drops it)"
        for name in sorted(file.keys() - database.keys())
    ]
    for name in sorted(file.keys() & database.keys()):
        ours, theirs = normalised(file[name]), normalised(database[name])
        if ours != theirs:
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None)
            at = min(len(ours), len(theirs)) if at is None else at
            problems.append(
                f"{name} differs between {WHERE} and the migrated database at character {at} "
                f"(whitespace collapsed):\n  file:     …{ours[max(at - 40, 0) : at + 60]}…\n"
                f"  database: …{theirs[max(at - 40, 0) : at + 60]}…\n"
                "A change is a new migration (CREATE OR REPLACE) and the same edit in the file: "
                "one of the two is missing."
            )
    return problems


def test_the_file_holds_every_function_and_trigger_as_the_migrated_database_does() -> None:
    problems = drift(in_file(FILE.read_text(encoding="utf-8")), in_database())
    assert not problems, "\n\n".join(problems)


def test_whitespace_does_not_count() -> None:
    text = FILE.read_text(encoding="utf-8").replace("\n    ", "\n  ").replace(" AS ", "\n   AS  ")
    problems = drift(in_file(text), in_database())
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        (
            "c.probe_attempts IS DISTINCT FROM attempts",
            "c.probe_attempts <> attempts",
            "jobretry_held(queue text, task text, job bigint, attempts integer) differs",
        ),
        (
            "OF errors, task_name, last_error_class, last_error",
            "OF errors, task_name, last_error_class",
            "trigger jobretry_dead_fingerprint on django_jobretry_deadletter differs",
        ),
    ],
)
def test_a_definition_edited_in_the_file_fails(old: str, new: str, named: str) -> None:
    text = FILE.read_text(encoding="utf-8")
    assert text.count(old) == 1
    problems = drift(in_file(text.replace(old, new)), in_database())
    assert len(problems) == 1, problems
    assert problems[0].startswith(named), problems[0]


def test_a_function_replaced_in_the_database_fails() -> None:
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute(
            """
            CREATE OR REPLACE FUNCTION jobretry_bucket_tokens(
                tokens float8, refilled_at timestamptz, now timestamptz, per_second float8, burst float8
            ) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT burst $$
            """
        )
    problems = drift(in_file(FILE.read_text(encoding="utf-8")), in_database())
    assert len(problems) == 1, problems
    assert problems[0].startswith("jobretry_bucket_tokens(tokens double precision,"), problems[0]
    assert " differs between " in problems[0]


@pytest.mark.parametrize(
    ("planted", "named"),
    [
        (
            "CREATE FUNCTION jobretry_planted() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$",
            "jobretry_planted()",
        ),
        (
            "CREATE TRIGGER jobretry_planted BEFORE UPDATE ON django_jobretry_job "
            "FOR EACH ROW EXECUTE FUNCTION jobretry_dead_fingerprint()",
            "trigger jobretry_planted on django_jobretry_job",
        ),
    ],
)
def test_a_definition_only_in_the_database_fails(planted: str, named: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(planted)
    problems = drift(in_file(FILE.read_text(encoding="utf-8")), in_database())
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{named} is in the migrated database, not in {WHERE}"), problems[0]


def test_a_definition_only_in_the_file_fails() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DROP FUNCTION jobretry_held(text, text, bigint)")
    problems = drift(in_file(FILE.read_text(encoding="utf-8")), in_database())
    assert problems == [
        f"jobretry_held(queue text, task text, job bigint) is in {WHERE}, not in the migrated database: "
        "no migration creates it (or one drops it)"
    ]


def test_a_statement_the_file_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="CREATE FUNCTION and CREATE TRIGGER statements only, not: DROP"):
        in_file("DROP FUNCTION jobretry_held(text, text, bigint);")
    with pytest.raises(ValueError, match="without its closing ';'"):
        in_file("CREATE FUNCTION jobretry_x() RETURNS integer LANGUAGE sql AS $$ SELECT 1; $$")
