"""Build the sdist and the wheel, install the wheel into a fresh venv, and run the example project on it.

    python -m devtools.withdb --throwaway -- python -m devtools.wheel_check    (what `make wheel-check` runs)

Why: the test suite imports the package from the checkout, so a file the
wheel lacks (a template, the admin's CSS, a migration, functions.sql) passes
every test and breaks every project that installs the wheel. Here the app
comes from the wheel alone: it is installed with its declared dependencies
into a venv outside the checkout, and every command runs from a copy of the
example project in a temporary directory, as a team's own project would,
never from the checkout. `twine check` judges the metadata PyPI would show.

Needs DATABASE_URL (withdb sets one); the venv's dependencies come through
pip's cache and its configured index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "django_jobretry"
#: What the wheel must hold beyond the modules, whatever the checkout holds: were the package
#: directory missing its data too, comparing the two alone would find nothing wrong.
REQUIRED = (
    f"{PACKAGE}/py.typed",
    f"{PACKAGE}/jobs/functions.sql",
    f"{PACKAGE}/static/{PACKAGE}/admin.css",
    f"{PACKAGE}/templates/admin/{PACKAGE}/deadletter/change_list.html",
    f"{PACKAGE}/migrations/0001_initial.py",
)
#: Besides the wheel: a libpq for psycopg on machines without one, as the README advises.
EXTRA_REQUIREMENTS = ("psycopg[binary]",)


def step(what: str, command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    """Run one command to its end, failing the check with its exit status; print how long it took."""
    print(f"== wheel-check: {what}", flush=True)
    started = time.monotonic()
    subprocess.run(command, cwd=cwd, env=env, check=True)
    print(f"== wheel-check: {what} took {time.monotonic() - started:.1f} s", flush=True)


def built(dist: Path) -> tuple[Path, Path]:
    """The sdist and the wheel of ``dist``, exactly one each, once `twine check` passed them."""
    step(
        "build the sdist and the wheel",
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        ROOT,
    )
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        raise SystemExit(f"wheel-check: expected one sdist and one wheel in {dist}, found {sdists + wheels}")
    step(
        "twine check", [sys.executable, "-m", "twine", "check", "--strict", *map(str, sdists + wheels)], ROOT
    )
    return sdists[0], wheels[0]


def missing_from(wheel: Path) -> list[str]:
    """The package's files (data files included) the wheel lacks, and the REQUIRED ones."""
    names = set(zipfile.ZipFile(wheel).namelist())
    on_disk = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / PACKAGE).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    return sorted((on_disk | set(REQUIRED)) - names)


def fresh_venv(where: Path, wheel: Path) -> Path:
    """A venv at ``where`` with the wheel and its dependencies; its python."""
    step("create a fresh venv", [sys.executable, "-m", "venv", str(where)], where.parent)
    python = where / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "--quiet", str(wheel), *EXTRA_REQUIREMENTS]
    step("install the wheel with its dependencies", install, where.parent)
    return python


def project_copy(where: Path) -> Path:
    """The example project and its manage.py, copied out of the checkout, with the smoke test beside them."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "example_project", where / "example_project", ignore=ignore)
    shutil.copy(ROOT / "manage.py", where / "manage.py")
    shutil.copy(ROOT / "devtools" / "wheel_smoke.py", where / "wheel_smoke.py")
    return where


def project_env(project: Path, venv: Path) -> dict[str, str]:
    """The environment of the project's commands: nothing of the checkout on their path."""
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "PYTHONHOME"}}
    env.update(
        DJANGO_SETTINGS_MODULE="example_project.settings",
        # django-admin's own directory is the venv's bin/: the project must be importable from there too.
        PYTHONPATH=str(project),
        VIRTUAL_ENV=str(venv),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def main() -> int:
    if not os.environ.get("DATABASE_URL"):
        print("wheel-check: DATABASE_URL is not set; run `make wheel-check`", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jobretry-wheel-") as scratch:
        tmp = Path(scratch).resolve()
        if tmp.is_relative_to(ROOT):
            raise SystemExit(f"wheel-check: the scratch directory {tmp} is inside the checkout")
        _sdist, wheel = built(tmp / "dist")
        missing = missing_from(wheel)
        if missing:
            raise SystemExit(f"wheel-check: {wheel.name} lacks {', '.join(missing)}")
        print(f"== wheel-check: {wheel.name} holds every file of {PACKAGE}/", flush=True)
        python = fresh_venv(tmp / "venv", wheel)
        project = project_copy(tmp / "project")
        env = project_env(project, tmp / "venv")
        admin = str(tmp / "venv" / "bin" / "django-admin")
        step("migrate", [admin, "migrate", "--no-input"], project, env)
        step("check", [admin, "check"], project, env)
        step(
            "migrations match the models",
            [admin, "makemigrations", "--check", "--dry-run", PACKAGE],
            project,
            env,
        )
        step("the demo", [str(python), "manage.py", "demo"], project, env)
        step("smoke test", [str(python), "wheel_smoke.py", str(ROOT)], project, env)
    print(f"== wheel-check: passed in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
