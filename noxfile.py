"""`make matrix`: the test suite on each supported Django series."""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]

#: Printed before a pass, so the log says what it ran on.
VERSIONS = "from importlib.metadata import version as v; print(v('django'), v('django-q2'))"
#: The django-q2 adapter's tests, and the canaries on django-q2's internals it relies on.
ADAPTER_TESTS = (
    "tests/canaries",
    "tests/unit/test_django_q2_checks.py",
    "tests/unit/test_django_q2_pickles.py",
    "tests/integration/django_q2",
    "tests/features/test_django_q2.py",
    "tests/features/test_django_q2_import.py",
)
#: The django.tasks backend's tests, and the canaries on Django's task framework.
BACKEND_TESTS = (
    "tests/canaries",
    "tests/features/test_django_tasks.py",
    *(f"tests/integration/django_tasks/test_tasks_{name}.py" for name in (
        "backend", "backend_api", "backend_checks", "backend_hostile", "backend_runs", "contract",
        "process_pool", "schedules",
    )),
)  # fmt: skip
#: The ends of the ranges pyproject.toml declares that the full suites (newest django-q2, on Django
#: 6.1 and 5.2) do not run: target -> (Django series, extra requirement, tests). django-q2 1.10 is
#: the first with the post_execute_in_worker signal the adapter connects to.
UPSTREAM = {
    "django-q2-1.10.0": ("6.1", "django-q2==1.10.0", ADAPTER_TESTS),
    "django-6.0": ("6.0", None, BACKEND_TESTS),
}
#: django-tasks-db's tests that `contract` runs: the release the bench extra's range starts at.
DJANGO_TASKS_DB = "django-tasks-db==0.13.0"


@nox.session
@nox.parametrize("django", ["5.2", "6.0", "6.1"])
def tests(session: nox.Session, django: str) -> None:
    """Pytest on one Django series, against an embedded PostgreSQL unless DATABASE_URL is set."""
    session.install("-e", ".[dev]", f"django~={django}.0")
    workers = os.environ.get("PYTEST_WORKERS") or str((os.cpu_count() or 2) + 1)
    session.run(
        "python",
        "-m",
        "devtools.withdb",
        "--throwaway",
        "--",
        "python",
        "-m",
        "pytest",
        "-n",
        workers,
        *session.posargs,
    )


@nox.session
@nox.parametrize("target", list(UPSTREAM))
def upstream(session: nox.Session, target: str) -> None:
    """A short pass at one end of a declared range: the adapter's or the backend's tests and the canaries."""
    django, extra, tests = UPSTREAM[target]
    session.install("-e", ".[dev]", f"django~={django}.0", *([extra] if extra else []))
    session.run("python", "-c", VERSIONS, silent=False)
    workers = os.environ.get("PYTEST_WORKERS") or str((os.cpu_count() or 2) + 1)
    session.run(
        "python", "-m", "devtools.withdb", "--throwaway", "--",
        "python", "-m", "pytest", "-n", workers, *tests, *session.posargs,
    )  # fmt: skip


@nox.session
@nox.parametrize("django", ["6.1"])
def contract(session: nox.Session, django: str) -> None:
    """Django's and django-tasks-db's own task tests, unchanged, on our backend (docs/django-tasks.md)."""
    session.install("-e", ".", f"django~={django}.0", DJANGO_TASKS_DB, "psycopg[binary]>=3.2",
                    "pgserver==0.1.4; python_version < '3.13'")  # fmt: skip
    session.run(
        "python", "-m", "devtools.withdb", "--throwaway", "--",
        "python", "-m", "devtools.upstream_contract", "--cache", ".nox/upstream-contract", *session.posargs,
    )  # fmt: skip
