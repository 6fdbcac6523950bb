"""A rate bucket row PostgreSQL holds but cannot compute with never stops the limited claim.

``jobretry_bucket_tokens()`` subtracted the bucket's refill time from now:
with 'infinity' there (a timestamptz column takes it) the subtraction
raised, so every limited claim that met the bucket failed, and the rated
task, with every limited job claimed beside it, never ran again. The row is
written straight into the table, as a hand-made fix or an older deploy may
have left it before the schema refused it.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from django_jobretry.jobs import claim
from django_jobretry.models import RateBucket
from tests.integration.hostile import without_checks
from tests.jobs_app import limited_jobs

pytestmark = pytest.mark.django_db

RATED = f"task:{limited_jobs.sixty_a_second.name}"
LIMITS = {
    "tasks": {
        limited_jobs.sixty_a_second.name: {"c": None, "k": False, "r": 60.0, "b": 60.0},
        limited_jobs.three_at_once.name: {"c": 3, "k": False, "r": None, "b": None},
    },
    "queues": {},
}
INSERT = f"INSERT INTO {RateBucket._meta.db_table} (name, tokens, refilled_at) VALUES (%s, %s::float8, %s)"
#: The checks of migration 0031 that refuse these rows today.
REFUSED = ("jobretry_bucket_tokens_finite", "jobretry_bucket_refilled_at_holdable")


@pytest.mark.parametrize(
    ("tokens", "refilled_at"),
    [("0", "infinity"), ("0", "-infinity"), ("NaN", "now"), ("Infinity", "now")],
    ids=["refilled-at-infinity", "refilled-at-minus-infinity", "tokens-nan", "tokens-infinite"],
)
def test_a_bucket_with_a_value_no_refill_can_use_is_refilled_and_every_limited_job_is_claimed(
    tokens: str, refilled_at: str
) -> None:
    """Before: ``cannot subtract infinite timestamps`` at every claim that met the bucket."""
    without_checks(RateBucket, *REFUSED)
    with connection.cursor() as cursor:
        cursor.execute(INSERT, [RATED, tokens, refilled_at])
    rated = limited_jobs.sixty_a_second.enqueue("rated")
    other = limited_jobs.three_at_once.enqueue("other", 0)
    claimed, _ = claim.claim_limited("w", 10, 30, None, LIMITS)
    assert sorted(job.id for job in claimed) == sorted([rated.id, other.id])
    bucket = RateBucket.objects.get(name=RATED)
    assert 0 <= bucket.tokens <= 59  # full (60) when refilled, one spent


@pytest.mark.parametrize(
    ("tokens", "refilled_at", "check"),
    [
        ("NaN", "now", "jobretry_bucket_tokens_finite"),
        ("Infinity", "now", "jobretry_bucket_tokens_finite"),
        ("0", "infinity", "jobretry_bucket_refilled_at_holdable"),
        ("0", "-infinity", "jobretry_bucket_refilled_at_holdable"),
        ("0", "20000-01-01", "jobretry_bucket_refilled_at_holdable"),
    ],
)
def test_the_schema_refuses_a_bucket_no_refill_can_use(tokens: str, refilled_at: str, check: str) -> None:
    with pytest.raises(IntegrityError) as refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(INSERT, [RATED, tokens, refilled_at])
    assert getattr(refused.value.__cause__.diag, "constraint_name", None) == check
