"""The Prometheus view after a real run: counters from every writer, gauges from the status walks.

Jobs are enqueued, run by a real worker in burst (its heartbeat writes the
worker's counts at exit), then requeued and discarded through the service;
the view is read the way Prometheus reads it and parsed with
prometheus_client's own parser.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from django_jobretry import deadletters
from django_jobretry.conf.checks import check_metrics_view, check_settings
from django_jobretry.holds import breakers, pauses
from django_jobretry.models import DeadLetter
from tests.factories import WorkerProcessFactory
from tests.inprocess import run_until_settled
from tests.jobs_app import jobs

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.integration.metrics.metrics_urls"),
]

TOKEN = "metrics-token-for-the-tests-0123456789"  # noqa: S105 - a test value, not a secret
URL = "/metrics/"
PRIVATE_ARGUMENT = "card-4111-1111-1111-1111"


@pytest.fixture
def token(settings: Any) -> str:
    settings.JOBRETRY = {**settings.JOBRETRY, "METRICS_TOKEN": TOKEN}
    return TOKEN


def scrape(client: Client, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the view: (name, sorted labels) -> value."""
    response = client.get(URL, headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    text = response.content.decode()
    assert PRIVATE_ARGUMENT not in text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def event_of(name: str) -> str:
    """jobretry_jobs_started_total -> started."""
    return name.removeprefix("jobretry_jobs_").removesuffix("_total")


@pytest.mark.usefixtures("keep_signal_handlers")
def test_after_a_run_the_view_returns_every_counter_with_its_value(client: Client, token: str) -> None:
    jobs.record.enqueue(PRIVATE_ARGUMENT)
    jobs.record.enqueue("b")
    jobs.flaky.enqueue("f", 1)
    jobs.fatal.enqueue("dies-1")
    jobs.fatal.enqueue("dies-2")
    jobs.other_queue.enqueue("o")
    run_until_settled()
    requeued, discarded = DeadLetter.objects.order_by("id")
    deadletters.requeue(requeued.pk, actor="ops")
    deadletters.discard(discarded.pk, actor="ops")

    samples = scrape(client, Authorization=f"Bearer {token}")

    record, flaky, fatal, other = jobs.record.name, jobs.flaky.name, jobs.fatal.name, jobs.other_queue.name
    expected = {
        ("enqueued", record, "default"): 2,
        ("enqueued", flaky, "default"): 1,
        ("enqueued", fatal, "default"): 2,
        ("enqueued", other, "other"): 1,
        ("started", record, "default"): 2,
        ("started", flaky, "default"): 2,
        ("started", fatal, "default"): 2,
        ("started", other, "other"): 1,
        ("succeeded", record, "default"): 2,
        ("succeeded", flaky, "default"): 1,
        ("succeeded", other, "other"): 1,
        ("retried", flaky, "default"): 1,
        ("dead", fatal, "default"): 2,
        ("requeued", fatal, "default"): 1,
        ("discarded", fatal, "default"): 1,
    }
    counted = {
        (event_of(name), dict(labels)["task"], dict(labels)["queue"]): v
        for (name, labels), v in samples.items()
        if name.startswith("jobretry_jobs_")
    }
    assert counted == expected
    # The requeued job waits in the default queue; nothing is dead any more; the worker has gone.
    assert samples[("jobretry_queue_jobs", (("queue", "default"), ("state", "ready")))] == 1
    assert samples[("jobretry_queue_jobs", (("queue", "default"), ("state", "dead")))] == 0
    assert samples[("jobretry_queue_latency_seconds", (("queue", "default"),))] >= 0
    assert samples[("jobretry_workers", (("state", "live"),))] == 0


def test_a_staff_user_with_the_permission_reads_the_metrics(client: Client, make_user: Any) -> None:
    WorkerProcessFactory.create()
    WorkerProcessFactory.create_batch(2, lost=True)
    client.force_login(make_user("view_metrics", name="watcher"))
    samples = scrape(client)
    assert samples[("jobretry_workers", (("state", "live"),))] == 1
    assert samples[("jobretry_workers", (("state", "lost"),))] == 2


def test_without_credentials_403_with_a_wrong_token_401(client: Client, token: str, make_user: Any) -> None:
    assert client.get(URL).status_code == 403
    wrong = client.get(URL, headers={"Authorization": f"Bearer {token}x"})
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"].startswith("Bearer")
    assert client.get(URL, headers={"Authorization": f"Basic {token}"}).status_code == 401
    client.force_login(make_user(name="no-permission"))
    assert client.get(URL).status_code == 403
    assert client.post(URL, headers={"Authorization": f"Bearer {token}"}).status_code == 405


def test_no_token_is_accepted_when_none_is_configured(client: Client) -> None:
    assert client.get(URL, headers={"Authorization": "Bearer "}).status_code == 401


@pytest.mark.parametrize("bad", ["short", "x" * 15, "with spaces in the token", 12345678901234567890])
def test_a_bad_metrics_token_fails_the_checks_by_name(settings: Any, bad: object) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "METRICS_TOKEN": bad}
    [error] = [e for e in check_settings() if e.id == "django_jobretry.E010"]
    assert 'JOBRETRY["METRICS_TOKEN"]' in error.msg
    assert str(bad) not in error.msg  # a secret is never printed back


def test_the_view_without_prometheus_client_fails_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_metrics_view() == []
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # what an import finds when not installed
    [error] = check_metrics_view()
    assert error.id == "django_jobretry.E011"
    assert "django_jobretry.E011" in [e.id for e in run_checks(tags=["urls"])]


# --- schedules (tests/integration/schedules/schedule_story.py) --------------------------------------


def schedule_samples(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[Any, float]:
    """The schedule metrics: (name, schedule[, outcome]) -> value."""
    return {
        (name, dict(labels)["schedule"], *([dict(labels)["outcome"]] if len(labels) > 1 else [])): sample
        for (name, labels), sample in samples.items()
        if name.startswith("jobretry_schedule_")
    }


def test_each_schedule_its_last_success_next_slot_period_slots_and_pause(
    client: Client, token: str, settings: Any
) -> None:
    from tests.integration.schedules.schedule_story import SECRET, story

    told = story(settings)
    response = client.get(URL, headers={"Authorization": f"Bearer {token}"})
    assert SECRET not in response.content.decode()
    found = schedule_samples(scrape(client, Authorization=f"Bearer {token}"))
    rows = {name: told.row(name) for name in ("hourly", "nightly", "retired", "tick")}
    tick_success = rows["tick"].last_success_at
    assert tick_success is not None
    expected: dict[Any, float] = {
        ("jobretry_schedule_last_success_timestamp_seconds", "tick"): tick_success.timestamp(),
        # An interval's period is the interval; a daily cron's a day; none for a row not declared here.
        ("jobretry_schedule_period_seconds", "hourly"): 3600,
        ("jobretry_schedule_period_seconds", "nightly"): 86_400,
        ("jobretry_schedule_period_seconds", "tick"): 300,
    }
    for name, row in rows.items():
        expected[("jobretry_schedule_next_slot_timestamp_seconds", name)] = row.next_slot.timestamp()
        expected[("jobretry_schedule_paused", name)] = 1 if name == "hourly" else 0
        for outcome in ("run", "skipped", "missed", "refused"):
            ran = outcome == "run" and name in ("nightly", "tick")
            expected[("jobretry_schedule_slots_total", name, outcome)] = 1 if ran else 0
    assert found == expected


def test_one_query_for_all_schedules_whatever_their_number(settings: Any) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_jobretry.schedules import status
    from tests.factories import ScheduleFactory
    from tests.integration.schedules.schedule_story import story

    story(settings)
    for extra in (0, 20):
        ScheduleFactory.create_batch(extra)
        with CaptureQueriesContext(connection) as captured:
            families = {family.name: family for family in status.collect()}
        assert len(captured.captured_queries) == 1
        assert len(families["jobretry_schedule_paused"].samples) == 4 + extra


def test_the_period_is_the_longer_of_the_last_two_so_a_weekend_is_no_failure() -> None:
    """Twice the period before the next slot is at or before the slot two slots back (docs/metrics.md).

    So "no success for longer than twice the period" means two slots came due
    since the last success, the earlier with its whole period to succeed. The
    negative control, the current period alone, breaks it on Tuesdays after
    a weekend: Monday's one failure would already alert.
    """
    from datetime import UTC, datetime, timedelta
    from itertools import islice

    from django_jobretry.policy.slots import Cadence
    from django_jobretry.schedules.status import period

    def reaches_two_slots_back(measure: Any, cadence: Cadence, next_slot: datetime) -> bool:
        two_back = list(islice(cadence.slots_before(next_slot), 2))[1]
        return bool(next_slot - 2 * measure(cadence, next_slot) <= two_back)

    def current_only(cadence: Cadence, next_slot: datetime) -> timedelta:
        return next_slot - next(cadence.slots_before(next_slot))

    weekdays = Cadence(cron="0 3 * * 1-5")
    monday, tuesday = datetime(2026, 11, 30, 3, tzinfo=UTC), datetime(2026, 11, 24, 3, tzinfo=UTC)
    assert period(weekdays, monday) == timedelta(days=3)  # from Friday
    assert period(weekdays, tuesday) == timedelta(days=3)  # Monday's period began on Friday
    assert period(weekdays, datetime(2026, 11, 26, 3, tzinfo=UTC)) == timedelta(days=1)  # a Thursday
    month = list(islice(weekdays.slots_after(datetime(2026, 11, 1, tzinfo=UTC)), 23))
    assert all(reaches_two_slots_back(period, weekdays, slot) for slot in month)
    assert not all(reaches_two_slots_back(current_only, weekdays, slot) for slot in month)
    assert period(Cadence(every=timedelta(minutes=5)), monday) == timedelta(minutes=5)


def test_pauses_and_open_breakers_are_series_with_their_held_jobs(client: Client, token: str) -> None:
    assert not [key for key in scrape(client, Authorization=f"Bearer {token}") if key[0] == "jobretry_paused"]
    jobs.other_queue.enqueue("k")
    jobs.record.enqueue("k")
    pauses.pause(queue="other", actor="alice")
    breakers.hold_task(jobs.record.name, timedelta(minutes=5), None, job_id=0)
    samples = scrape(client, Authorization=f"Bearer {token}")
    assert samples[("jobretry_paused", (("kind", "queue"), ("name", "other")))] == 1
    assert samples[("jobretry_circuit_open", (("state", "open"), ("task_name", jobs.record.name)))] == 1
    assert samples[("jobretry_held_jobs", (("kind", "queue"), ("name", "other")))] == 1
    assert samples[("jobretry_held_jobs", (("kind", "circuit"), ("name", jobs.record.name)))] == 1
    pauses.resume(queue="other", actor="alice")
    breakers.close(jobs.record.name, actor="alice")
    after = scrape(client, Authorization=f"Bearer {token}")
    assert not [
        key for key in after if key[0] in {"jobretry_paused", "jobretry_circuit_open", "jobretry_held_jobs"}
    ]


def test_each_declared_limit_is_a_series_of_running_limit_and_held(client: Client, token: str) -> None:
    from tests.jobs_app import limited_jobs

    limited_jobs.one_per_tenant.bulk_enqueue([((1, 0), {}), ((1, 0), {}), ((2, 0), {})])
    samples = scrape(client, Authorization=f"Bearer {token}")
    labels = (("kind", "task"), ("name", limited_jobs.one_per_tenant.name), ("per_key", "true"))
    assert samples[("jobretry_limit_running", labels)] == 0
    assert samples[("jobretry_limit_concurrency", labels)] == 1
    assert samples[("jobretry_limit_held_jobs", labels)] == 3
    rated = (("kind", "task"), ("name", limited_jobs.sixty_a_second.name), ("per_key", "false"))
    assert ("jobretry_limit_concurrency", rated) not in samples  # a rate only: no concurrency series
    assert samples[("jobretry_limit_held_jobs", rated)] == 0
