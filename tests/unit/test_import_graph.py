"""The package's imports point one way, down the layers, and never in a circle.

Layers (docs/design.md#layers): the pure policy; then models, registry and
settings; then the services that change job state; then the worker; then
the adapters (``@job``, admin, management commands, the public API). A
module may import its own layer or any layer below it. The graph is built
from the source with ``ast``: every import counts, at the top, inside a
function or under ``if TYPE_CHECKING:``. A cycle closed by a type-only
import still marks a type living in the wrong module, and an upward
type-only import still ties a lower layer to a higher one. The dotted paths
of features.py count too: each is an import, made when used, by the face
that uses that part of a capability (``READERS``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_jobretry import features
from django_jobretry.features import Feature, Panel, Section

PACKAGE = "django_jobretry"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

#: Layer of each module, by the longest matching dotted prefix; lower is deeper.
LAYERS: dict[str, int] = {
    f"{PACKAGE}.policy": 1,
    f"{PACKAGE}.exceptions": 2,
    f"{PACKAGE}.validation": 2,
    f"{PACKAGE}.signatures": 2,
    f"{PACKAGE}.conf": 2,  # settings, their schema and checks, start-up imports
    f"{PACKAGE}.signals": 2,
    f"{PACKAGE}.context": 2,
    f"{PACKAGE}.display": 2,  # words for durations and counts, "did you mean", terminal-safe text, redaction
    f"{PACKAGE}.registry": 2,
    f"{PACKAGE}.features": 2,  # the capabilities (dotted paths, each placed by READERS), a panel's Page
    f"{PACKAGE}.models": 2,
    f"{PACKAGE}.migrations": 2,
    f"{PACKAGE}.jobs": 3,  # the state machine: statements, claim, outcomes, enqueue, recovery
    f"{PACKAGE}.services": 3,
    f"{PACKAGE}.console": 3,  # what operators read and workers report, beside the services
    # Capability folders: each module in the layer of its role (declare/checks 2, service/status/SQL 3,
    # admin/cli/metrics faces 5); the folder itself at the lowest. A duty imports nothing of worker/:
    # worker.heartbeat imports it by its features.py path, so importing Duty back would close a cycle.
    f"{PACKAGE}.holds": 3,  # its __init__: what holds jobs back now, the read model of every face
    f"{PACKAGE}.holds.sql": 3,
    f"{PACKAGE}.holds.breakers": 3,
    f"{PACKAGE}.holds.pauses": 3,  # the service, and the heartbeat's Holds duty
    f"{PACKAGE}.holds.admin": 5,
    f"{PACKAGE}.holds.panel": 5,
    f"{PACKAGE}.holds.cli": 5,
    f"{PACKAGE}.limits": 2,
    f"{PACKAGE}.limits.status": 5,  # the read model with its faces: no service imports it
    # The schedules' duty owns a thread and subclasses worker.lifecycle.Duty: it is worker (4).
    f"{PACKAGE}.schedules": 2,  # its __init__ is where a schedule is declared
    f"{PACKAGE}.schedules.checks": 2,
    f"{PACKAGE}.schedules.rows": 3,
    f"{PACKAGE}.schedules.status": 3,
    f"{PACKAGE}.schedules.runs": 4,
    f"{PACKAGE}.schedules.admin": 5,
    f"{PACKAGE}.schedules.admin_actions": 5,
    f"{PACKAGE}.schedules.cli": 5,
    # Workflows: declared and stored (__init__, build), advanced by the database, results, the service.
    f"{PACKAGE}.flows": 3,
    f"{PACKAGE}.flows.admin": 5,
    f"{PACKAGE}.flows.admin_pages": 5,
    f"{PACKAGE}.flows.cli": 5,
    f"{PACKAGE}.worker": 4,
    f"{PACKAGE}.admin": 5,
    f"{PACKAGE}.management": 5,
    f"{PACKAGE}.decorators": 5,
    f"{PACKAGE}.deadletters": 5,  # the public API (__init__) and the faces: admin*, cli*
    # The dead-letter capability's service modules: list, requeue, discard and what they say,
    # other systems' dead letters, groups and search, repair.
    **dict.fromkeys(
        (f"{PACKAGE}.deadletters.{name}" for name in ("service", "chunks", "external", "search", "repair")), 3
    ),
    f"{PACKAGE}.apps": 5,
    f"{PACKAGE}.backends": 5,  # the public path of contrib/django_tasks' backend
    f"{PACKAGE}.testing": 5,
    f"{PACKAGE}.metrics": 5,  # the optional Prometheus view
    f"{PACKAGE}.contrib": 5,  # adapters to other task systems (django-q2, django.tasks)
    PACKAGE: 6,  # the package's __init__: the lazy public API over everything
}
LAYER_NAMES = {1: "policy", 2: "models/registry/conf", 3: "services", 4: "worker", 5: "adapters", 6: "root"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    matches = [prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise AssertionError(f"{module} has no layer: add it to LAYERS in {__name__}")
    return LAYERS[max(matches, key=len)]


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.walk(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child


def imported_modules(path: Path, module: str, known: set[str]) -> set[str]:
    """The package modules ``module`` imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        found |= {target for target in targets if target in known and target != module}
    return found


def import_graph(root: Path, capabilities: tuple[Feature, ...] = ()) -> dict[str, set[str]]:
    """Each module's imports, with the dotted paths of ``capabilities`` as imports of their readers."""
    paths = {module_name(path, root): path for path in root.rglob("*.py")}
    known = set(paths)
    graph = {module: imported_modules(path, module, known) for module, path in sorted(paths.items())}
    for reader, targets in feature_imports(capabilities, known).items():
        graph.setdefault(reader, set()).update(targets - {reader})
    return graph


#: The face that imports each part of a Feature when it uses it.
READERS = {
    "duty": f"{PACKAGE}.worker.heartbeat",
    "status": f"{PACKAGE}.management.commands.jobstatus",
    "collect": f"{PACKAGE}.metrics.collector",
    "panel": f"{PACKAGE}.admin.dashboard",
    "admins": f"{PACKAGE}.admin",
}


def _paths(part: str | Section | Panel | tuple[tuple[str, str], ...] | None) -> list[str]:
    if part is None:
        return []
    if isinstance(part, str):
        return [part]
    if isinstance(part, Section):
        return [part.read, part.as_json, part.lines]
    if isinstance(part, Panel):
        return [part.build]
    return [path for pair in part for path in pair]


def feature_imports(capabilities: tuple[Feature, ...], known: set[str]) -> dict[str, set[str]]:
    """Reader module -> the modules its capabilities' dotted paths import (the longest known prefix)."""
    found: dict[str, set[str]] = {}
    for feature in capabilities:
        for part, reader in READERS.items():
            for path in _paths(getattr(feature, part)):
                module = max((m for m in known if path.startswith(m + ".")), key=len, default=None)
                assert module is not None, f"{feature.name}.{part}: {path} names no module of {PACKAGE}"
                found.setdefault(reader, set()).add(module)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{source} ({LAYER_NAMES[layer_of(source)]}) imports {target} ({LAYER_NAMES[layer_of(target)]})"
        for source, targets in graph.items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(source)
    ]


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph(ROOT, features.FEATURES))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_imports_only_point_down_the_layers() -> None:
    assert upward_imports(import_graph(ROOT, features.FEATURES)) == []


#: Loose modules at the package's top level (``__init__`` included): the public faces
#: (``@job``, the dead-letter API, signals, exceptions, testing helpers, the backend's
#: path), the core helpers and features.py, the one list of capabilities; everything else
#: lives in a room of its own.
LOOSE_MODULES_AT_MOST = 13


def test_the_top_level_holds_few_loose_modules() -> None:
    loose = sorted(path.name for path in ROOT.glob("*.py"))
    assert len(loose) <= LOOSE_MODULES_AT_MOST, f"{len(loose)} loose modules: {loose}"


def test_every_module_has_a_layer() -> None:
    for module in import_graph(ROOT):
        layer_of(module)


# -- negative controls: the checks above must catch a planted problem -----------------------------


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / PACKAGE
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_planted_cycle_is_found_even_inside_a_function(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "services/__init__.py": "",
            "services/a.py": "from django_jobretry.services import b\n",
            "services/b.py": "def later():\n    from django_jobretry.services.a import thing\n",
        },
    )
    cycle = find_cycle(import_graph(root))
    assert cycle == ["django_jobretry.services.a", "django_jobretry.services.b", "django_jobretry.services.a"]


def test_a_planted_relative_cycle_is_found(tmp_path: Path) -> None:
    root = _plant(
        tmp_path, {"models/__init__.py": "from . import job\n", "models/job.py": "from .. import models\n"}
    )
    assert find_cycle(import_graph(root)) is not None


def test_a_planted_upward_import_is_found(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "policy/__init__.py": "",
            "policy/retry.py": "import django_jobretry.models\n",
            "models/__init__.py": "",
        },
    )
    assert upward_imports(import_graph(root)) == [
        "django_jobretry.policy.retry (policy) imports django_jobretry.models (models/registry/conf)"
    ]


def test_a_planted_type_only_cycle_is_found(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "registry.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from django_jobretry import decorators\n"
            ),
            "decorators.py": "from django_jobretry import registry\n",
        },
    )
    assert find_cycle(import_graph(root)) == [
        "django_jobretry.decorators",
        "django_jobretry.registry",
        "django_jobretry.decorators",
    ]


def test_a_planted_type_only_upward_import_is_found(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "services/__init__.py": "",
            "jobs/enqueue.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from django_jobretry.decorators import JobDefinition\n"
            ),
            "decorators.py": "",
        },
    )
    assert upward_imports(import_graph(root)) == [
        "django_jobretry.jobs.enqueue (services) imports django_jobretry.decorators (adapters)"
    ]


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("django_jobretry.policy.retry", 1),
        ("django_jobretry.models.job", 2),
        ("django_jobretry.features", 2),
        ("django_jobretry.jobs.claim", 3),
        ("django_jobretry.schedules", 2),
        ("django_jobretry.schedules.status", 3),
        ("django_jobretry.schedules.runs", 4),
        ("django_jobretry.schedules.cli", 5),
        ("django_jobretry.worker.engine", 4),
        ("django_jobretry.deadletters.admin", 5),
        ("django_jobretry.deadletters.chunks", 3),
        ("django_jobretry.deadletters", 5),
        ("django_jobretry", 6),
    ],
)
def test_layers_by_longest_prefix(module: str, layer: int) -> None:
    assert layer_of(module) == layer
