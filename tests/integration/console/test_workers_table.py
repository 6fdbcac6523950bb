"""The workers table: registration, heartbeats, clean exits and lost workers (console/workers.py).

The heartbeat thread runs for real, on its own connection, with a scripted
number of beats (as in test_heartbeat.py). Real `runworker` processes, and
a SIGKILL, are in test_worker_registry_processes.py.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.db.models.functions import Now

from django_jobretry.console import workers
from django_jobretry.models import Job, WorkerProcess
from django_jobretry.worker import WorkerOptions
from django_jobretry.worker.heartbeat import Heartbeat, registration
from django_jobretry.worker.lifecycle import Shift
from tests.attempts import LEASE, OWNER, claim_one
from tests.factories import WorkerProcessFactory
from tests.integration.worker.test_heartbeat import Beats
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def me(worker_id: str = OWNER, **changes: Any) -> workers.Registration:
    """A registration as Worker builds it: queues default and mail, concurrency 3."""
    options = WorkerOptions(queues=["default", "mail"], concurrency=3)
    return replace(registration(worker_id, "test-host", options, LEASE), **changes)


class TestBeat:
    def test_the_first_beat_registers_the_worker(self) -> None:
        beat = workers.beat(me(), running=0)
        row = WorkerProcess.objects.with_status().get()
        assert (row.worker_id, row.host, row.queues, row.concurrency, row.pool) == (
            OWNER,
            "test-host",
            ["default", "mail"],
            3,
            "thread",
        )
        assert row.lease == timedelta(seconds=LEASE)
        assert row.version == workers.package_version()
        assert row.live is True  # type: ignore[attr-defined]
        assert row.started_at == row.last_heartbeat_at == beat.started_at
        assert beat.removed == []

    def test_later_beats_refresh_the_heartbeat_and_the_running_count(self) -> None:
        first = workers.beat(me(), running=0)
        WorkerProcess.objects.update(last_heartbeat_at=Now() - timedelta(seconds=5))
        workers.beat(me(), running=2, started_at=first.started_at)
        row = WorkerProcess.objects.get()
        assert row.running_jobs == 2
        assert row.started_at == first.started_at
        assert WorkerProcess.objects.filter(last_heartbeat_at__gt=Now() - timedelta(seconds=5)).exists()

    def test_a_worker_whose_row_was_removed_comes_back_with_its_start_time(self) -> None:
        first = workers.beat(me(), running=0)
        WorkerProcess.objects.all().delete()
        again = workers.beat(me(), running=1, started_at=first.started_at)
        assert again.started_at == first.started_at
        assert WorkerProcess.objects.get().started_at == first.started_at

    def test_a_clean_exit_removes_the_row(self) -> None:
        workers.beat(me(), running=0)
        other = WorkerProcessFactory.create()
        assert workers.unregister(OWNER) is True
        assert list(WorkerProcess.objects.all()) == [other]
        assert workers.unregister(OWNER) is False


class TestLostWorkers:
    def test_a_worker_past_its_lease_is_lost_and_kept_for_a_while(self) -> None:
        live = WorkerProcessFactory.create()
        lost = WorkerProcessFactory.create(lost=True)
        assert list(WorkerProcess.objects.live()) == [live]
        assert list(WorkerProcess.objects.lost()) == [lost]
        assert workers.beat(me(), running=0).removed == []  # lost, but still shown
        assert WorkerProcess.objects.filter(pk=lost.pk).exists()

    def test_any_live_worker_removes_workers_lost_longer_than_lost_kept(self) -> None:
        gone = WorkerProcessFactory.create(lost=True)
        recent = WorkerProcessFactory.create(lost=True)
        WorkerProcess.objects.filter(pk=gone.pk).update(
            last_heartbeat_at=Now() - gone.lease - workers.LOST_KEPT - timedelta(seconds=1)
        )
        assert workers.beat(me(), running=0).removed == [gone.worker_id]
        assert set(WorkerProcess.objects.values_list("worker_id", flat=True)) == {OWNER, recent.worker_id}

    def test_the_lease_is_each_workers_own(self) -> None:
        """A worker started with --lease 600 is not lost after the default 60 s."""
        patient = WorkerProcessFactory.create(lease=timedelta(seconds=600))
        WorkerProcess.objects.filter(pk=patient.pk).update(last_heartbeat_at=Now() - timedelta(seconds=120))
        assert list(WorkerProcess.objects.live()) == [patient]

    def test_a_worker_never_removes_its_own_row(self) -> None:
        """Back from a stall longer than lease + LOST_KEPT, a worker refreshes its row instead."""
        first = workers.beat(me(), running=0)
        stalled = Now() - timedelta(seconds=LEASE) - workers.LOST_KEPT - timedelta(minutes=1)
        WorkerProcess.objects.update(last_heartbeat_at=stalled)
        assert workers.beat(me(), running=0, started_at=first.started_at).removed == []
        assert WorkerProcess.objects.live().get().worker_id == OWNER


class TestHeartbeatThread:
    def test_registers_at_once_beats_and_removes_the_row_when_stopped(self) -> None:
        seen: list[tuple[int, bool]] = []
        jobs.record.enqueue("a")
        jobs.record.enqueue("b")
        claimed = [claim_one(), claim_one()]

        def running() -> list[object]:
            row = WorkerProcess.objects.with_status().get()
            seen.append((row.running_jobs, row.live))  # type: ignore[attr-defined]
            return claimed  # type: ignore[return-value]

        thread = Heartbeat(
            worker_id=OWNER,
            running=running,  # type: ignore[arg-type]
            lease_seconds=LEASE,
            every=0,
            stop=Beats(3),  # type: ignore[arg-type]
            shift=Shift(me(), WorkerOptions(), threading.Event()),
        )
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert seen == [(0, True), (2, True), (2, True)]  # registered before the first beat
        assert not WorkerProcess.objects.exists()  # removed when stopped

    def test_a_broken_workers_table_never_touches_the_leases(self, caplog: pytest.LogCaptureFixture) -> None:
        """A row PostgreSQL refuses (here a host longer than the column) is logged once; leases go on."""
        jobs.record.enqueue("a")
        job = claim_one()
        Job.objects.filter(pk=job.id).update(lease_expires_at=Now() + timedelta(seconds=1))
        caplog.set_level(logging.DEBUG, logger="django_jobretry")
        thread = Heartbeat(
            worker_id=OWNER,
            running=lambda: [job],
            lease_seconds=LEASE,
            every=0,
            stop=Beats(3),  # type: ignore[arg-type]
            shift=Shift(me(host="h" * 300), WorkerOptions(), threading.Event()),
        )
        thread.start()
        thread.join(timeout=30)
        failures = [r for r in caplog.records if r.getMessage().startswith("could not update the workers")]
        assert [r.levelno for r in failures] == [logging.WARNING] + [logging.DEBUG] * 3
        assert "h" * 300 not in caplog.text  # SQLSTATE and class only, never PostgreSQL's message
        assert Job.objects.filter(
            pk=job.id, lease_expires_at__gt=Now() + timedelta(seconds=LEASE / 2)
        ).exists()
        assert not WorkerProcess.objects.exists()
