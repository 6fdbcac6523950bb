"""The smoke test devtools.wheel_check runs in the fresh venv, from the copy of the example project.

    python wheel_smoke.py CHECKOUT    (cwd: the project copy; DJANGO_SETTINGS_MODULE and DATABASE_URL set)

It proves the installed wheel, not the checkout, is what runs: the package,
its templates and its static files resolve inside the venv's site-packages
and no module loaded from CHECKOUT. Then the path a team takes first: a job
enqueued, `manage.py runworker --burst` runs it (a process of its own, like
a deployed worker), and an admin page renders from the wheel's templates.
Standalone on purpose: devtools is not importable here.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import django


def _inside(path: str | None, where: Path) -> bool:
    return path is not None and Path(path).resolve().is_relative_to(where)


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"wheel smoke test: {what}")
    print(f"   ok: {what}", flush=True)


def main(checkout: Path) -> None:
    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.staticfiles import finders
    from django.template.backends.django import Template
    from django.template.loader import get_template
    from django.test import Client

    import django_jobretry
    from django_jobretry.models import JobStatus
    from example_project.shop import jobs

    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    _check(_inside(django_jobretry.__file__, site), f"django_jobretry is {django_jobretry.__file__}")
    template = get_template("admin/django_jobretry/deadletter/change_list.html")
    from_site = isinstance(template, Template) and _inside(template.origin.name, site)
    _check(from_site, f"the admin's templates come from {site}")
    css = finders.find("django_jobretry/admin.css")
    _check(isinstance(css, str) and _inside(css, site), f"the admin's CSS is {css}")

    job = jobs.send_receipt.enqueue(4242)
    worker = [sys.executable, "manage.py", "runworker", "--burst", "--queue", "demo"]
    subprocess.run(worker, check=True, timeout=120)
    job.refresh_from_db()
    _check(job.status == JobStatus.SUCCEEDED and job.attempts == 1, f"job {job.pk} succeeded at once")

    user, _ = get_user_model().objects.get_or_create(
        username="wheel-smoke", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    page = client.get("/admin/django_jobretry/deadletter/")
    _check(page.status_code == 200, f"the dead-letter admin answers {page.status_code}")

    from_checkout = sorted(
        name
        for name, module in list(sys.modules.items())
        if _inside(getattr(module, "__file__", None), checkout)
    )
    _check(not from_checkout, f"no module came from the checkout {checkout} ({from_checkout})")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
