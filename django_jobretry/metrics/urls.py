"""``path("metrics/", include("django_jobretry.metrics.urls"))``: the Prometheus view at metrics/."""

from django.urls import path

from django_jobretry.metrics import metrics

urlpatterns = [path("", metrics, name="jobretry-metrics")]
