"""tests.settings with django-q2's Redis broker instead of the ORM broker (tests/q2_redis.py).

django-q2 freezes Q_CLUSTER when first imported, so a Redis cluster needs a
settings module of its own: the qcluster subprocess of the Redis tests runs
with this one. The cluster name (hence the Redis list, ``django_q:<name>:q``)
comes from the environment, so that two test runs on one Redis server do
not take each other's tasks; the database number keeps them off db 0.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import Q_CLUSTER as ORM_CLUSTER

REDIS_DB = int(os.environ.get("JOBRETRY_Q2_REDIS_DB", "9"))
REDIS = {"host": "127.0.0.1", "port": 6379, "db": REDIS_DB}

Q_CLUSTER = {
    **{key: value for key, value in ORM_CLUSTER.items() if key not in ("orm", "poll")},
    "name": os.environ.get("JOBRETRY_Q2_REDIS_NAME", "jobretry-tests-redis"),
    "redis": REDIS,
}
