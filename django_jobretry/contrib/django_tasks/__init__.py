"""The backend for Django's task framework (``django.tasks``, Django 6.0+): tasks run by our workers.

One room, beside ``contrib/django_q2``: the backend and its checks
(backend.py), its task and result classes, with the ``@task(...)`` options
on Django 6.1 (task_class.py), a task run as a job (runs.py) and a job row
read as a ``TaskResult`` (results.py). ``TASKS["BACKEND"]`` names it by its
public path, ``django_jobretry.backends.JobRetryBackend``; see
docs/django-tasks.md.
"""
