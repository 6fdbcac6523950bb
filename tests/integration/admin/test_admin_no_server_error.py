"""No admin page of ours answers 500, whatever a request puts in its path or query (issue 35).

Every URL the admin site routes to this app is found from the site's URL
resolver, so a page added later is swept without editing this file. Each is
requested

- with hostile path segments in place of its object id: NUL, the UTF-8 of a
  lone surrogate, huge and negative numbers, NaN, 10,000 characters;
- on a real row, with each query parameter it may read (its list's own
  filters, found from the page, and those every page may read) set in turn
  to hostile values: the same, and JSON PostgreSQL's jsonb refuses (an
  escaped NUL, NaN, nesting 499 deep).

An answer below 500 passes: 200, a redirect, 400, 403 or 404. Django's test
client re-raises what a view raises; the sweep records it as that URL's
failure and goes on, so one run lists every failing URL.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.contrib import admin
from django.urls import URLPattern, URLResolver, reverse

from django_jobretry.deadletters import search
from django_jobretry.flows import Workflow
from django_jobretry.holds import admin as holds
from django_jobretry.holds import breakers
from django_jobretry.holds import pauses as hold_service
from django_jobretry.models import Circuit, Pause
from tests.factories import DeadLetterFactory, JobFactory, ScheduleFactory, WorkerProcessFactory
from tests.integration.conftest import Operator
from tests.jobs_app import flow_jobs, jobs

pytestmark = pytest.mark.django_db

APP = "django_jobretry/"
#: A path converter of a route: ``<path:object_id>``, ``<id>``.
CONVERTER = re.compile(r"<(?:\w+:)?\w+>")
DEEP = "[" * 499 + "]" * 499
#: Path segments, as they travel in a URL (percent-encoded).
SEGMENTS = ["a%00b", "%ED%A0%80", "99999999999999999999999", "-1", "NaN", "x" * 10_000]
#: Query values, as the page receives them (decoded).
VALUES = [
    "a\x00b",
    "-99999999999999999999999",
    "NaN",
    "x" * 10_000,
    DEEP,
    'k="\\u0000"',
]
#: Parameters a page of ours may read, beside a list's own filters.
COMMON = ["q", "p", "o", "e", "all", "arguments", "_facets", "refresh", "since", "held"]
#: Parameters Django's admin reads on every page, an object's included.
EVERYWHERE = ["_changelist_filters", "_to_field", "_popup"]


def routes() -> list[str]:
    """The admin site's routes of this app, converters left in: ``django_jobretry/job/<path:object_id>/``."""
    found: list[str] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                found.append(prefix + str(pattern.pattern))

    walk(admin.site.get_urls(), "")
    ours = sorted({route for route in found if route.startswith(APP)})
    return ["", APP, *ours]  # the site's index and this app's, which list our models


ROUTES = routes()


@dataclass(frozen=True)
class Failure:
    url: str
    what: str


@pytest.fixture
def rows() -> dict[str, str]:
    """One row of each model, so a page with a real id renders and reads its query; model name -> id."""
    job = JobFactory.create(retrying=True, kwargs={"k": 1})
    dead = DeadLetterFactory.create(task_name=jobs.flaky.name, kwargs={"failures": 1})
    breakers.hold_task(jobs.record.name, timedelta(hours=1), None, job_id=job.pk)
    hold_service.pause(queue="other", actor="sweep", until=timedelta(hours=1))
    flow = Workflow("sweep")
    flow.add(flow_jobs.step, "first", name="first")
    return {
        "job": str(job.pk),
        "deadletter": str(dead.pk),
        "workerprocess": str(WorkerProcessFactory.create().pk),
        "schedule": ScheduleFactory.create().pk,
        "pause": str(Pause.objects.get().pk),
        "circuit": Circuit.objects.get().pk,
        "flow": str(flow.enqueue().pk),
    }


@pytest.fixture
def looker(make_user: Any) -> Operator:
    """May look at every page of ours (arguments too), and change nothing."""
    views = ["view_job", "view_deadletter", "view_workerprocess", "view_schedule", "view_flow"]
    return Operator(make_user(*views, "view_pause", "view_circuit", "view_job_payload", name="looker"))


def url_of(route: str, segment: str) -> str:
    return reverse("admin:index") + CONVERTER.sub(lambda _: segment, route)


def parameters(operator: Operator, url: str, *, of_object: bool) -> list[str]:
    """What the page at ``url`` may read; for a list, its filters' parameters too."""
    found = [*EVERYWHERE] if of_object else [*EVERYWHERE, *COMMON]
    response = operator.get(url)
    context = getattr(response, "context", None)
    if response.status_code == 200 and context is not None and "cl" in context:
        for spec in context["cl"].filter_specs:
            found.extend(name for name in spec.expected_parameters() if name and name not in found)
    return found


def query(name: str, value: str) -> str:
    """``name=value``; for ``_changelist_filters``, the value as the list's argument search."""
    return urlencode({name: urlencode({"arguments": value}) if name == "_changelist_filters" else value})


def requests(operator: Operator, route: str, rows: dict[str, str], *, each: bool) -> Iterator[list[str]]:
    """The hostile URLs of ``route``, in groups of which only the first is sent if it answers 200.

    Each segment in place of its id; then, for each value, every parameter
    the page may read set to it at once, and, if that is refused (a refusal
    may come from one parameter before the others are read), each alone.
    Without ``each``, only the first of each group.
    """
    model = route.removeprefix(APP).split("/", 1)[0]
    of_object = bool(CONVERTER.search(route))
    if of_object:
        for segment in SEGMENTS:
            yield [url_of(route, segment)]
    url = url_of(route, quote(rows.get(model, "1"), safe=""))
    names = parameters(operator, url, of_object=of_object)
    for value in VALUES:
        together = f"{url}?{'&'.join(query(name, value) for name in names)}"
        yield [together, *(f"{url}?{query(name, value)}" for name in names)] if each else [together]


def answer(operator: Operator, url: str) -> int | Failure:
    """The status of a GET of ``url``, or the Failure a 500 is."""
    try:
        status = operator.get(url).status_code
    except Exception as exc:  # the test client re-raises a view's exception: a 500
        return Failure(url[:300], f"{type(exc).__name__}: {str(exc)[:200]}")
    return Failure(url[:300], f"status {status}") if status >= 500 else status


def sweep(operator: Operator, route: str, rows: dict[str, str], *, each: bool = True) -> list[Failure]:
    """Every hostile request of ``route`` that answered 500 or raised, with what it raised."""
    failures: list[Failure] = []
    for first, *rest in requests(operator, route, rows, each=each):
        status = answer(operator, first)
        if status == 200:
            continue
        failures.extend(
            found for found in [status, *map(partial(answer, operator), rest)] if isinstance(found, Failure)
        )
    return failures


def test_the_sweep_finds_every_kind_of_page() -> None:
    """The resolver gives the lists, change pages and custom views: new pages are swept as they come."""
    for expected in [
        f"{APP}job/",
        f"{APP}deadletter/<path:object_id>/change/",
        f"{APP}deadletter/dashboard/",
        f"{APP}deadletter/groups/",
        f"{APP}deadletter/<path:object_id>/repair/",
        f"{APP}deadletter/matching/requeue/",
        f"{APP}deadletter/<path:object_id>/discard/",
        f"{APP}pause/add/",
        f"{APP}circuit/<path:object_id>/change/",
        f"{APP}schedule/",
        f"{APP}workerprocess/",
        f"{APP}dashboard/",
        f"{APP}flow/",
        f"{APP}flow/<path:object_id>/cancel/",
    ]:
        assert expected in ROUTES


@pytest.mark.parametrize("route", ROUTES)
def test_no_hostile_path_or_query_makes_a_server_error(
    superuser: Operator, rows: dict[str, str], route: str
) -> None:
    assert sweep(superuser, route, rows) == []


@pytest.mark.parametrize("route", ROUTES)
def test_nor_for_a_user_who_may_only_look(looker: Operator, rows: dict[str, str], route: str) -> None:
    """Fewer buttons, other branches: every path segment, and each value in every parameter at once."""
    assert sweep(looker, route, rows, each=False) == []


class TestTheSweepCatchesA500:
    """Planted defects, one in a path and one in a query value: the sweep reports each URL."""

    def test_in_a_path_segment(
        self, superuser: Operator, rows: dict[str, str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(holds.CircuitAdmin, "get_object", admin.ModelAdmin.get_object)
        failures = sweep(superuser, f"{APP}circuit/<path:object_id>/change/", rows)
        assert {failure.url for failure in failures} >= {
            url_of(f"{APP}circuit/<path:object_id>/change/", "a%00b")
        }
        assert all("DataError" in failure.what for failure in failures), failures

    def test_in_a_query_value(
        self, superuser: Operator, rows: dict[str, str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(search, "MAX_DEPTH", 10_000)
        failures = sweep(superuser, f"{APP}job/", rows)
        assert failures
        assert all("RecursionError" in failure.what for failure in failures), failures
        assert all(quote(DEEP, safe="")[:100] in failure.url for failure in failures), failures
