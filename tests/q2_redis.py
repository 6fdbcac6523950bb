"""django-q2 with the Redis broker for the adapter's tests: the server, the settings, a cluster.

The tests need a Redis server on 127.0.0.1:6379 (``.ci/run`` starts one when
``redis-server`` exists). Without one they are skipped, and the reason says
so; with ``JOBRETRY_REQUIRE_REDIS=1`` (set by ``.ci/run`` when Redis is
there) they fail instead.

The test process itself keeps tests/settings.py (the ORM broker), which
django-q2 froze in ``django_q.conf.Conf`` at import. :func:`redis_q2`
switches that Conf to the Redis cluster's values for one test, as a web
process configured like the cluster would have them: ``async_task``, a
requeue and the scheduler then use Redis, and sign with the same salt (the
cluster name).

Each test run has a cluster name of its own (hence a Redis list of its own);
only this run's keys (``django_q:<name>:*``) are deleted, before and after.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from tests.q2_cluster import Cluster, running
from tests.settings_q2_redis import REDIS, REDIS_DB

#: This run's cluster name: its Redis list is ``django_q:<NAME>:q``.
NAME = f"jobretry-tests-redis-{os.getpid()}"
LIST = f"django_q:{NAME}:q"
SETTINGS = "tests.settings_q2_redis"
REQUIRE = "JOBRETRY_REQUIRE_REDIS"


def server() -> redis.Redis:
    """A client of the test Redis server; skips (or, with JOBRETRY_REQUIRE_REDIS=1, fails) without one."""
    client = redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        message = (
            f"no Redis server answers on 127.0.0.1:6379 ({exc}): the django-q2 Redis broker tests "
            "need one (redis-server --daemonize yes --save '' --port 6379)"
        )
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{message}; {REQUIRE}=1 forbids skipping them", pytrace=False)
        pytest.skip(message)
    return client


def forget(client: redis.Redis) -> None:
    """Delete this run's keys, and only them."""
    for key in client.scan_iter(f"django_q:{NAME}:*"):
        client.delete(key)


@pytest.fixture
def redis_q2(monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    """django-q2 in this process configured like the Redis cluster; yields a client of its server."""
    from django_q.conf import Conf

    client = server()
    for name, value in {
        "ORM": None,
        "REDIS": REDIS,
        "PREFIX": NAME,
        "CLUSTER_NAME": NAME,
        "Q_STAT": f"django_q:{NAME}:cluster",
    }.items():
        monkeypatch.setattr(Conf, name, value)
    forget(client)
    try:
        yield client
    finally:
        forget(client)
        client.close()


@pytest.fixture(scope="module")
def redis_cluster(django_db_setup: None) -> Iterator[Cluster]:
    """A running qcluster on the Redis broker for a test module; always stopped.

    One per module: a start costs seconds, and the tests' keys and rows do
    not meet (each waits on its own task ids and Execution keys; the
    database is emptied between tests, the cluster's Redis keys by
    :func:`redis_q2`).
    """
    server().close()
    yield from running(SETTINGS, {"JOBRETRY_Q2_REDIS_NAME": NAME})


def tick() -> None:
    """One run of django-q2's scheduler, as the cluster's guard makes about every 30 s.

    The same function on the same rows (a Schedule is taken under a row
    lock, so the cluster's own run and this one never both fire it), only
    more often, so that a retry's delay and not the 30 s period sets the pace.
    """
    from django_q.brokers import get_broker
    from django_q.scheduler import scheduler

    scheduler(broker=get_broker())


def wait_ticking(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Tick every 0.1 s until ``condition``; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        tick()
        if condition():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)
