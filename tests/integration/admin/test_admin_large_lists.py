"""The admin's dead-letter list on a large table: capped counts, unread columns, cheap filters and dates.

The pages are fetched through Django's test client as a logged-in superuser
(tests/integration/conftest.py); the queries they run are captured and checked.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_jobretry.admin.changelist import CappedCountPaginator, IndexedDatesQuerySet, RecentValuesFilter
from django_jobretry.models import DeadLetter
from tests.factories import DeadLetterFactory
from tests.integration.conftest import CHANGELIST, Operator

pytestmark = pytest.mark.django_db


class TestLargeLists:
    def test_changelist_never_counts_the_whole_table(
        self, superuser: Operator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(CappedCountPaginator, "cap", 3)
        DeadLetterFactory.create_batch(5)
        with CaptureQueriesContext(connection) as queries:
            page = superuser.get(reverse(CHANGELIST))
        assert page.status_code == 200
        table = '"django_jobretry_deadletter"'
        counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and table in q["sql"]]
        assert counts, "the capped count query should run"
        for sql in counts:
            assert "LIMIT" in sql.upper(), sql
        assert "more than 3 dead letters" in page.text
        assert len(page.context["cl"].result_list) == 5
        # Neither the filters nor the date hierarchy read a whole column.
        assert not [q["sql"] for q in queries if "DISTINCT" in q["sql"].upper()]

    def test_list_leaves_the_json_columns_unread(self, superuser: Operator) -> None:
        DeadLetterFactory.create()
        with CaptureQueriesContext(connection) as queries:
            superuser.get(reverse(CHANGELIST))
        listing = [
            q["sql"] for q in queries if 'ORDER BY "django_jobretry_deadletter"."dead_at" DESC' in q["sql"]
        ]
        assert listing
        assert all('"errors"' not in sql and '"kwargs"' not in sql for sql in listing)

    def test_filter_choices_come_from_the_newest_rows_plus_the_current_one(
        self, superuser: Operator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(RecentValuesFilter, "recent", 1)
        DeadLetterFactory.create(queue_name="old", dead_at=timezone.now() - timedelta(days=1))
        DeadLetterFactory.create(queue_name="new")
        url = reverse(CHANGELIST)
        assert "?queue_name=new" in superuser.get(url).text
        assert "?queue_name=old" not in superuser.get(url).text
        chosen = superuser.get(url, {"queue_name": "old"})
        assert "?queue_name=old" in chosen.text
        assert [d.queue_name for d in chosen.context["cl"].result_list] == ["old"]


#: Around New Year and both 2025 DST changes in Paris, plus a Newfoundland (UTC-3:30) edge.
MOMENTS = [
    datetime(2024, 12, 31, 23, 30, tzinfo=UTC),
    datetime(2025, 3, 30, 0, 30, tzinfo=UTC),
    datetime(2025, 3, 30, 1, 30, tzinfo=UTC),
    datetime(2025, 10, 25, 22, 30, tzinfo=UTC),
    datetime(2025, 10, 26, 0, 30, tzinfo=UTC),
    datetime(2025, 10, 26, 1, 30, tzinfo=UTC),
    datetime(2025, 11, 1, 2, 0, tzinfo=UTC),
    datetime(2026, 1, 1, 3, 15, tzinfo=UTC),
]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/St_Johns"])
def test_indexed_date_hierarchy_matches_djangos_distinct(zone: str) -> None:
    for moment in MOMENTS:
        DeadLetterFactory.create(dead_at=moment)
    with timezone.override(ZoneInfo(zone)):
        for base in (DeadLetter.objects.all(), DeadLetter.objects.filter(dead_at__year=2025)):
            fast = IndexedDatesQuerySet(model=DeadLetter, query=base.query)
            for kind in ("year", "month", "day"):
                for order in ("ASC", "DESC"):
                    expected = list(base.datetimes("dead_at", kind, order))
                    assert list(fast.datetimes("dead_at", kind, order)) == expected, (kind, order)


@pytest.mark.django_db
def test_a_search_hides_the_date_hierarchy(admin_client: Any) -> None:
    """A substring search would make every date-hierarchy probe walk the table."""
    url = reverse("admin:django_jobretry_deadletter_changelist")
    assert admin_client.get(url).context["cl"].date_hierarchy == "dead_at"
    assert admin_client.get(url, {"q": "timeout"}).context["cl"].date_hierarchy is None
