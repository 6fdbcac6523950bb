"""Settings of the django-q2 child and its clusters: bench/settings_django_q2.py, adapter off, DEBUG off.

BENCH_Q2_WORKERS, BENCH_Q2_TIMEOUT and BENCH_Q2_RETRY come from the
environment of each ``qcluster`` (q2.py sets them per workload).
"""

import os

os.environ.setdefault("BENCH_Q2_ADAPTER", "0")

from bench.settings_django_q2 import *  # noqa: F403

DEBUG = False
