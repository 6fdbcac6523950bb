"""The dashboard's entry on the admin index and in the sidebar: a proxy model whose list is the dashboard.

Django's admin index lists registered models only. The dashboard is a page
of the dead-letter admin; registering the ``Dashboard`` proxy
(models/dashboard.py) puts a "Dashboard: what is dying" row under "Jobs and
dead letters", for the users who may view dead letters, and its list
redirects to the dashboard. The app's own index page
(templates/admin/django_jobretry/app_index.html) adds what is dying now.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse

from django_jobretry.admin.base import NoWritesAdmin, holds
from django_jobretry.models import DeadLetter


class DashboardLinkAdmin(NoWritesAdmin):
    """Only a list URL, which leads to the dashboard; visible to those who may view dead letters."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return holds(request, DeadLetter._meta, "view")

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.changelist_view)
        return [path("", view, name="{}_{}_changelist".format(*info))]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:django_jobretry_deadletter_dashboard"))
