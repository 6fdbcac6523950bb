"""Every import the docs show a user works: moving a module never breaks a documented path.

The package's rooms are rearranged as it grows; a team's code imports what docs/ and the README
showed it. Each ``import``/``from ... import`` of ``django_jobretry`` inside a fenced Python block
is executed here, and so is each dotted path a block names in a string (``"BACKEND":
"django_jobretry.backends.JobRetryBackend"``, ``include("django_jobretry.metrics.urls")``), so a
move that forgets a documented path fails this test, not a user's deploy.
"""

from __future__ import annotations

import ast
import re
from importlib import import_module
from pathlib import Path

import django
import pytest
from django.utils.module_loading import import_string

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^```(?:python|py)\s*\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: A dotted path into the package inside a string; check ids such as "django_jobretry.E015" are not paths.
DOTTED = re.compile(r"^django_jobretry(?!.*\.[A-Z]\d+$)(\.[A-Za-z_]\w*)+$")
#: The django.tasks backend refuses to load before Django 6.0, as docs/django-tasks.md says.
NEEDS_DJANGO_6 = "django_jobretry.backends"


def _imported(node: ast.AST) -> str | None:
    """The statement or dotted path ``node`` asks of the package, if it asks one."""
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("django_jobretry"):
        return ast.unparse(node)
    if isinstance(node, ast.Import) and any(alias.name.startswith("django_jobretry") for alias in node.names):
        return ast.unparse(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.match(node.value):
        return node.value
    return None


def documented_imports(pages: list[Path]) -> list[tuple[str, str]]:
    """(page, statement or dotted path) for each use of the package in the pages' Python blocks."""
    found: set[tuple[str, str]] = set()
    for page in pages:
        for block in FENCE.findall(page.read_text(encoding="utf-8")):
            try:
                tree = ast.parse(block)
            except SyntaxError:
                continue  # a shell session or an excerpt, not a program
            found.update((page.name, used) for node in ast.walk(tree) if (used := _imported(node)))
    return sorted(found)


def _load(used: str) -> None:
    if not DOTTED.match(used):
        exec(used, {})  # noqa: S102 - an import statement parsed from our own docs
    elif used.rsplit(".", 1)[1][0].isupper():
        import_string(used)  # a class or a constant: "django_jobretry.backends.JobRetryBackend"
    else:
        import_module(used)  # a module: "django_jobretry.metrics.urls"


def broken(imports: list[tuple[str, str]]) -> list[str]:
    failures = []
    for page, used in imports:
        try:
            _load(used)
        except ImportError as error:
            failures.append(f"{page}: {used}: {error}")
    return failures


def test_the_docs_show_imports_of_the_package() -> None:
    imports = documented_imports(PAGES)
    assert len(imports) >= 20, imports
    assert ("dead-letters.md", "from django_jobretry import deadletters") in imports
    assert ("django-tasks.md", "django_jobretry.backends.JobRetryBackend") in imports


def here(imports: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The imports this Django can make: on 5.2 the django.tasks backend is refused by design."""
    return [item for item in imports if django.VERSION >= (6, 0) or NEEDS_DJANGO_6 not in item[1]]


def test_every_documented_import_works() -> None:
    assert broken(here(documented_imports(PAGES))) == []


def test_a_documented_import_of_a_moved_module_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "moved.md"
    page.write_text(
        "```python\nfrom django_jobretry.services.no_such_module import groups\n"
        "from django_jobretry import job, NoSuchName\n"
        'TASKS = {"default": {"BACKEND": "django_jobretry.decorators.NoSuchBackend"}}\n'
        'urls = include("django_jobretry.no_such_urls")\n'
        'CHECK = "django_jobretry.E015"\n```\n',
        encoding="utf-8",
    )
    failures = broken(documented_imports([page]))
    assert len(failures) == 4, failures
    for missing in ("no_such_module", "NoSuchName", "NoSuchBackend", "no_such_urls"):
        assert any(missing in line for line in failures), (missing, failures)


@pytest.mark.parametrize("fence", ["```python\n", "```py\n"])
def test_both_spellings_of_a_python_fence_are_read(tmp_path: Path, fence: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"{fence}from django_jobretry import job\n```\n", encoding="utf-8")
    assert documented_imports([page]) == [("page.md", "from django_jobretry import job")]


#: What the docs showed before the package's rooms were rearranged; a team's code still imports it.
FORMER = [
    ("outages.md", "from django_jobretry.services import holds"),
    ("dead-letters.md", "from django_jobretry.services import repairs"),
    ("dead-letters.md", "from django_jobretry.services.failure_groups import groups"),
    ("worker.md", "from django_jobretry.services.cancel import cancel_jobs"),
]


def test_every_formerly_documented_import_still_works() -> None:
    assert broken(FORMER) == []
    from django_jobretry.services import holds, repairs

    for function in (holds.pause, holds.resume, repairs.repair, repairs.digest):
        assert callable(function), function
