"""tests/recovery.py: a test stopped mid-statement leaves the next one a working connection, empty tables."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.utils import OperationalError

from django_jobretry.models import Job
from tests.factories import JobFactory
from tests.recovery import reset_broken_connections

BUSY = "another command is already in progress"

pytestmark = pytest.mark.django_db(transaction=True)

SLEEPING = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep(600)%%'"
)


def stop_mid_statement() -> None:
    """What pytest-timeout leaves behind: a statement sent on the test's connection, never read."""
    connection.ensure_connection()
    connection.connection.pgconn.send_query(b"SELECT pg_sleep(600) -- stopped mid-statement")
    with pytest.raises(OperationalError, match=BUSY), connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def test_a_connection_left_mid_statement_is_reset_and_the_tables_flushed(pytestconfig: pytest.Config) -> None:
    JobFactory.create()
    stop_mid_statement()
    assert reset_broken_connections(pytestconfig) == ["default"]
    with connection.cursor() as cursor:
        cursor.execute(SLEEPING)
        assert cursor.fetchone() == (0,)
    assert Job.objects.count() == 0


def test_negative_control_without_the_reset_the_flush_after_it_fails(pytestconfig: pytest.Config) -> None:
    stop_mid_statement()
    with pytest.raises(OperationalError, match=BUSY):
        call_command("flush", interactive=False, verbosity=0)  # what pytest-django runs after the test
    assert reset_broken_connections(pytestconfig) == ["default"]  # and the next test starts clean


def test_a_connection_that_answers_is_left_alone(pytestconfig: pytest.Config) -> None:
    job = JobFactory.create()
    assert reset_broken_connections(pytestconfig) == []
    assert Job.objects.filter(pk=job.pk).exists()
