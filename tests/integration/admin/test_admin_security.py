"""The admin against hostile requests and hostile rows (issue 8), through Django's test client.

- Arguments cannot be read through URL filters, searches or sorting by
  someone without ``view_job_payload``: a refused filter is the same 400
  whether or not a row would match, so the response is no oracle.
- No query string a staff user can send makes a server error.
- An id from a request is ASCII digits or nothing: "١٢" is not 12.
- Times at the end of the calendar, and times in histories that are no dates, still show.
- "Requeue / Discard all matching…" (issue 11) chooses rows with the list's
  own filters, so all of the above holds for its URL too.

A 500 would fail these tests as an exception: the test client re-raises it.
Users and the CSRF-checking client come from tests/integration/conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.http import urlencode

from django_jobretry.admin import JobAdmin
from django_jobretry.models import DeadLetter, DeadLetterSource, Job
from tests.factories import DeadLetterFactory, JobFactory
from tests.integration.conftest import CHANGELIST, Operator, change_url, messages_of

pytestmark = pytest.mark.django_db

JOBS = "admin:django_jobretry_job_changelist"
LISTS = [JOBS, CHANGELIST]
DASHBOARD = "admin:django_jobretry_deadletter_dashboard"
SECRET = "hunter2"  # noqa: S105


def redact(task_name: str, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """A PAYLOAD_REDACTOR that hides passwords."""
    return args, {key: "***" if key == "password" else value for key, value in kwargs.items()}


@pytest.fixture
def secrets() -> None:
    """A job and a dead letter whose arguments hold SECRET, next to ones that do not."""
    for factory in (JobFactory, DeadLetterFactory):
        factory.create(args=[SECRET, 1], kwargs={"password": SECRET})
        factory.create(args=["public", 1], kwargs={"password": "nothing"})


@pytest.fixture
def reader(make_user: Any) -> Operator:
    """May see arguments."""
    return Operator(make_user("view_job", "view_deadletter", "view_job_payload", name="reader"))


def rows(response: Any) -> list[Any]:
    assert response.status_code == 200, response
    return list(response.context["cl"].result_list)


# Each probe matches the secret's row with the first value and no row with the second.
ARGUMENT_PROBES = [
    ("args__icontains", "hunt", "zzz"),
    ("kwargs__password__startswith", "h", "z"),
    ("kwargs__password", SECRET, "nope"),
    ("args__0", SECRET, "nope"),
    ("args__0__startswith", "hu", "zz"),
    ("args__contains", SECRET, "nope"),
    ("kwargs__has_key", "password", "email"),
]


def test_a_task_result_cannot_be_filtered_on_without_the_payload_permission(
    viewer: Operator, reader: Operator
) -> None:
    """What a django.tasks task returned may be as personal as its arguments."""
    JobFactory.create(succeeded=True, return_value={"token": SECRET})
    JobFactory.create(succeeded=True, return_value={"token": "public"})
    probe = {"return_value__token": SECRET}
    assert viewer.get(reverse(JOBS), probe).status_code == 400
    assert len(rows(reader.get(reverse(JOBS), probe))) == 1


@pytest.mark.usefixtures("secrets")
class TestArgumentsCannotBeFilteredOn:
    @pytest.mark.parametrize(("lookup", "hit", "miss"), ARGUMENT_PROBES)
    @pytest.mark.parametrize("listing", LISTS)
    def test_refused_alike_whether_or_not_a_row_matches(
        self, viewer: Operator, listing: str, lookup: str, hit: str, miss: str
    ) -> None:
        url = reverse(listing)
        matching, missing = viewer.get(url, {lookup: hit}), viewer.get(url, {lookup: miss})
        assert matching.status_code == missing.status_code == 400
        assert matching.content == missing.content  # no oracle: the value changes nothing

    @pytest.mark.parametrize(("lookup", "hit", "miss"), ARGUMENT_PROBES)
    @pytest.mark.parametrize("listing", LISTS)
    def test_allowed_to_whoever_sees_the_arguments(
        self, reader: Operator, listing: str, lookup: str, hit: str, miss: str
    ) -> None:
        # Also proves the probes above are real oracles when not refused.
        url = reverse(listing)
        assert len(rows(reader.get(url, {lookup: hit}))) >= 1
        assert len(rows(reader.get(url, {lookup: hit}))) != len(rows(reader.get(url, {lookup: miss})))

    @pytest.mark.parametrize("listing", LISTS)
    def test_refused_to_everyone_when_a_redactor_hides_values(
        self, reader: Operator, superuser: Operator, settings: Any, listing: str
    ) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": f"{__name__}.redact"}
        for operator in (reader, superuser):
            response = operator.get(reverse(listing), {"kwargs__password__startswith": "h"})
            assert response.status_code == 400

    @pytest.mark.parametrize("listing", LISTS)
    def test_other_filters_still_work(self, viewer: Operator, listing: str) -> None:
        assert len(rows(viewer.get(reverse(listing), {"queue_name": "default"}))) == 2

    @pytest.mark.parametrize("listing", LISTS)
    def test_search_never_matches_arguments(self, viewer: Operator, listing: str) -> None:
        assert rows(viewer.get(reverse(listing), {"q": SECRET})) == []

    def test_search_fields_lose_arguments_without_the_permission(
        self, viewer: Operator, reader: Operator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Defence in depth: were arguments ever added to search_fields, only readers would match.
        monkeypatch.setattr(JobAdmin, "search_fields", ("task_name", "kwargs__password"))
        url = reverse(JOBS)
        assert rows(viewer.get(url, {"q": SECRET})) == []
        assert [job.args[0] for job in rows(reader.get(url, {"q": SECRET}))] == [SECRET]

    @pytest.mark.parametrize("listing", LISTS)
    def test_no_list_query_reads_or_sorts_by_arguments(self, viewer: Operator, listing: str) -> None:
        url = reverse(listing)
        with CaptureQueriesContext(connection) as queries:
            rows(viewer.get(url, {"q": SECRET}))
            for index in range(12):  # every column, both ways, and past them
                assert viewer.get(url, {"o": f"{index}"}).status_code == 200
                assert viewer.get(url, {"o": f"-{index}"}).status_code == 200
        sql = [query["sql"] for query in queries if '"django_jobretry_' in query["sql"]]
        assert sql
        assert not [text for text in sql if '"args"' in text or '"kwargs"' in text]


# django-q2's signed package (base64 of the pickled function and arguments, readable without
# the key) is as secret as the arguments. Each probe matches more rows with its first value.
EXTERNAL_PAYLOAD_PROBES = [
    ("external_payload__startswith", "payload-h", "payload-z"),
    ("external_payload__contains", SECRET, "nope"),
    ("external_payload__icontains", "HUNT", "zzz"),
    ("external_payload__isnull", "False", "True"),
    ("external_payload", f"payload-{SECRET}", "nope"),
]


class TestExternalPayloadCannotBeFilteredOn:
    @pytest.fixture(autouse=True)
    def packages(self) -> None:
        for payload in (f"payload-{SECRET}", "payload-public"):
            DeadLetterFactory.create(source=DeadLetterSource.DJANGO_Q2, external_payload=payload)
        DeadLetterFactory.create()  # this package's own: no external payload

    @pytest.mark.parametrize(
        ("lookup", "hit", "miss"), [*EXTERNAL_PAYLOAD_PROBES, ("external_payload__regex", "^p", "^z")]
    )
    def test_refused_alike_whether_or_not_a_row_matches(
        self, viewer: Operator, lookup: str, hit: str, miss: str
    ) -> None:
        matching_page, missing_page = (viewer.get(reverse(CHANGELIST), {lookup: v}) for v in (hit, miss))
        assert matching_page.status_code == missing_page.status_code == 400
        assert matching_page.content == missing_page.content

    @pytest.mark.parametrize(("lookup", "hit", "miss"), EXTERNAL_PAYLOAD_PROBES)
    def test_allowed_to_whoever_sees_the_arguments(
        self, reader: Operator, lookup: str, hit: str, miss: str
    ) -> None:
        # Also proves the probes above are real oracles when not refused.
        url = reverse(CHANGELIST)
        assert len(rows(reader.get(url, {lookup: hit}))) > len(rows(reader.get(url, {lookup: miss})))

    def test_regex_stays_refused_to_whoever_sees_the_arguments(self, reader: Operator) -> None:
        assert reader.get(reverse(CHANGELIST), {"external_payload__regex": "^p"}).status_code == 400

    def test_all_matching_refuses_it_too(self, make_user: Any) -> None:
        requeuer = Operator(make_user("view_deadletter", "requeue_deadletter", name="rq"))
        assert requeuer.get(matching("requeue", {"external_payload__startswith": "p"})).status_code == 400


def matching(verb: str, query: dict[str, str]) -> str:
    """The "… all matching" URL of the dead-letter list filtered by ``query``."""
    url = reverse(f"admin:django_jobretry_deadletter_{verb}_matching")
    return f"{url}?{urlencode({'_changelist_filters': urlencode(query)})}"


@pytest.mark.usefixtures("secrets")
class TestAllMatchingReadsNoArguments:
    """The same refusals on the "… all matching" confirmation, which counts what a filter selects."""

    @pytest.fixture
    def requeuer(self, make_user: Any) -> Operator:
        return Operator(make_user("view_deadletter", "requeue_deadletter", "discard_deadletter", name="rq"))

    @pytest.mark.parametrize(("lookup", "hit", "miss"), ARGUMENT_PROBES)
    @pytest.mark.parametrize("verb", ["requeue", "discard"])
    def test_refused_alike_whether_or_not_a_row_matches(
        self, requeuer: Operator, verb: str, lookup: str, hit: str, miss: str
    ) -> None:
        matching_page, missing_page = (requeuer.get(matching(verb, {lookup: v})) for v in (hit, miss))
        assert matching_page.status_code == missing_page.status_code == 400
        assert matching_page.content == missing_page.content
        assert DeadLetter.objects.count() == 2

    def test_allowed_to_whoever_sees_the_arguments(self, make_user: Any) -> None:
        reader = Operator(make_user("view_deadletter", "view_job_payload", "requeue_deadletter", name="rd"))
        counts = [reader.get(matching("requeue", {"args__0": v})).context["count"] for v in (SECRET, "nope")]
        assert counts == [1, 0]

    def test_search_never_matches_arguments(self, requeuer: Operator) -> None:
        assert requeuer.get(matching("requeue", {"q": SECRET})).context["count"] == 0

    def test_confirmations_list_no_arguments_even_to_the_superuser(self, superuser: Operator) -> None:
        everything = superuser.get(matching("requeue", {}))
        assert everything.context["count"] == 2
        selected = superuser.act("requeue_selected", list(DeadLetter.objects.values_list("pk", flat=True)))
        assert selected.context["count"] == 2
        for page in (everything, selected):
            assert SECRET not in page.text


# -- query strings -------------------------------------------------------------------------------

HOSTILE_QUERIES = [
    "run_at__gte=infinity",
    "dead_at__gte=-infinity",
    "run_at__year=99999",
    "enqueued_at__year=10000",
    "enqueued_at__year__gt=0",
    "dead_at__year=99999",
    "dead_at__year=9999",
    "dead_at__year=9999&dead_at__month=12",
    "dead_at__year=9999&dead_at__month=12&dead_at__day=31",
    "dead_at__year=0",
    "dead_at__year=2026&dead_at__month=13",
    "dead_at__year=2026&dead_at__month=2&dead_at__day=30",
    "dead_at__year=1&dead_at__month=1&dead_at__day=1",
    "dead_at__year=%D9%A1%D9%A2",
    "q=a%00b",
    "q=%00",
    "q=%C2%B2",
    "q=" + "x" * 3000,
    "p=99999999999999999999999",
    "p=-1",
    "p=%C2%B2",
    "o=garbage",
    "o=99",
    "o=0.1.99.-",
    "o=-99999999999999999999",
    "queue_name=%00",
    "task_name=%00",
    "status=%00",
    "reason=%00",
    "reason__exact=%00",
    "errors__0__message=%00",
    "requeue_history__0__by=%00",
    "task_name__regex=(",
    "last_error__iregex=(",
    "errors__0__message__regex=(",
    "id=%C2%B2",
    "id=99999999999999999999",
    "id__in=1,abc",
    "priority=40000",
    "lease_token=nope",
    "run_at__date=9999-99-99",
    "_facets=1&queue_name=%00",
    "_facets=1",
    "_to_field=args",
    "all=1",
    "e=1",
]


@pytest.fixture
def populated() -> None:
    JobFactory.create()
    JobFactory.create(running=True)
    DeadLetterFactory.create(exhausted=True)


@pytest.mark.usefixtures("populated")
@pytest.mark.parametrize("query", HOSTILE_QUERIES)
@pytest.mark.parametrize("page", [JOBS, CHANGELIST, DASHBOARD])
def test_no_query_string_makes_a_server_error(superuser: Operator, page: str, query: str) -> None:
    url = reverse(page)
    response = superuser.get(f"{url}?{query}")
    assert response.status_code in {200, 302, 400}, response
    if response.status_code == 302:
        assert response["Location"] == f"{url}?e=1"  # Django's answer to lookups it cannot run


@pytest.mark.usefixtures("populated")
@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_no_filter_makes_a_server_error_in_all_matching(superuser: Operator, query: str) -> None:
    url = reverse("admin:django_jobretry_deadletter_discard_matching")
    response = superuser.get(f"{url}?{urlencode({'_changelist_filters': query})}")
    assert response.status_code in {200, 302, 400}, response
    if response.status_code == 302:
        assert response["Location"] == f"{reverse(CHANGELIST)}?e=1"


# -- ids from requests ---------------------------------------------------------------------------


def forgeries(pk: int) -> list[str]:
    """Values int() or str.isdigit() take for ``pk``, or for some number, but the admin must not."""
    digits = str(pk)
    return [
        "".join(chr(0x0660 + int(d)) for d in digits),  # Arabic-Indic digits: int() reads pk
        "".join(chr(0xFF10 + int(d)) for d in digits),  # full-width digits: likewise
        f" {digits} ",
        f"{digits}\x00",
        "²",
        "1e3",
        "-1",
        "1" * 30,
        "\x00",
    ]


@pytest.fixture
def dead() -> DeadLetter:
    return DeadLetterFactory.create()


class TestForgedIds:
    def test_a_forged_selection_is_ignored(self, superuser: Operator, dead: DeadLetter) -> None:
        for forged in forgeries(dead.pk):
            response = superuser.act("requeue_selected", [], _selected_action=[forged])
            assert response.status_code == 200
            assert "Items must be selected" in " ".join(messages_of(response))
        assert DeadLetter.objects.filter(pk=dead.pk).exists()
        assert not Job.objects.exists()

    def test_forged_ids_beside_a_real_one_leave_the_real_one_alone(self, superuser: Operator) -> None:
        kept, taken = DeadLetterFactory.create(), DeadLetterFactory.create()
        selection = [*forgeries(kept.pk), str(taken.pk)]
        page = superuser.act("requeue_selected", [], _selected_action=selection)
        ignored = f"{len(forgeries(kept.pk))} selected values were ignored: they are not valid ids."
        assert messages_of(page) == [ignored]  # said on the confirmation page, which lists one
        assert "Requeue 1 dead letter?" in page.text
        response = superuser.act("requeue_selected", [], _selected_action=selection, post="yes")
        assert messages_of(response) == [ignored, "1 dead letter requeued."]
        assert list(DeadLetter.objects.values_list("pk", flat=True)) == [kept.pk]

    def test_forged_ids_in_a_confirmed_discard_are_ignored(self, superuser: Operator) -> None:
        kept, taken = DeadLetterFactory.create(), DeadLetterFactory.create()
        pinned = ",".join([*forgeries(kept.pk), str(taken.pk)])
        confirmed = {"jobretry_ids": pinned, "post": "yes", "select_across": "1"}
        response = superuser.act("discard_selected", [taken.pk], **confirmed)
        ignored = f"{len(forgeries(kept.pk))} selected values were ignored: they are not valid ids."
        assert messages_of(response) == [ignored, "1 dead letter discarded."]
        assert list(DeadLetter.objects.values_list("pk", flat=True)) == [kept.pk]

    @pytest.mark.parametrize("button", ["requeue", "discard"])
    def test_a_forged_id_in_a_button_url_is_a_404(
        self, superuser: Operator, dead: DeadLetter, button: str
    ) -> None:
        for forged in forgeries(dead.pk):
            url = reverse(f"admin:django_jobretry_deadletter_{button}", args=[forged])
            assert superuser.post(url, {"post": "yes"}).status_code == 404, forged
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    @pytest.mark.parametrize("view", ["change", "history"])
    @pytest.mark.parametrize("model", ["job", "deadletter"])
    def test_a_forged_id_in_a_detail_url_is_not_found(
        self, superuser: Operator, dead: DeadLetter, view: str, model: str
    ) -> None:
        pk = dead.pk if model == "deadletter" else JobFactory.create().pk
        name = f"admin:django_jobretry_{model}_{view}"
        for forged in forgeries(pk):
            response = superuser.get(reverse(name, args=[forged]), follow=True)
            assert response.redirect_chain[-1][0] == reverse("admin:index"), forged
            assert "exist. Perhaps it was deleted?" in " ".join(messages_of(response))
        assert superuser.get(reverse(name, args=[pk])).status_code == 200

    @pytest.mark.parametrize("listing", LISTS)
    def test_a_forged_number_in_a_search_matches_no_id(
        self, superuser: Operator, dead: DeadLetter, listing: str
    ) -> None:
        pk = dead.pk if listing == CHANGELIST else JobFactory.create().pk
        assert len(rows(superuser.get(reverse(listing), {"q": f" {pk} "}))) == 1  # a search box may pad
        for forged in forgeries(pk):
            if forged.strip() == str(pk):
                continue  # padding is stripped, as above
            response = superuser.get(reverse(listing), {"q": forged})
            if "\x00" in forged:  # Django's search form refuses it: the list is not searched
                assert response.context["cl"].query == ""
                assert "Null characters are not allowed." in messages_of(response)
            else:
                assert rows(response) == [], forged


# -- the ends of the calendar; times inside histories ------------------------------------------------
# A stored time Python cannot hold is refused by the table (test_readable_rows.py).


class TestTimes:
    def test_the_last_year_lists_and_dates_without_a_year_after_it(self, superuser: Operator) -> None:
        other, last = DeadLetterFactory.create(), DeadLetterFactory.create()
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {DeadLetter._meta.db_table} SET dead_at = '9999-06-01 00:00:00+00' WHERE id = %s",
                [last.pk],
            )
        listing = superuser.get(reverse(CHANGELIST))
        assert [dead.pk for dead in rows(listing)] == [last.pk, other.pk]
        year = str(DeadLetter.objects.values_list("dead_at__year", flat=True).get(pk=other.pk))
        # The date hierarchy lists the years Django can filter on, and only those.
        assert f"?dead_at__year={year}" in listing.text
        assert "?dead_at__year=9999" not in listing.text
        assert rows(superuser.get(reverse(CHANGELIST), {"dead_at__year": year})) == [other]
        assert superuser.get(reverse(CHANGELIST), {"dead_at__year": "9999"})["Location"].endswith("?e=1")
        assert "9999-06-01" in superuser.get(change_url(last)).text
        assert superuser.get(reverse(DASHBOARD)).status_code == 200

    def test_hostile_history_entries(self, superuser: Operator) -> None:
        stamps = ["2026-02-30T00:00:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "infinity"]
        job = JobFactory.create(
            errors=[{"attempt": n, "at": at, "delay": 1e300} for n, at in enumerate(stamps, 1)],
            attempts=2,
            max_attempts=5,
            requeue_history=[{"at": at, "dead_at": at} for at in stamps],
        )
        html = superuser.get(change_url(job)).text
        assert '<table class="jobretry-history">' in html
        for at in stamps:
            assert html.count(at) == 3, at  # as the text it is, in both tables
