"""Steps of what_is_dying.feature: real workers bury the jobs, the admin dashboard counts them."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry import deadletters as service
from django_jobretry.models import DeadLetter
from tests.features.test_dead_letters import run_until_idle
from tests.features.test_operators import dashboard_page
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db(transaction=True)

scenarios("what_is_dying.feature")

TASK = "tests.jobs_app.jobs.fatal"


@given(parsers.parse("{count:d} jobs that fail fatally have died under a worker"))
def died(workers: list[subprocess.Popen[str]], count: int) -> None:
    for n in range(count):
        jobs.fatal.enqueue(f"dying-{n}")
    run_until_idle(workers)
    assert DeadLetter.objects.filter(task_name=TASK).count() == count


@when(parsers.parse("the operator requeues {requeued:d} of their dead letters and discards {discarded:d}"))
def requeue_and_discard(requeued: int, discarded: int) -> None:
    ids = list(DeadLetter.objects.filter(task_name=TASK).order_by("pk").values_list("pk", flat=True))
    for pk in ids[:requeued]:
        service.requeue(pk, actor="night-operator")
    for pk in ids[requeued : requeued + discarded]:
        service.discard(pk, actor="night-operator")


@then(
    parsers.parse(
        "the dashboard counts {count:d} deaths of that task in the last hour and in the last 24 hours"
    )
)
def counted(admin_user: Any, count: int) -> None:
    rows = {row["name"]: row for row in dashboard_page(admin_user).context["dying"]["tasks"]["rows"]}
    assert (str(rows[TASK]["last_hour"].count), str(rows[TASK]["last_day"].count)) == (str(count), str(count))


@then(parsers.parse("its chart of deaths per hour, last 24 hours, shows {count:d} in all"))
def charted(admin_user: Any, count: int) -> None:
    assert str(dashboard_page(admin_user).context["hourly"].total) == str(count)


@then(parsers.parse("{count:d} of their dead letters is kept"))
def kept(count: int) -> None:
    assert DeadLetter.objects.filter(task_name=TASK).count() == count
