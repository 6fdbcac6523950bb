"""The Dashboard proxy: the admin dashboard's entry on the admin index, with no table of its own."""

from __future__ import annotations

from django_jobretry.models.dead_letter import DeadLetter


class Dashboard(DeadLetter):
    """No table of its own: the admin index's and sidebar's entry for the dashboard (admin/dashboard.py).

    The admin lists models only, so the dashboard, a page of the dead-letter
    admin, is reachable from the index through this proxy, whose list
    redirects there.
    """

    class Meta:
        proxy = True
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard: what is dying"
        # Seeing it is seeing dead letters (view_deadletter).
        default_permissions = ()
