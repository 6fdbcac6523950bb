"""Changelist pieces that stay fast on a million rows.

Django's admin runs ``SELECT COUNT(*)`` over the filtered list on every
page view, ``SELECT DISTINCT`` over a whole column for each "all values"
filter and over every date for the date hierarchy, and loads every column
of every listed row. On a million dead letters each is a full scan for
something nobody reads. Here counting stops at :data:`COUNT_CAP` (the
pagination bar then says "more than"), filter choices come from the newest
rows, the date hierarchy probes the date index once per year, month or day
shown, and the list leaves the large JSON columns (histories, arguments)
unread.

Whatever a URL says, a list is a page, a redirect to "?e=1" (Django's answer
to lookups it cannot run) or a 400, never a server error.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin
from django.contrib.admin.filters import ListFilter
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db import models
from django.db.models import Min, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import cached_property

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _Paginator = Paginator[Any]
    _QuerySet = QuerySet[Any]
else:
    _Paginator = Paginator
    _QuerySet = QuerySet

#: Rows counted at most; past this the list shows "more than 10,000".
COUNT_CAP = 10_000
#: Newest rows whose values become filter choices.
RECENT_ROWS = 10_000
#: Most buckets one date-hierarchy level probes for (31 days is the usual most).
MAX_BUCKETS = 400


class CappedCountPaginator(_Paginator):
    """Counts at most ``cap + 1`` rows; ``capped`` says whether there are more."""

    cap = COUNT_CAP

    @cached_property
    def count(self) -> int:
        """min(real count, cap + 1): enough to draw page links, cheap at any size."""
        object_list: Any = self.object_list
        if isinstance(object_list, QuerySet):
            # A sliced queryset counts as COUNT(*) over a LIMITed subquery, which
            # walks the list's ORDER BY index and stops after cap + 1 rows.
            return object_list[: self.cap + 1].count()
        return len(object_list)

    @property
    def capped(self) -> bool:
        """True when the list holds more rows than were counted."""
        return self.count > self.cap

    @property
    def cap_display(self) -> str:
        """The cap as the pagination bar prints it: "10,000"."""
        return f"{self.cap:,}"


class RecentValuesFilter(admin.SimpleListFilter):
    """Filter choices: the distinct values among the newest rows, not the whole column.

    The column has no index of its own, so ``SELECT DISTINCT`` would read the
    whole table on every page view. A value seen only in older rows is still
    reachable with search, or by editing the URL; the current choice always shows.
    """

    recent = RECENT_ROWS

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        ordering = model_admin.get_ordering(request) or ("-pk",)
        newest = model_admin.get_queryset(request).order_by(*ordering)[: self.recent]
        values = set(newest.values_list(self.parameter_name, flat=True))
        if self.value():
            values.add(self.value())
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{cast(str, self.parameter_name): value}) if value else queryset


class QueueFilter(RecentValuesFilter):
    """Filter by queue; choices come from the newest rows."""

    title = "queue"
    parameter_name = "queue_name"


class TaskFilter(RecentValuesFilter):
    """Filter by task; choices come from the newest rows."""

    title = "task"
    parameter_name = "task_name"


class ErrorClassFilter(RecentValuesFilter):
    """Filter dead letters by their last error's class (the dashboard links here); choices: newest rows."""

    title = "last error class"
    parameter_name = "last_error_class"


def _bucket_after(start: datetime, kind: str) -> datetime:
    """The start of the year, month or day after ``start`` (aware, same zone, DST-safe)."""
    naive = timezone.make_naive(start, start.tzinfo)
    if kind == "year":
        following = naive.replace(year=naive.year + 1)
    elif kind == "month":
        following = (naive.replace(day=28) + timedelta(days=4)).replace(day=1)
    else:
        following = naive + timedelta(days=1)
    return timezone.make_aware(following, start.tzinfo)


class IndexedDatesQuerySet(_QuerySet):
    """``datetimes()`` by index probes: one ``MIN(field) WHERE field >= next`` per bucket.

    The admin's date hierarchy asks for the distinct years, months or days
    of the listed rows; Django answers with ``SELECT DISTINCT
    date_trunc(...)`` over every row (a quarter of a second on a million
    dead letters). With an index on the field, each MIN is a short index
    scan, and a level of the hierarchy has at most a few dozen buckets.
    """

    def datetimes(
        self, field_name: str, kind: str, order: str = "ASC", tzinfo: Any = None, **kwargs: Any
    ) -> Any:
        if kind not in {"year", "month", "day"} or kwargs:
            return super().datetimes(field_name, kind, order, tzinfo, **kwargs)  # type: ignore[arg-type]
        zone = tzinfo or timezone.get_current_timezone()
        rows, found = self.order_by(), []
        lower: datetime | None = None
        for _ in range(MAX_BUCKETS):
            probe = rows if lower is None else rows.filter(**{f"{field_name}__gte": lower})
            first = probe.aggregate(first=Min(field_name))["first"]
            if first is None:
                break
            local = timezone.make_naive(first, zone)
            start = timezone.make_aware(
                datetime(
                    local.year,
                    local.month if kind != "year" else 1,
                    local.day if kind == "day" else 1,
                ),
                zone,
            )
            try:
                lower = _bucket_after(start, kind)
            except (OverflowError, ValueError):
                # December 9999 has no month after it: Django could not filter on it either.
                break
            found.append(start)
        return found if order == "ASC" else found[::-1]


class LightChangeList(ChangeList):
    """Leaves JSON columns (histories, arguments: up to megabytes a row) out of the list.

    With a search active the date hierarchy is hidden: a substring search no
    index can serve would make each of its probes walk the whole table
    (seconds on a million rows when nothing matches).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.query:
            self.date_hierarchy = None

    def get_filters(
        self, request: HttpRequest
    ) -> tuple[list[ListFilter], bool, dict[str, bool | str], bool, bool]:
        try:
            return super().get_filters(request)
        except (OverflowError, ValueError) as exc:
            # Django's date hierarchy computes the end of the chosen year, month
            # or day unguarded: 9999 has no successor.
            raise IncorrectLookupParameters(exc) from exc

    def get_results(self, request: HttpRequest) -> None:
        try:
            super().get_results(request)
        except (OverflowError, ValueError) as exc:
            # A lookup Python cannot turn into SQL, like run_at__year=99999, fails
            # when the count query is compiled, before anything reaches the database.
            raise IncorrectLookupParameters(exc) from exc
        # The rows are loaded only now: plus what the admin computes in SQL for this
        # page only (never for the count).
        list_page = getattr(self.model_admin, "list_page", None)
        if list_page is not None:
            self.result_list = list_page(self.result_list)

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        queryset = super().get_queryset(request, exclude_parameters)
        fields = self.model._meta.concrete_fields
        light = queryset.defer(*(field.name for field in fields if isinstance(field, models.JSONField)))
        # Same query, a class whose datetimes() the date hierarchy can afford.
        return IndexedDatesQuerySet(model=light.model, query=light.query, using=light.db)
