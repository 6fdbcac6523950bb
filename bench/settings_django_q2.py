"""Settings of bench/django_q2.py: django-q2 alone, or with the adapter, chosen by the environment.

The benchmark starts ``manage.py qcluster`` with these settings once per
mode, and a cluster reads its settings once, at start; so the mode and the
cluster's options are environment variables, which bench/django_q2.py sets
for each cluster it starts:

* ``BENCH_Q2_ADAPTER``: ``1`` (the default) adds the adapter app and
  ``JOBRETRY["DJANGO_Q2"]`` with the policy ``bench-q2`` (5 attempts, backoff
  1 ms doubling up to 10 ms, no jitter); ``0`` leaves both out: django-q2
  exactly as a project without django-jobretry's adapter runs it.
* ``BENCH_Q2_WORKERS``, ``BENCH_Q2_TIMEOUT``, ``BENCH_Q2_RETRY``: Q_CLUSTER's
  ``workers``, ``timeout`` and ``retry``.
* ``BENCH_Q2_CONN_MAX_AGE``: the database's ``CONN_MAX_AGE`` (default 60). django-q2
  calls ``close_old_connections()`` before nearly every query, so at Django's
  default of 0 its processes open a new connection for each of them.

Everything else is bench/settings.py (the test settings); Q_CLUSTER is the
ORM broker on the same database, every successful task saved
(``save_limit`` 0), django-q2 counting no attempts (``max_attempts`` 0).
"""

import os

from bench.settings import *  # noqa: F403

ADAPTER = os.environ.get("BENCH_Q2_ADAPTER", "1") == "1"
ADAPTER_APP = "django_jobretry.contrib.django_q2"

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != ADAPTER_APP]  # noqa: F405
_jobretry = {key: value for key, value in JOBRETRY.items() if key != "DJANGO_Q2"}  # noqa: F405
_jobretry["POLICIES"] = {
    **_jobretry["POLICIES"],
    "bench-q2": {"max_attempts": 5, "base_delay": 0.001, "multiplier": 2, "max_delay": 0.01, "jitter": 0},
}
if ADAPTER:
    INSTALLED_APPS.append(ADAPTER_APP)  # after django_q and django_jobretry, as the adapter requires
    _jobretry["DJANGO_Q2"] = {"POLICY": "bench-q2"}
JOBRETRY = _jobretry

DATABASES = {
    **DATABASES,  # noqa: F405
    "default": {**DATABASES["default"], "CONN_MAX_AGE": int(os.environ.get("BENCH_Q2_CONN_MAX_AGE", "60"))},  # noqa: F405
}

Q_CLUSTER = {
    "name": "jobretry-bench",
    "orm": "default",
    "workers": int(os.environ.get("BENCH_Q2_WORKERS", "2")),
    "timeout": int(os.environ.get("BENCH_Q2_TIMEOUT", "30")),
    "retry": int(os.environ.get("BENCH_Q2_RETRY", "60")),
    "max_attempts": 0,
    "save_limit": 0,
    "catch_up": False,
    "log_level": "WARNING",
}
