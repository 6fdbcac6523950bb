"""Django's and django-tasks-db's own task tests, unchanged, against JobRetryBackend.

    python -m devtools.withdb --throwaway -- python -m devtools.upstream_contract

`make versions` runs it through nox (noxfile.py, session ``contract``). It
takes the test files from the published sdists of the Django and the
django-tasks-db installed here (``pip download``, kept in --cache), extracts
them untouched and runs them with Django's test runner on a real PostgreSQL
(DATABASE_URL), with devtools/upstream_settings.py, where JobRetryBackend is
the default task backend. What is left out, and the one backend swapped in,
is listed with reasons in devtools/upstream_selection.py.

django-tasks-db's sdist ships tests/tests.py but not the tests/tasks.py it
imports; that module's tasks are the ones of Django's tests/tasks/tasks.py
(django-tasks became django.tasks), so that file is copied in as it is.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import unittest
from collections import Counter
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

#: The distributions whose task tests run: (name on PyPI, files wanted from the sdist -> where they go).
DJANGO_FILES = {"tests/tasks/": "tasks/"}
TASKS_DB_FILES = {"tests/tests.py": "tests/tests.py"}


def sdist(name: str, cache: Path) -> Path:
    """The sdist of the installed ``name``, from ``cache`` or downloaded into it by pip."""
    release = version(name)
    wanted = f"{name}-{release}.tar.gz".replace("-", "_").lower()
    for path in cache.glob("*.tar.gz"):
        if path.name.replace("-", "_").lower() == wanted:
            return path
    print(f"upstream-contract: downloading the sdist of {name}=={release}", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         f"{name}=={release}", "-d", str(cache)],
        check=True,
    )  # fmt: skip
    return sdist(name, cache)


def extract(archive: Path, files: dict[str, str], root: Path) -> None:
    """Copy the ``files`` (a path or a folder/ in the sdist -> one under ``root``) out, byte for byte."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            inner = member.name.partition("/")[2]  # without the sdist's "name-version/" folder
            for source, target in files.items():
                wanted = inner == source or (source.endswith("/") and inner.startswith(source))
                if wanted and (reader := tar.extractfile(member)) is not None:  # None: not a regular file
                    destination = root / (target + inner[len(source) :])
                    if not destination.resolve().is_relative_to(root.resolve()):
                        raise ValueError(f"{archive.name}: {member.name!r} would land outside {root}")
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    destination.write_bytes(reader.read())


def prepare(cache: Path) -> tuple[Path, list[str]]:
    """Extract the test files into a fresh folder; return it and the test modules' labels."""
    cache.mkdir(parents=True, exist_ok=True)
    root = cache / f"suites-django-{version('django')}-django-tasks-db-{version('django-tasks-db')}"
    shutil.rmtree(root, ignore_errors=True)
    extract(sdist("django", cache), DJANGO_FILES, root)
    extract(sdist("django-tasks-db", cache), TASKS_DB_FILES, root)
    (root / "tests" / "__init__.py").touch()
    shutil.copyfile(root / "tasks" / "tasks.py", root / "tests" / "tasks.py")
    labels = [f"tasks.{path.stem}" for path in sorted((root / "tasks").glob("test_*.py"))]
    return root, [*labels, "tests.tests"]


def each_test(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    """Each test of a suite of suites, in order."""
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from each_test(test)
        else:
            yield test


class ContractRunner:
    """Django's DiscoverRunner with the selection of devtools/upstream_selection.py applied."""

    def __init__(self, verbosity: int) -> None:
        from django.test.runner import DiscoverRunner

        from devtools import upstream_selection as selection

        self.ran: list[str] = []
        self.excluded: list[tuple[str, str]] = []  # (test id, EXCLUDED key)
        self.result: unittest.TextTestResult[Any] | None = None
        outer = self

        class Runner(DiscoverRunner):
            def build_suite(self, *args: Any, **kwargs: Any) -> unittest.TestSuite:
                kept = unittest.TestSuite()
                for case in each_test(super().build_suite(*args, **kwargs)):
                    reason = selection.excluded_because(case.id())
                    if reason:
                        outer.excluded.append((case.id(), reason[0]))
                        continue
                    selection.substitute(case)
                    outer.ran.append(case.id())
                    kept.addTest(case)
                return kept

            def run_suite(self, suite: unittest.TestSuite, **kwargs: Any) -> unittest.TextTestResult[Any]:
                outer.result = super().run_suite(suite, **kwargs)
                return outer.result

        self.runner = Runner(verbosity=verbosity, interactive=False)

    def run(self, labels: list[str]) -> list[str]:
        """Run the tests; return what is wrong with the run (empty when every selected test passed)."""
        from devtools.upstream_selection import EXCLUDED, REQUIRED

        self.runner.run_tests(labels)
        result = self.result
        problems = [f"{key}: excludes no test (stale, remove it)" for key in EXCLUDED if not self._used(key)]
        problems += [f"{test}: required, but it did not run" for test in REQUIRED if test not in self.ran]
        if result is None:
            return [*problems, "the tests did not run"]
        problems += [f"{case.id()}: failed" for case, _ in result.failures]
        problems += [f"{case.id()}: error" for case, _ in result.errors]
        problems += [f"{case.id()}: unexpected success" for case in result.unexpectedSuccesses]
        return problems

    def failed(self) -> set[str]:
        """The ids of the tests that failed, erred or unexpectedly passed."""
        result = self.result
        if result is None:
            return set()
        cases = [case for case, _ in result.failures + result.errors] + list(result.unexpectedSuccesses)
        return {case.id() for case in cases}

    def _used(self, key: str) -> bool:
        return any(used == key for _, used in self.excluded)

    def tally(self) -> str:
        """Ran, passed, failed, skipped and excluded; the required tests; each exclusion's reason."""
        from devtools.upstream_selection import EXCLUDED, REQUIRED

        failed = self.failed()
        skipped = len(self.result.skipped) if self.result else 0
        lines = [
            f"upstream-contract: {len(self.ran)} ran, {len(self.ran) - len(failed) - skipped} passed, "
            f"{len(failed)} failed, {skipped} skipped, {len(self.excluded)} excluded"
        ]
        for test in REQUIRED:
            outcome = "did not run" if test not in self.ran else "FAILED" if test in failed else "passed"
            lines.append(f"  required {test}: {outcome}")
        for key, count in Counter(used for _, used in self.excluded).items():
            lines.append(f"  excluded {count:>2} {key}: {EXCLUDED[key]}")
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(".nox/upstream-contract"), help="sdists kept here")
    parser.add_argument("--verbosity", type=int, default=1, help="Django's test runner's; 2 names each test")
    args = parser.parse_args(argv)
    if not os.environ.get("DATABASE_URL"):
        parser.error("DATABASE_URL is not set; run it under `python -m devtools.withdb --throwaway --`")
    root, labels = prepare(args.cache.resolve())
    print(f"upstream-contract: django {version('django')}, django-tasks-db {version('django-tasks-db')}")
    sys.path.insert(0, str(root))  # before the project's own tests package
    os.environ["DJANGO_SETTINGS_MODULE"] = "devtools.upstream_settings"
    import django

    django.setup()
    runner = ContractRunner(args.verbosity)
    problems = runner.run(labels)
    print(runner.tally())
    for problem in problems:
        print(f"upstream-contract: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
