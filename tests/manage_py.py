"""`manage.py` in a subprocess, as an operator's shell runs it: exit code, stdout and stderr.

For what an in-process ``call_command`` cannot show: a settings module of its
own, a database that cannot be reached, a traceback printed instead of an error.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.processes import ROOT


def manage_py(
    *args: str, env: dict[str, str], prelude: str = "", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py ARGS`` with ``env`` added to this environment, ``prelude`` (Python) run first."""
    script = f"{prelude}\nimport runpy\nrunpy.run_path('manage.py', run_name='__main__')"
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
