"""Every fatal verdict of the policy says which rule made it: the dead-letter page shows it.

Retryable verdicts carry no rule, and the rule is not part of a verdict's
equality: it explains the kind, it is not another kind.
"""

from __future__ import annotations

import pytest

from django_jobretry.policy import Classification, ErrorKind, FatalError, RetryableError, RetryPolicy


class PaymentRefused(FatalError):
    pass


@pytest.mark.parametrize(
    ("policy", "error", "rule"),
    [
        pytest.param(RetryPolicy(), FatalError("x"), "FatalError raised by the job", id="fatal-error"),
        pytest.param(
            RetryPolicy(), PaymentRefused(), "PaymentRefused (a FatalError) raised by the job", id="subclass"
        ),
        pytest.param(
            RetryPolicy(fatal_errors=[ValueError]),
            ValueError(),
            "ValueError is in the fatal_errors of policy 'webhooks'",
            id="listed",
        ),
        pytest.param(
            RetryPolicy(fatal_errors=[LookupError]),
            KeyError(),
            "KeyError is a subclass of LookupError, which is in the fatal_errors of policy 'webhooks'",
            id="listed-base-class",
        ),
        pytest.param(
            RetryPolicy(unknown_errors="fatal"),
            OSError(),
            "OSError is in neither error list of policy 'webhooks', whose unknown_errors is 'fatal'",
            id="unknown-errors-fatal",
        ),
    ],
)
def test_a_fatal_verdict_names_its_rule(policy: RetryPolicy, error: BaseException, rule: str) -> None:
    verdict = policy.classify(error, name="webhooks")
    assert (verdict.kind, verdict.rule) == (ErrorKind.FATAL, rule)


def test_without_a_name_the_rule_says_the_policy() -> None:
    verdict = RetryPolicy(fatal_errors=[ValueError]).classify(ValueError())
    assert verdict.rule == "ValueError is in the fatal_errors of the policy"


@pytest.mark.parametrize(
    "error", [RetryableError("x"), ConnectionError(), KeyError()], ids=["raised", "listed", "unknown"]
)
def test_a_retryable_verdict_has_no_rule(error: BaseException) -> None:
    verdict = RetryPolicy(retryable_errors=[ConnectionError]).classify(error, name="webhooks")
    assert (verdict.kind, verdict.rule) == (ErrorKind.RETRYABLE, None)


def test_the_rule_is_not_part_of_a_verdicts_equality() -> None:
    assert Classification(ErrorKind.FATAL, rule="a") == Classification(ErrorKind.FATAL)
