"""A project's urls.py with the metrics view included the documented way (docs/metrics.md)."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics/", include("django_jobretry.metrics.urls")),
]
