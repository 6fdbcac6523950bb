"""Refuse breaker and bucket values no worker can compute with, and compute safely with those stored.

- A breaker's release rate must be a number > 0 (a worker divides by it to
  space the release), its cooldowns from 0 to a policy's longest delay (a
  worker adds them to now).
- A bucket's tokens must be finite (NaN passes ">= 0" in PostgreSQL), its
  refill time within the instants Python holds (models/instants.py).

Each check is added NOT VALID (new writes are checked at once, the table is
not scanned) and validated in 0032; the rows stored before are repaired
first, so that validation finds none: a breaker's unusable rate becomes the
default 10 a second, its unusable cooldowns the nearest usable ones (NaN the
policy defaults), and a bucket with an unusable value is deleted (the next
limited claim creates it full, as for a new limit). Workers also cope with
such a row by themselves (services/circuits.py, services/isolation.py).

``jobretry_bucket_tokens()`` (0026) subtracted the refill time from now: an
infinite one raised, and every limited claim meeting that bucket failed.
It now counts a refill time it cannot subtract from as long ago: the bucket
is full, and the claim writes a usable time back.
"""

import datetime

from django.contrib.postgres.operations import AddConstraintNotValid
from django.db import migrations, models

#: policy.durations.MAX_DELAY (365 days) in seconds, as of this migration.
MAX_COOLDOWN = 31536000.0

BUCKET_TOKENS = """
    CREATE OR REPLACE FUNCTION jobretry_bucket_tokens(
        tokens float8, refilled_at timestamptz, now timestamptz, per_second float8, burst float8
    ) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN isfinite(refilled_at) THEN
                   LEAST(burst, GREATEST(tokens, 0)
                                + per_second * GREATEST(extract(epoch FROM now - refilled_at)::float8, 0))
               ELSE burst END
    $$
"""

#: 0026's function, put back by a reverse migration.
BUCKET_TOKENS_0026 = """
    CREATE OR REPLACE FUNCTION jobretry_bucket_tokens(
        tokens float8, refilled_at timestamptz, now timestamptz, per_second float8, burst float8
    ) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT LEAST(burst, GREATEST(tokens, 0)
                     + per_second * GREATEST(extract(epoch FROM now - refilled_at)::float8, 0))
    $$
"""


#: Unusable values made usable: NaN sorts above every number, so it is named first.
REPAIR = """
    UPDATE django_jobretry_circuit SET
        release_per_second = CASE WHEN release_per_second > 0 AND release_per_second < 'Infinity'
                             THEN release_per_second ELSE 10 END,
        cooldown_seconds = CASE WHEN cooldown_seconds = 'NaN' THEN 30
                           ELSE LEAST(GREATEST(cooldown_seconds, 0), 31536000) END,
        max_cooldown_seconds = CASE WHEN max_cooldown_seconds = 'NaN' THEN 900
                               ELSE LEAST(GREATEST(max_cooldown_seconds, 0), 31536000) END
    WHERE NOT (release_per_second > 0 AND release_per_second < 'Infinity'
               AND cooldown_seconds BETWEEN 0 AND 31536000 AND max_cooldown_seconds BETWEEN 0 AND 31536000);
    DELETE FROM django_jobretry_ratebucket
    WHERE NOT (tokens < 'Infinity' AND refilled_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00');
"""

EARLIEST = datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.UTC)
LATEST = datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.UTC)


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0030_trace_context"),
    ]

    operations = [
        AddConstraintNotValid(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(("release_per_second__gt", 0), ("release_per_second__lt", float("inf"))),
                name="jobretry_circuit_release_rate",
            ),
        ),
        AddConstraintNotValid(
            model_name="circuit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("cooldown_seconds__gte", 0),
                    ("cooldown_seconds__lte", MAX_COOLDOWN),
                    ("max_cooldown_seconds__gte", 0),
                    ("max_cooldown_seconds__lte", MAX_COOLDOWN),
                ),
                name="jobretry_circuit_cooldowns",
            ),
        ),
        AddConstraintNotValid(
            model_name="ratebucket",
            constraint=models.CheckConstraint(
                condition=models.Q(("tokens__lt", float("inf"))), name="jobretry_bucket_tokens_finite"
            ),
        ),
        AddConstraintNotValid(
            model_name="ratebucket",
            constraint=models.CheckConstraint(
                condition=models.Q(("refilled_at__gte", EARLIEST), ("refilled_at__lte", LATEST)),
                name="jobretry_bucket_refilled_at_holdable",
            ),
        ),
        migrations.RunSQL(REPAIR, migrations.RunSQL.noop),
        migrations.RunSQL(BUCKET_TOKENS, BUCKET_TOKENS_0026),
    ]
