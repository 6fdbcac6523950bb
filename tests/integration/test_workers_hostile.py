"""Hand-edited rows of the workers table: every reader still shows them, and every worker still registers.

Anyone with database access can write any JSON into ``queues``, any interval
into ``lease``, any timestamp PostgreSQL accepts into the times. Each case
plants one such row with raw SQL beside a well-behaved worker's, then drives
every reader as an operator would (the workers admin, the dashboard, the
metrics view, `jobstatus` text and JSON) and a worker's registration, in
process and as a real `runworker`.
"""

from __future__ import annotations

import io
import json
import signal

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from django_jobretry.models import WorkerProcess
from django_jobretry.services.workers import beat
from tests.factories import WorkerProcessFactory
from tests.integration.conftest import Operator
from tests.integration.test_workers_table import me
from tests.processes import Workers, finish, spawn, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.integration.metrics_urls"),
]

#: Case name -> (column, SQL for its value): values no worker writes.
HOSTILE = {
    "queues-not-names": ("queues", """'[1, ["a"], null, {"q": 1}]'::jsonb"""),
    "queues-a-number": ("queues", "'5'::jsonb"),
    "queues-json-null": ("queues", "'null'::jsonb"),
    "queues-nested-5000-deep": ("queues", "(repeat('[', 5000) || repeat(']', 5000))::jsonb"),
    "lease-170-million-years": ("lease", "interval '170000000 years'"),
    "lease-minus-170-million-years": ("lease", "interval '-170000000 years'"),
    "lease-past-timedelta": ("lease", "interval '1000000000 days'"),
    "heartbeat-at-the-end-of-time": ("last_heartbeat_at", "'294276-12-31 23:30:00+00'"),
    "heartbeat-infinity": ("last_heartbeat_at", "'infinity'"),
    "started-minus-infinity": ("started_at", "'-infinity'"),
}
CASES = pytest.mark.parametrize("case", list(HOSTILE))


def plant(case: str) -> str:
    """A worker row with ``case``'s value written over a column, as a hand-written UPDATE would."""
    column, value = HOSTILE[case]
    worker_id = f"hostile:{case}"
    table = WorkerProcess._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (worker_id, host, pid, queues, concurrency, pool, version, lease,"
            " started_at, last_heartbeat_at, running_jobs)"
            " VALUES (%s, 'bad-host', 1, '[]', 1, 'thread', '0', interval '60 s', now(), now(), 0)",
            [worker_id],
        )
        cursor.execute(f"UPDATE {table} SET {column} = {value} WHERE worker_id = %s", [worker_id])
    return worker_id


def row_id(worker_id: str) -> int:
    """The row's primary key, without loading the row (which a bad value would fail)."""
    return WorkerProcess.objects.values_list("pk", flat=True).get(worker_id=worker_id)


def on_page(worker_id: str, html: str) -> bool:
    """Whether the page shows ``worker_id``, which the admin lets wrap after each colon."""
    return worker_id.replace(":", ":<wbr>") in html or worker_id in html


def jobstatus(*args: str) -> str:
    out = io.StringIO()
    call_command("jobstatus", *args, stdout=out)
    return out.getvalue()


@CASES
def test_every_reader_shows_the_row(case: str, superuser: Operator) -> None:
    good = WorkerProcessFactory.create(queues=["mail"])
    bad = plant(case)
    pk = row_id(bad)
    pages = {
        "workers": reverse("admin:django_jobretry_workerprocess_changelist"),
        "worker": reverse("admin:django_jobretry_workerprocess_change", args=[pk]),
        "dashboard": reverse("admin:django_jobretry_deadletter_dashboard"),
    }
    for name, url in pages.items():
        response = superuser.get(url)
        assert response.status_code == 200, name
        assert on_page(bad, response.text), name
    assert on_page(good.worker_id, superuser.get(pages["workers"]).text)

    metrics = superuser.get("/metrics/")
    assert metrics.status_code == 200
    samples = {
        sample.labels["state"]: sample.value
        for family in text_string_to_metric_families(metrics.content.decode())
        if family.name == "jobretry_workers"
        for sample in family.samples
    }
    assert samples["live"] + samples["lost"] == 2

    assert bad in jobstatus()
    report = json.loads(jobstatus("--json"))
    assert {row["worker_id"] for row in report["workers"]} == {good.worker_id, bad}
    assert report["workers_live"] + report["workers_lost"] == 2


@CASES
def test_other_workers_rows_never_stop_a_worker_registering(case: str) -> None:
    bad = plant(case)
    assert beat(me(), running=0).removed == []
    assert set(WorkerProcess.objects.values_list("worker_id", flat=True)) == {bad, me().worker_id}


def test_what_cannot_be_read_is_shown_as_unreadable(superuser: Operator) -> None:
    """Queues that are not a list of names read "unreadable" (null in JSON); an endless lease, as stored."""
    queues, lease = plant("queues-not-names"), plant("lease-170-million-years")
    report = {row["worker_id"]: row for row in json.loads(jobstatus("--json"))["workers"]}
    assert (report[queues]["queues"], report[queues]["lease_seconds"]) == (None, 60.0)
    assert (report[lease]["queues"], report[lease]["lease_seconds"]) == ([], None)
    line = next(line for line in jobstatus().splitlines() if queues in line)
    assert "unreadable" in line
    page = superuser.get(reverse("admin:django_jobretry_workerprocess_changelist")).text
    assert page.count("unreadable") == 1
    detail = superuser.get(reverse("admin:django_jobretry_workerprocess_change", args=[row_id(lease)]))
    assert "170000000 years" in detail.text


def test_a_real_worker_registers_beside_every_kind_of_bad_row(workers: Workers) -> None:
    planted = {plant(case) for case in HOSTILE}
    process = spawn(workers, "--lease", "3")
    wait_until(
        lambda: WorkerProcess.objects.filter(pid=process.pid).exists(),
        timeout=60,
        what="the worker to register",
    )
    process.send_signal(signal.SIGTERM)
    code, output = finish(process, timeout=60)
    assert code == 0, output
    assert "could not update the workers table" not in output
    assert set(WorkerProcess.objects.values_list("worker_id", flat=True)) == planted
