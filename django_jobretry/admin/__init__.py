"""Django admin for jobs and dead letters, and each capability's pages; Django's autodiscovery imports this.

Both admins are read-only; dead letters are requeued or discarded through
actions that call django_jobretry.deadletters (docs/design.md#dead-letters).
Each capability of features.py registers its own pages here, and its admin
classes stay importable from this package by name (a site of your own
registers them: docs/admin.md).
"""

from typing import Any

from django.contrib import admin

from django_jobretry import features
from django_jobretry.admin.dashboard import DashboardLinkAdmin
from django_jobretry.admin.jobs import JobAdmin
from django_jobretry.admin.workers import WorkerProcessAdmin
from django_jobretry.deadletters.admin import DeadLetterAdmin
from django_jobretry.models import Dashboard, DeadLetter, Job, WorkerProcess

admin.site.register(Job, JobAdmin)
admin.site.register(DeadLetter, DeadLetterAdmin)
admin.site.register(WorkerProcess, WorkerProcessAdmin)
admin.site.register(Dashboard, DashboardLinkAdmin)

#: Each capability's admin classes by name, from its dotted path in features.py.
_CAPABILITY_ADMINS = {
    admin_path.rpartition(".")[2]: admin_path
    for feature in features.FEATURES
    for _, admin_path in feature.admins
}


def register_capabilities(site: admin.AdminSite) -> None:
    """Register each capability's pages of features.py on ``site``."""
    for feature in features.FEATURES:
        for model_path, admin_path in feature.admins:
            site.register(features.load(model_path), features.load(admin_path))


register_capabilities(admin.site)


def __getattr__(name: str) -> Any:
    """A capability's admin class, as ``from django_jobretry.admin import ScheduleAdmin``: imported on use."""
    if name in _CAPABILITY_ADMINS:
        return features.load(_CAPABILITY_ADMINS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DashboardLinkAdmin", "DeadLetterAdmin", "JobAdmin", "WorkerProcessAdmin", "register_capabilities"]
