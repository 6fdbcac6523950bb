"""The optional Prometheus view (docs/metrics.md): ``pip install django-jobretry[prometheus]``.

``path("metrics/", include("django_jobretry.metrics.urls"))`` in a project's
urls.py. The view is here and the collector beside it (collector.py), which
it imports only when called: prometheus_client is imported then too, so
including the URLs without it installed leaves ``manage.py check`` to say so
(django_jobretry.E011) instead of failing the URL configuration.

Two ways in, so a scraper needs no user account and an operator needs no
token: ``Authorization: Bearer <JOBRETRY["METRICS_TOKEN"]>`` (compared in
constant time), or a logged-in, active staff user with the
``django_jobretry.view_metrics`` permission. A wrong token is 401 (the
scraper is misconfigured), no credentials 403. The figures carry task and
queue names, never a job's arguments.
"""

from __future__ import annotations

import hmac

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from django_jobretry.conf import jobretry_settings

PERMISSION = "django_jobretry.view_metrics"


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read the metrics, else the 401 or 403 to send."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, given = header.partition(" ")
        token = jobretry_settings.metrics_token
        given_bytes = given.strip().encode()
        if scheme.lower() == "bearer" and token and hmac.compare_digest(given_bytes, token.encode()):
            return None
        response = HttpResponse("Invalid metrics token.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="django-jobretry metrics"'
        return response
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff and user.has_perm(PERMISSION):
        return None
    text = f"Send the metrics token, or log in as staff with {PERMISSION}.\n"
    return HttpResponse(text, status=403, content_type="text/plain")


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """Every metric, read from the database now (a fresh registry per request: nothing kept in memory)."""
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    from django_jobretry.metrics.collector import JobRetryCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobRetryCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
