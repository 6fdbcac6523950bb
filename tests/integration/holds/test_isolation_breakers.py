"""One bad breaker row fails alone: the heartbeat moves the others on and names the bad one in the log.

Hostile rows are written straight into the table, as an older deploy, a
hand-made fix or a row written before the schema refused it may
leave them. A failure the schema can never refuse is made with a trigger
that raises for one task: the database refuses that row's update, as it
would for any value the worker did not expect.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction

from django_jobretry.holds import breakers
from django_jobretry.holds.pauses import Holds
from django_jobretry.models import Circuit, CircuitState, Job, JobStatus
from tests.integration.hostile import without_checks
from tests.processes import db_now

pytestmark = pytest.mark.django_db

GOOD, BAD = "tests.good.task", "tests.bad.task"


def open_breaker(task: str, **columns: object) -> None:
    """An open breaker whose cooldown is over: the next beat probes or closes it."""
    now = db_now()
    values: dict[str, Any] = {
        "task_name": task,
        "state": CircuitState.OPEN,
        "opened_at": now - timedelta(hours=1),
        "open_until": now - timedelta(seconds=1),
        "opens": 1,
        "cooldown_seconds": 30.0,
        "max_cooldown_seconds": 900.0,
        "release_per_second": 10.0,
        **columns,
    }
    names = ", ".join(values)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Circuit._meta.db_table} ({names}) VALUES ({', '.join(['%s'] * len(values))})",
            list(values.values()),
        )


def state(task: str) -> str:
    return Circuit.objects.get(task_name=task).state


def skipped_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, object]]:
    return [
        (record.levelno, getattr(record, "task_name", None))
        for record in caplog.records
        if getattr(record, "outcome", None) == "skipped_alone"
    ]


def test_a_release_rate_of_zero_closes_at_the_default_rate_and_names_the_breaker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before: ZeroDivisionError in every beat, so no breaker moved on and this one held its jobs for ever."""
    without_checks(Circuit, "jobretry_circuit_release_rate")
    open_breaker(BAD, release_per_second=0.0)
    open_breaker(GOOD)
    with caplog.at_level(logging.INFO, "django_jobretry"):
        breakers.beat()
    assert (state(BAD), state(GOOD)) == (CircuitState.CLOSED, CircuitState.CLOSED)
    replaced = [r for r in caplog.records if getattr(r, "outcome", None) == "circuit_rate_replaced"]
    assert [(r.levelno, r.task_name) for r in replaced] == [(logging.WARNING, BAD)]  # type: ignore[attr-defined]
    assert BAD in replaced[0].getMessage()


def test_an_operator_closes_a_breaker_of_rate_zero_and_its_held_jobs_are_released() -> None:
    without_checks(Circuit, "jobretry_circuit_release_rate")
    open_breaker(BAD, release_per_second=0.0, open_until=db_now() + timedelta(hours=1))
    held = Job.objects.create(task_name=BAD, max_attempts=3, status=JobStatus.READY, run_at=db_now())
    assert breakers.close(BAD, actor="alice") is True
    assert state(BAD) == CircuitState.CLOSED
    assert Job.objects.get(pk=held.pk).run_at <= db_now()


def test_a_breaker_the_database_refuses_to_move_is_skipped_and_named_once_per_stretch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    open_breaker(BAD)
    open_breaker(GOOD)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.task_name = '{BAD}' THEN RAISE EXCEPTION 'refused' USING ERRCODE = '22023'; END IF; "
            "RETURN NEW; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER refuse BEFORE UPDATE ON {Circuit._meta.db_table} "
            "FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse()"
        )
    heartbeat = Holds()  # the heartbeat's duty, as a worker runs it each beat
    with caplog.at_level(logging.DEBUG, "django_jobretry"):
        heartbeat.beat(0)
        assert (state(BAD), state(GOOD)) == (CircuitState.OPEN, CircuitState.CLOSED)
        open_breaker("tests.third.task")
        heartbeat.beat(0)  # the bad one fails again: logged at DEBUG; the new one moves on
    assert state("tests.third.task") == CircuitState.CLOSED
    assert skipped_lines(caplog) == [(logging.ERROR, BAD), (logging.DEBUG, BAD)]
    line = next(r for r in caplog.records if getattr(r, "outcome", None) == "skipped_alone")
    assert line.getMessage().startswith(f"circuit of task {BAD} skipped: could not move its breaker on")
    assert line.sqlstate == "22023"  # type: ignore[attr-defined]
    assert "refused" not in line.getMessage()  # a database message may quote the row: never logged


@pytest.mark.parametrize(
    ("column", "value", "check"),
    [
        ("release_per_second", 0.0, "jobretry_circuit_release_rate"),
        ("release_per_second", -1.0, "jobretry_circuit_release_rate"),
        ("release_per_second", math.inf, "jobretry_circuit_release_rate"),
        ("release_per_second", math.nan, "jobretry_circuit_release_rate"),
        ("cooldown_seconds", math.inf, "jobretry_circuit_cooldowns"),
        ("cooldown_seconds", math.nan, "jobretry_circuit_cooldowns"),
        ("cooldown_seconds", -1.0, "jobretry_circuit_cooldowns"),
        ("max_cooldown_seconds", 366 * 86400.0, "jobretry_circuit_cooldowns"),
    ],
)
def test_the_schema_refuses_a_breaker_no_worker_can_compute_with(
    column: str, value: float, check: str
) -> None:
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        open_breaker(BAD, **{column: value})
    assert getattr(refused.value.__cause__.diag, "constraint_name", None) == check
    open_breaker(BAD, **{column: 1.0})  # the same row with a usable value is stored
