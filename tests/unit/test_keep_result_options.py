"""``keep_result`` on ``@job`` and on a policy (docs/results.md): checked where declared; the task's wins."""

from __future__ import annotations

import pytest

from django_jobretry import InvalidJob, InvalidPolicy, RetryPolicy, job
from django_jobretry.conf.schema import validate
from django_jobretry.decorators import JobDefinition
from django_jobretry.registry import INLINE_POLICY, keeps_result, registry
from tests.jobs_app import result_jobs


def test_a_policy_keeps_no_result_unless_told() -> None:
    assert RetryPolicy().keep_result is False
    assert RetryPolicy(keep_result=True).keep_result is True


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_a_policy_s_keep_result_is_true_or_false(bad: object) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        RetryPolicy(keep_result=bad)  # type: ignore[arg-type]
    refused = (caught.value.field, caught.value.value, caught.value.allowed)
    assert refused == ("keep_result", bad, "True or False")


def test_keep_result_is_part_of_equality_and_repr() -> None:
    assert RetryPolicy(keep_result=True) != RetryPolicy()
    assert "keep_result=True" in repr(RetryPolicy(keep_result=True))


def test_a_settings_policy_takes_it_and_a_bad_one_is_check_e005() -> None:
    policies, problems = validate({"POLICIES": {"keeping": {"keep_result": True}}})
    assert (policies["keeping"].keep_result, problems) == (True, [])
    _, problems = validate({"POLICIES": {"keeping": {"keep_result": "yes"}}})
    assert [(p.id, p.msg) for p in problems] == [
        ("E005", 'JOBRETRY["POLICIES"]["keeping"]["keep_result"] = \'yes\' is invalid: True or False.')
    ]


def test_a_bad_keep_result_on_job_names_the_task_and_registers_nothing() -> None:
    name = "tests.unit.keep_result.refused"
    with pytest.raises(InvalidJob, match=f"keep_result 'yes' of task '{name}' is invalid: True, False"):
        job(name=name, keep_result="yes")(lambda: None)  # type: ignore[call-overload]
    assert registry.get(name) is None


@pytest.mark.parametrize(
    ("task", "policy", "kept"),
    [
        (result_jobs.total, "three", True),  # its own True
        (result_jobs.total_not_kept, "three", False),  # none given, and its policy keeps none
        (result_jobs.kept_by_policy, INLINE_POLICY, True),  # none given: its policy's
        (result_jobs.refused_by_task, INLINE_POLICY, False),  # its own False wins over its policy's
    ],
)
def test_the_task_s_own_option_wins_over_its_policy_s(
    task: JobDefinition[...], policy: str, kept: bool
) -> None:
    assert keeps_result(task.name, policy) is kept
