"""Django admin for jobs and dead letters; Django's autodiscovery imports this.

Both admins are read-only; dead letters are requeued or discarded through
actions that call django_jobretry.deadletters (docs/design.md#dead-letters).
"""

from django.contrib import admin

from django_jobretry.admin.dead_letters import DeadLetterAdmin
from django_jobretry.admin.holds import CircuitAdmin, PauseAdmin
from django_jobretry.admin.index_link import DashboardLinkAdmin
from django_jobretry.admin.jobs import JobAdmin
from django_jobretry.admin.schedules import ScheduleAdmin
from django_jobretry.admin.workers import WorkerProcessAdmin
from django_jobretry.models import Circuit, Dashboard, DeadLetter, Job, Pause, Schedule, WorkerProcess

admin.site.register(Job, JobAdmin)
admin.site.register(DeadLetter, DeadLetterAdmin)
admin.site.register(WorkerProcess, WorkerProcessAdmin)
admin.site.register(Schedule, ScheduleAdmin)
admin.site.register(Dashboard, DashboardLinkAdmin)
admin.site.register(Pause, PauseAdmin)
admin.site.register(Circuit, CircuitAdmin)

__all__ = [
    "CircuitAdmin",
    "DashboardLinkAdmin",
    "DeadLetterAdmin",
    "JobAdmin",
    "PauseAdmin",
    "ScheduleAdmin",
    "WorkerProcessAdmin",
]
