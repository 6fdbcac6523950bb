"""The dotted paths of features.py are imports too: the layer and cycle checks must see them.

Each part of a capability is imported by the face that uses it
(``READERS`` in tests/unit/test_import_graph.py, which adds those imports
to the graph it checks). These negative controls plant capabilities whose
paths point up the layers, close a cycle or name no module, in a temporary
package, and expect each to be found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from django_jobretry.features import Feature, Panel
from tests.unit.test_import_graph import PACKAGE, READERS, _plant, find_cycle, import_graph, upward_imports


def test_every_part_of_every_capability_has_its_reader() -> None:
    assert set(READERS) == {name for name in Feature.__dataclass_fields__ if name != "name"}


def test_a_capability_path_above_its_reader_is_an_upward_import(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {"worker/__init__.py": "", "worker/heartbeat.py": "", "admin/__init__.py": "", "admin/holds.py": ""},
    )
    planted = Feature("planted", duty=f"{PACKAGE}.admin.holds.PauseAdmin")
    assert upward_imports(import_graph(root, (planted,))) == [
        "django_jobretry.worker.heartbeat (worker) imports django_jobretry.admin.holds (adapters)"
    ]
    assert upward_imports(import_graph(root)) == []


def test_a_capability_path_closing_a_cycle_is_found(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "metrics/__init__.py": "",
            "metrics/collector.py": "",
            "metrics/planted.py": "from django_jobretry.metrics import collector\n",
        },
    )
    planted = Feature("planted", collect=f"{PACKAGE}.metrics.planted.collect")
    assert find_cycle(import_graph(root, (planted,))) == [
        "django_jobretry.metrics.collector",
        "django_jobretry.metrics.planted",
        "django_jobretry.metrics.collector",
    ]
    assert find_cycle(import_graph(root)) is None


def test_a_capability_path_to_no_module_fails(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"admin/__init__.py": ""})
    planted = Feature("planted", panel=Panel("planted", "nowhere.panel", "planted.html"))
    with pytest.raises(AssertionError, match=r"planted.panel: nowhere.panel names no module"):
        import_graph(root, (planted,))


def test_features_py_importing_a_face_is_an_upward_import(tmp_path: Path) -> None:
    """The list sits under every face: a real import of a face from it breaks the layering."""
    root = _plant(
        tmp_path,
        {
            "features.py": "from django_jobretry.admin import dashboard\n",
            "admin/__init__.py": "",
            "admin/dashboard.py": "",
        },
    )
    assert upward_imports(import_graph(root)) == [
        "django_jobretry.features (models/registry/conf) imports django_jobretry.admin.dashboard (adapters)"
    ]
