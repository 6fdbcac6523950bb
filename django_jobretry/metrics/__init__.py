"""The optional Prometheus view (docs/metrics.md): ``pip install django-jobretry[prometheus]``.

``path("metrics/", include("django_jobretry.metrics.urls"))`` in a project's
urls.py. prometheus_client is imported only when the view is called, so
including the URLs without it installed leaves ``manage.py check`` to say so
(django_jobretry.E011) instead of failing the URL configuration.
"""
