"""A URL configuration that imports tests/task_modules/views.py, as a site's urls.py imports its views."""

from django.urls import path

from tests.task_modules import views

urlpatterns = [path("send/", views.send)]
