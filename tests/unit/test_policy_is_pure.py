"""The policy layer imports no Django: checked by importing it with Django hidden."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import django_jobretry.policy

POLICY_DIR = Path(django_jobretry.policy.__file__).parent


def test_policy_imports_with_django_unavailable() -> None:
    script = (
        "import sys; sys.modules['django'] = None\n"
        "from django_jobretry import RetryPolicy, FatalError, RetryableError, ErrorKind\n"
        "print(RetryPolicy().decide(1, ErrorKind.RETRYABLE, 0.5))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "Retry(delay=" in result.stdout


def test_no_policy_module_mentions_django_in_an_import() -> None:
    offenders = []
    for path in POLICY_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "django"]
    assert offenders == []
    assert len(list(POLICY_DIR.glob("*.py"))) >= 4  # the scan saw the package
