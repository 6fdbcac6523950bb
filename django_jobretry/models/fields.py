"""The JSON columns of jobs and dead letters."""

from __future__ import annotations

from typing import Any

from django.db import models


class StoredJSONField(models.JSONField):
    """A JSONField that hands back the stored text when Python cannot decode it.

    PostgreSQL keeps JSON nested thousands of levels deep; Python's decoder
    stops at its recursion limit. Django's JSONField already returns the raw
    text of a value that is not JSON; this does the same for one nested too
    deep, so one hand-written row cannot make every page and command that
    loads it fail. Readers check the type (django_jobretry.redaction).
    """

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        try:
            return super().from_db_value(value, expression, connection)
        except RecursionError:
            return value
