"""Step definitions for django_q2_import.feature: a real qcluster makes the failures."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django_q.models import Failure, OrmQ
from django_q.signing import SignedPackage
from django_q.tasks import async_task
from pytest_bdd import given, scenarios, then, when

from django_jobretry import deadletters
from django_jobretry.models import DeadLetter, DeadLetterSource
from tests.integration.conftest import cli_run
from tests.jobs_app.models import Execution
from tests.processes import wait_until
from tests.q2_cluster import Cluster, cluster

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["cluster"]  # the fixture, imported for pytest

scenarios("django_q2_import.feature")

TASKS = "tests.jobs_app.q2_tasks"
#: Seconds each wait on the cluster may take before the scenario fails instead of hanging.
DEADLINE = 45.0


@dataclass
class Adoption:
    dropped: str = ""
    buried: str = ""
    output: str = ""


@pytest.fixture
def adoption() -> Adoption:
    return Adoption()


def queued_ids() -> set[str]:
    return {str(SignedPackage.loads(row.payload)["id"]) for row in OrmQ.objects.all()}


@given("a django-q2 task that failed on the cluster and that django-q2 dropped")
def dropped(adoption: Adoption, cluster: Cluster) -> None:
    # Opted out of the adapter: django-q2's own handling, which acknowledges the failure.
    adoption.dropped = async_task(f"{TASKS}.opted_out", "imported", ack_failure=True)
    wait_until(
        lambda: Failure.objects.filter(pk=adoption.dropped).exists() and adoption.dropped not in queued_ids(),
        timeout=DEADLINE,
        what="django-q2 to record and drop the failure",
    )


@given("a django-q2 task that the adapter has made a dead letter")
def buried(adoption: Adoption, cluster: Cluster) -> None:
    adoption.buried = async_task(f"{TASKS}.two_attempts", "buried")
    wait_until(
        lambda: DeadLetter.objects.filter(external_id=adoption.buried).exists(),
        timeout=DEADLINE,
        what="the adapter's dead letter",
    )
    assert Failure.objects.filter(pk=adoption.buried).exists()  # django-q2 keeps its failure row too


@when("the operator imports django-q2's failures")
@when("the operator imports django-q2's failures again")
def run_import(adoption: Adoption) -> None:
    adoption.output = cli_run("import-django-q2")[0]


@then("the dropped task is one dead letter from django-q2, next to the adapter's")
def imported_once(adoption: Adoption) -> None:
    assert (
        # The adapter's own burial counts as imported already.
        "imported 1 of 2 django-q2 failures read as dead letters; 1 handled by an earlier import"
        in adoption.output
    )
    dead = DeadLetter.objects.get(external_id=adoption.dropped)
    assert (dead.source, dead.task_name, dead.args) == (
        DeadLetterSource.DJANGO_Q2,
        f"{TASKS}.opted_out",
        ["imported"],
    )
    assert "fails, opted out" in dead.last_error
    assert DeadLetter.objects.filter(external_id=adoption.buried).count() == 1


@then("nothing more is imported and there are still 2 dead letters")
def nothing_more(adoption: Adoption) -> None:
    assert (
        "imported 0 of 2 django-q2 failures read as dead letters; 2 handled by an earlier import"
        in adoption.output
    )
    assert DeadLetter.objects.count() == 2


@when("the operator requeues the imported dead letter")
def requeue(adoption: Adoption) -> None:
    again = deadletters.requeue(DeadLetter.objects.get(external_id=adoption.dropped).pk, actor="ops")
    assert isinstance(again, deadletters.Resubmitted)


@then("the cluster runs the task again")
def runs_again() -> None:
    wait_until(
        lambda: Execution.objects.filter(key="imported").count() == 2,
        timeout=DEADLINE,
        what="the requeued task to run on the cluster",
    )
