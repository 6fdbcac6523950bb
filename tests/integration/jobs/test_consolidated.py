"""The pieces every surface now shares: the policy lookup, redaction, signals, named states.

Each replaced two or three copies that behaved differently; these tests pin
the one behaviour that is left.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import override_settings

from django_jobretry import FatalError, RetryPolicy, current_job, deadletters, job, signals
from django_jobretry.context import JobContext
from django_jobretry.display.redaction import redacted_payload
from django_jobretry.exceptions import UnknownPolicy
from django_jobretry.jobs.claimed import Failed
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.registry import INLINE_POLICY, policy_for, resolve_policy
from django_jobretry.worker.runner import Runner
from tests.attempts import claim_one, record_failure
from tests.factories import DeadLetterFactory
from tests.jobs_app import jobs


def _policy_fallbacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "outcome", None) == "policy_fallback"]


class TestPolicyLookup:
    def test_a_settings_policy_is_found_by_name_without_a_warning(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        assert policy_for("any.task", "three").max_attempts == 3
        assert _policy_fallbacks(caplog) == []

    def test_an_inline_policy_is_the_registered_tasks(self, caplog: pytest.LogCaptureFixture) -> None:
        assert policy_for(jobs.budgeted.name, INLINE_POLICY) is jobs.BUDGETED
        assert _policy_fallbacks(caplog) == []

    def test_an_unknown_name_falls_back_to_default_and_says_so(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        with caplog.at_level(logging.WARNING, logger="django_jobretry"):
            policy = policy_for("shop.sync", "renamed-policy")
        assert policy == policy_for("shop.sync", "default")
        [record] = _policy_fallbacks(caplog)
        assert (record.task, record.policy) == ("shop.sync", "renamed-policy")  # type: ignore[attr-defined]
        assert "no policy 'renamed-policy'" in record.getMessage()

    def test_an_unregistered_inline_task_falls_back_and_says_so(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        with caplog.at_level(logging.WARNING, logger="django_jobretry"):
            policy = policy_for("gone.from.this.deploy", INLINE_POLICY)
        assert policy == policy_for("x", "default")
        [record] = _policy_fallbacks(caplog)
        assert "not registered" in record.getMessage()

    def test_enqueue_time_resolution_is_strict(self) -> None:
        with pytest.raises(UnknownPolicy, match="'nope'"):
            resolve_policy("nope")
        assert resolve_policy(jobs.BUDGETED) == (INLINE_POLICY, jobs.BUDGETED)


@pytest.mark.django_db
class TestRequeueUnderARenamedPolicy:
    def test_the_requeued_job_gets_the_fallback_policys_limit(self, caplog: pytest.LogCaptureFixture) -> None:
        dead = DeadLetterFactory.create(policy_name="renamed-policy", max_attempts=3)
        with caplog.at_level(logging.WARNING, logger="django_jobretry"):
            job = deadletters.requeue(dead.pk, actor="ops")
        assert job.max_attempts == policy_for("x", "default").max_attempts
        assert len(_policy_fallbacks(caplog)) == 1


def _mutating_redactor(
    task_name: str, args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Rewrites its input in place, as careless redactors do."""
    kwargs["card"]["number"] = "****"
    args[0] = "hidden"
    return args, kwargs


def _failing_redactor(task_name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    raise ValueError(f"cannot redact {kwargs}")


class TestRedaction:
    def test_without_a_redactor_the_arguments_are_copies(self) -> None:
        kwargs = {"card": {"number": "4242"}}
        shown = redacted_payload("t", ["a"], kwargs)
        assert (shown.args, shown.kwargs, shown.redacted, shown.failed) == (["a"], kwargs, False, None)
        shown.kwargs["card"]["number"] = "changed"
        assert kwargs == {"card": {"number": "4242"}}

    @override_settings(JOBRETRY={"PAYLOAD_REDACTOR": f"{__name__}._mutating_redactor"})
    def test_a_redactor_that_mutates_its_input_cannot_change_the_row(self) -> None:
        args, kwargs = ["secret"], {"card": {"number": "4242"}}
        shown = redacted_payload("t", args, kwargs)
        assert (shown.args, shown.kwargs, shown.redacted) == (["hidden"], {"card": {"number": "****"}}, True)
        assert (args, kwargs) == (["secret"], {"card": {"number": "4242"}})

    @override_settings(JOBRETRY={"PAYLOAD_REDACTOR": f"{__name__}._failing_redactor"})
    def test_a_failing_redactor_hides_everything_and_logs_no_argument(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        with caplog.at_level(logging.WARNING, logger="django_jobretry"):
            shown = redacted_payload("shop.charge", [], {"card": "4242-secret"})
        assert (shown.args, shown.kwargs, shown.failed) == (None, None, "ValueError")
        [record] = [r for r in caplog.records if getattr(r, "outcome", None) == "redactor_failed"]
        assert "4242-secret" not in record.getMessage()
        assert record.exc_info is None


def test_arguments_stored_as_undecodable_text_are_never_shown() -> None:
    shown = redacted_payload("t", "[[[[", {})
    assert (shown.args, shown.kwargs, shown.undecodable) == (None, None, True)


class TestSignalSending:
    def test_a_failing_receiver_is_logged_and_the_others_still_run(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        heard: list[int] = []

        def broken(**kwargs: Any) -> None:
            raise RuntimeError("receiver bug")

        def listening(**kwargs: Any) -> None:
            heard.append(kwargs["job_id"])

        signals.job_succeeded.connect(broken)
        signals.job_succeeded.connect(listening)
        try:
            with caplog.at_level(logging.ERROR, logger="django_jobretry"):
                signals.send(signals.job_succeeded, object, {"job_id": 7}, job_id=7)
        finally:
            signals.job_succeeded.disconnect(broken)
            signals.job_succeeded.disconnect(listening)
        assert heard == [7]
        [record] = [r for r in caplog.records if getattr(r, "outcome", None) == "signal_error"]
        assert (record.job_id, record.error_class) == (7, "RuntimeError")  # type: ignore[attr-defined]


@pytest.mark.django_db
class TestNamedStates:
    def test_live_ready_and_retrying(self) -> None:
        running = jobs.record.enqueue("running")
        claimed = claim_one()
        fresh = jobs.record.enqueue("fresh")
        retrying = jobs.record.enqueue("retrying")
        done = jobs.record.enqueue("done")
        Job.objects.filter(pk=retrying.pk).update(attempts=1)
        Job.objects.filter(pk=done.pk).update(status=JobStatus.SUCCEEDED, finished_at=done.enqueued_at)
        assert claimed.id == running.pk
        assert set(Job.objects.ready().values_list("pk", flat=True)) == {fresh.pk, retrying.pk}
        assert list(Job.objects.retrying().values_list("pk", flat=True)) == [retrying.pk]
        assert set(Job.objects.live().values_list("pk", flat=True)) == {running.pk, fresh.pk, retrying.pk}


#: What the probe handler saw, one context per run.
SEEN: list[JobContext | None] = []


@job(name="tests.consolidated.context_probe", policy=RetryPolicy(max_attempts=1, base_delay=1, max_delay=1))
def context_probe() -> None:
    SEEN.append(current_job())
    raise FatalError("dies every time, to be requeued")


@pytest.mark.django_db(transaction=True)  # the runner closes connections that are inside a transaction
class TestOriginalJobId:
    def test_a_requeued_job_knows_where_its_chain_started(self) -> None:
        SEEN.clear()
        first = context_probe.enqueue()
        runner = Runner(0, inbox=None, outbox=None, wake=None, sender=object)  # type: ignore[arg-type]
        for _ in range(3):
            outcome = runner.execute(claim_one())
            assert isinstance(outcome, Failed)
            record_failure(outcome.job, outcome.error)
            deadletters.requeue(DeadLetter.objects.get().pk, actor="ops")
        assert [(c.original_job_id, c.requeue_count) for c in SEEN if c] == [
            (first.pk, 0),
            (first.pk, 1),
            (first.pk, 2),
        ]
        assert len({c.job_id for c in SEEN if c}) == 3
