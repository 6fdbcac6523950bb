"""Negative controls of test_state_machine.py: the same machine against broken transitions must fail.

Each control breaks one transition and must be caught by the check meant to
catch it: a claim that does not count the attempt (docs/design.md#rule-1), a
success fenced by status only, and a retry or a burial written without the
fence (docs/design.md#rule-3). The lock that a ``retry_for`` policy takes
first is fenced too, but a write after it still checks the fence, so
breaking the lock alone changes nothing a test could see.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any
from unittest import mock

import pytest
from django.db import connection
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from django_jobretry.jobs import claimed, failures, statements
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.jobs.sql import END_LEASE, JOB
from tests.integration.jobs.test_state_machine import MACHINE_SETTINGS, JobStoreMachine, short_history

pytestmark = pytest.mark.django_db
__all__ = ["short_history"]  # the fixture, used by name


def claim_sql_without_counting(**filters: bool) -> str:
    """The claim, but the attempt is not counted (rule 1 broken)."""
    real = REAL_CLAIM_SQL(**filters)
    broken = real.replace("attempts = j.attempts + 1", "attempts = j.attempts")
    assert broken != real, "the control no longer breaks the claim: update it"
    return broken


def succeed_fenced_by_status_only(jobs: list[ClaimedJob], results: object = None) -> set[int]:
    """Success fenced by id and status, ignoring the attempt and the lease token (rule 3 broken)."""
    sql = f"""
        UPDATE {JOB} AS j SET status = 'succeeded', finished_at = statement_timestamp(), {END_LEASE}
        WHERE j.id = ANY(%(ids)s) AND j.status = 'running'
        RETURNING j.id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"ids": [job.id for job in jobs]})
        return {row[0] for row in cursor.fetchall()}


def unfenced(module: ModuleType, name: str, fence_in: ModuleType | None = None) -> Callable[..., Any]:
    """``module.name`` with the fence its SQL reads from ``fence_in`` (default ``module``)
    reduced to the id: a stale failure is written (rule 3 broken)."""
    real = getattr(module, name)

    def broken(*args: Any, **kwargs: Any) -> Any:
        with mock.patch.object(fence_in or module, "FENCE", "TRUE"):
            return real(*args, **kwargs)

    return broken


class FenceMachine(JobStoreMachine):
    """The machine without the operators' rules (cancel, requeue, discard, prune).

    Every control here is caught by a claim, a completion, a lost lease or a
    stale completion; with the operators' five rules drawn too, the
    derandomized search for the unfenced retry took 40 s alone and over 100 s
    in the suite. A rule set to None is not a rule (hypothesis.stateful).
    """

    cancel = requeue = discard = prune_succeeded = prune_dead_letters = None  # type: ignore[assignment]


REAL_CLAIM_SQL = statements.claim_sql
STALE_FAILURE = "^a stale (retryable|fatal) (changed|reached)"
# First failure, no shrinking; the fence controls (reclaim, then stale completion) took 5-270 examples
# with a random seed (several minutes under coverage, at worst), so the search is derandomized: the
# same examples on every run, each control caught within seconds by FenceMachine.
CONTROL_SETTINGS = settings(MACHINE_SETTINGS, max_examples=1000, phases=[Phase.generate], derandomize=True)


@pytest.mark.timeout(600)  # that search outlasted the suite's 120 s over TCP to a busy server
@pytest.mark.usefixtures("short_history")
@pytest.mark.parametrize(
    ("module", "name", "broken", "caught_by"),
    [
        (statements, "claim_sql", claim_sql_without_counting, "^claim: got"),
        (claimed, "succeed", succeed_fenced_by_status_only, "^a stale success was recorded"),
        (
            failures,
            "schedule_retries",
            unfenced(failures, "schedule_retries", fence_in=statements),
            STALE_FAILURE,
        ),
        (claimed, "bury", unfenced(claimed, "bury", fence_in=statements), STALE_FAILURE),
    ],
)
def test_the_machine_catches_a_broken_transition(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str, broken: Callable[..., Any], caught_by: str
) -> None:
    monkeypatch.setattr(module, name, broken)
    with pytest.raises(AssertionError, match=caught_by):
        run_state_machine_as_test(FenceMachine, settings=CONTROL_SETTINGS)
