"""Every duration option of every command goes through one parser, bounded at a century (issue 17).

Before, `prunejobs --older-than 99999999d` printed a DataError traceback,
`import-django-q2 --since 99999999d` an OverflowError one, and `deadletters
requeue --run-after 99999999d` wrote jobs due in the year 275,000, which no
Python process can read back.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models.functions import Now

from django_jobretry.management.cli import MAX_DURATION_DAYS, duration, since
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.factories import DeadLetterFactory
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

RANGE = f"a duration is from 0s to {MAX_DURATION_DAYS}d (100 years)"

OPTIONS = [
    pytest.param(["prunejobs", "--older-than"], id="prunejobs --older-than"),
    pytest.param(["prunejobs", "--dead-letters-older-than"], id="prunejobs --dead-letters-older-than"),
    pytest.param(["deadletters", "list", "--older-than"], id="deadletters list --older-than"),
    pytest.param(["deadletters", "discard", "--all", "--yes", "--older-than"], id="discard --older-than"),
    pytest.param(["deadletters", "requeue", "--all", "--yes", "--run-after"], id="requeue --run-after"),
    pytest.param(["deadletters", "import-django-q2", "--since"], id="import-django-q2 --since"),
]


@pytest.mark.parametrize("value", ["99999999d", "36501d", "876025h", "1" + "0" * 400 + "s"])
@pytest.mark.parametrize("command", OPTIONS)
def test_a_duration_past_a_century_is_a_usage_error_naming_option_value_and_range(
    command: list[str], value: str
) -> None:
    succeeded = jobs.record.enqueue("old")
    Job.objects.filter(pk=succeeded.pk).update(status=JobStatus.SUCCEEDED, finished_at=Now())
    dead = DeadLetterFactory.create()
    with pytest.raises(CommandError) as caught:
        call_command(*command, value, stdout=StringIO(), stderr=StringIO())
    message = str(caught.value)
    assert f"argument {command[-1]}: {value!r} is out of range: {RANGE}" in message
    assert list(Job.objects.values_list("pk", "status")) == [(succeeded.pk, JobStatus.SUCCEEDED)]
    assert list(DeadLetter.objects.values_list("pk", flat=True)) == [dead.pk]


def test_a_century_is_accepted_and_prunes_nothing_younger() -> None:
    done = jobs.record.enqueue("done")
    Job.objects.filter(pk=done.pk).update(status=JobStatus.SUCCEEDED, finished_at=Now())
    out = StringIO()
    call_command("prunejobs", "--older-than", f"{MAX_DURATION_DAYS}d", stdout=out)
    assert out.getvalue().startswith("deleted 0 succeeded job(s)")
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0s", timedelta(0)), ("1.5d", timedelta(days=1.5)), ("36500d", timedelta(days=36_500))],
)
def test_durations_up_to_the_bound_parse(text: str, expected: timedelta) -> None:
    assert duration(text) == expected


def test_since_says_the_range_for_a_duration_too_long() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"'36500\.5d' is out of range"):
        since("36500.5d")
    with pytest.raises(argparse.ArgumentTypeError, match="is neither a duration"):
        since("yesterday")
