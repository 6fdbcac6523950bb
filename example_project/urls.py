"""URLs of the example site: the Django admin is where dead letters are handled."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
