"""The error message a failure log line carries: one line, bounded, the arguments scrubbed."""

from __future__ import annotations

from django_jobretry.jobs.events import LOG_MESSAGE_CHARS, failure_phrase, logged_message
from django_jobretry.jobs.history import AttemptEnd, attempt_entry
from django_jobretry.policy import ErrorKind


def test_argument_values_it_quotes_are_scrubbed_longest_first_wherever_they_are_nested() -> None:
    message = "order 12345 for alice@example.com (alice) failed at step 7"
    args = [12345, {"email": "alice@example.com", "nested": ["alice"]}]
    assert logged_message(message, args, {"step": 7, "flag": True}) == (
        "order <argument> for <argument> (<argument>) failed at step 7"
    )


def test_nested_keys_count_as_arguments_but_keyword_names_do_not() -> None:
    assert (
        logged_message("map: no key customer-99", [], {"map": {"customer-99": 1}}) == "map: no key <argument>"
    )


def test_one_line_and_bounded() -> None:
    line = logged_message("first\nsecond\r\n\tthird " + "x" * 1000, [], {})
    assert line.startswith("first second third xxx")
    assert len(line) == LOG_MESSAGE_CHARS
    assert line.endswith("...")


def test_the_phrase_adds_the_message_to_an_error_but_not_to_a_timeout() -> None:
    error = attempt_entry(
        1, AttemptEnd.ERROR, ErrorKind.RETRYABLE, "w", error_class="builtins.KeyError", message="'sku-1'"
    )
    timeout = attempt_entry(1, AttemptEnd.TIMEOUT, ErrorKind.RETRYABLE, "w", message="past 5 s")
    assert failure_phrase(error, ([], {})) == ("failed with builtins.KeyError: 'sku-1'", "'sku-1'")
    assert failure_phrase(error, (["sku-1"], {})) == (
        "failed with builtins.KeyError: '<argument>'",
        "'<argument>'",
    )
    assert failure_phrase(timeout, ([], {})) == ("timed out", "")
    assert failure_phrase(error, None) == ("failed with builtins.KeyError", "")  # arguments unreadable
