"""`manage.py demo`: what `make demo` runs.

Today it prepares the database and shows the retry schedule of every
configured policy; the worker issue turns it into a full run of jobs.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Migrate the example project and show each retry policy's schedule."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING("Migrating the example project"))
        call_command("migrate", verbosity=0, interactive=False)
        self.stdout.write("  database ready\n\n")
        call_command("showpolicies", stdout=self.stdout)
        self.stdout.write(
            "Summary: each policy above retries a failing job on that schedule and then moves it to the "
            "dead letters.\nThe admin: `make runserver` (same database as this demo), then open "
            "http://127.0.0.1:8000/admin/ (create a login with `make createsuperuser`)."
        )
