"""The sidebar's "Arguments" search on the dead-letter and job lists, for users who may read arguments.

``?arguments=…`` is read by services/argument_search.py (what one may type,
and why it compares whole values: jsonb containment on the GIN indexes of
migration 0023; ``name=value`` also finds a positional argument of a
parameter of that name). The field's label says exactly that.

A filter answers "does any row match?", so it reads values one guess at a
time: users who may not read arguments unredacted (admin/rendering.py
``can_filter_payload``) see no field, and the parameter in a URL is
refused with a 400 before any query, as every other argument filter is
(admin/base.py ``lookup_allowed``). A search that cannot be read is the
list's error page, with a message saying what is wrong; nothing runs. So
is one that reads but that PostgreSQL's jsonb would refuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from django_jobretry.admin import rendering
from django_jobretry.models.job import RETRYING
from django_jobretry.services.argument_search import EXAMPLE, WHOLE_VALUES, InvalidSearch, containment

__all__ = ["ArgumentSearch", "InvalidSearch", "RetryingArgumentSearch", "containment"]


class ArgumentSearch(admin.ListFilter):
    """The sidebar's "Arguments" field; ``scope`` narrows the rows its index covers (jobs: retrying)."""

    title = "arguments"
    parameter_name = "arguments"
    template = "admin/django_jobretry/includes/argument_search.html"
    #: Rows the search reaches, matching the partial indexes' condition (None: every row).
    scope: Q | None = None
    help_text = f"Dead letters with an argument equal to this: {WHOLE_VALUES}."

    def __init__(self, request: HttpRequest, params: dict[str, Any], model: Any, model_admin: Any) -> None:
        super().__init__(request, params, model, model_admin)
        self.allowed = rendering.can_filter_payload(request)
        self.request = request
        self.text: str | None = None
        if self.parameter_name in params:
            if not self.allowed:
                raise DisallowedModelAdminLookup(f"Filtering by {self.parameter_name} not allowed")
            given = params.pop(self.parameter_name)
            self.text = given[-1] if isinstance(given, list) else given

    def has_output(self) -> bool:
        return self.allowed

    def expected_parameters(self) -> list[str | None]:
        return [self.parameter_name]

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:
        """One "choice": what the form needs, the other filters kept as hidden fields."""
        kept = [
            (key, value)
            for key, values in changelist.params.items()
            for value in (values if isinstance(values, list) else [values])
            if key != self.parameter_name
        ]
        yield {"value": self.text or "", "kept": kept, "help": self.help_text, "example": EXAMPLE}

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.text is None:
            return queryset
        try:
            found = containment(self.text)
        except InvalidSearch as exc:
            messages.error(request, str(exc))
            raise IncorrectLookupParameters(str(exc)) from exc
        return queryset.filter(found if self.scope is None else found & self.scope)


class RetryingArgumentSearch(ArgumentSearch):
    """The job list's: retrying jobs only, the rows its partial GIN indexes hold."""

    scope = RETRYING
    help_text = f"Retrying jobs (no others) with an argument equal to this: {WHOLE_VALUES}."
