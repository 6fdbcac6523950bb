"""What is dying now, for the app's admin index page (templates/admin/django_jobretry/app_index.html).

Django's admin renders an app's index page with the site's context only, so
the counts its template shows come from this tag (as Django's own
``get_admin_log`` gives the recent actions).
"""

from __future__ import annotations

from django import template

from django_jobretry.console import trends

register = template.Library()


@register.simple_tag
def jobretry_recent_deaths() -> trends.Recent:
    """Deaths in the last hour and 24 hours, and the jobs retrying now (console/trends.py)."""
    return trends.recent()
