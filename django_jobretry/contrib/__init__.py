"""Adapters to other task systems (layer 5): django-q2 (a Django app of its own) and django.tasks."""
