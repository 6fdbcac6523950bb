"""Failure groups (issue 22): fingerprints, the groups they make, and acting on one group.

A fingerprint is computed by the database (migration 0022's SQL functions)
from a dead letter's last attempt: these tests read it back from real rows.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_jobretry.deadletters import filtered, search
from django_jobretry.jobs.history import AttemptEnd, attempt_entry, error_entry, event_entry, render_error
from django_jobretry.models import DeadLetter, Job
from django_jobretry.models.fingerprints import JobFingerprint, check_fingerprint
from django_jobretry.policy import ErrorKind
from tests.factories import DEFAULT_TASK, DeadLetterFactory, JobFactory
from tests.integration.conftest import Operator, cli_run, exit_code, hidden_inputs, messages_of

pytestmark = pytest.mark.django_db

TIMEOUT = "partner.PartnerTimeout"


def dead(message: str, *, task: str = DEFAULT_TASK, error_class: str = TIMEOUT, **fields: Any) -> DeadLetter:
    """A dead letter whose one failed attempt raised ``error_class(message)``."""
    entry = attempt_entry(
        1, AttemptEnd.ERROR, ErrorKind.RETRYABLE, "w1", error_class=error_class, message=message
    )
    return DeadLetterFactory.create(task_name=task, errors=[entry], **fields)


def fingerprints(*rows: DeadLetter) -> set[str]:
    found = DeadLetter.objects.filter(pk__in=[row.pk for row in rows])
    return set(found.values_list("fingerprint", flat=True))


# --- the fingerprint ----------------------------------------------------------------------------


def test_messages_that_differ_only_in_numbers_ids_quoted_strings_and_hex_share_one_fingerprint() -> None:
    same = [
        dead("order 1234 for 'acme' timed out after 30.5 s (request 3f2b8c1e-1111-2222-3333-444455556666)"),
        dead('order 77 for "globex" timed out after 2 s (request 0b7d9e2a-9999-8888-7777-666655554444)'),
        dead("order 9 for 'x' timed out after 120.25 s (request 00000000-0000-0000-0000-000000000000)"),
    ]
    assert len(fingerprints(*same)) == 1
    hexes = [dead("bad checksum 0x7fa3 in block a3f9c0d2e1"), dead("bad checksum 0xFF in block 00c0ffee12")]
    assert len(fingerprints(*hexes)) == 1
    assert fingerprints(*hexes) != fingerprints(*same)


def test_another_message_class_or_task_is_another_group() -> None:
    base = dead("order 1 timed out")
    others = [
        dead("order 1 was refused"),
        dead("order 1 timed out", error_class="builtins.KeyError"),
        dead("order 1 timed out", task="tests.jobs_app.jobs.other_task"),
    ]
    assert len(fingerprints(base, *others)) == 4
    for row in (base, *others):
        row.refresh_from_db()
        assert check_fingerprint(row.fingerprint) == row.fingerprint  # 16 hex digits: fit for a URL


class PartnerDown(Exception):
    fingerprint = "partner-down"


class BrokenFingerprint(Exception):
    @property
    def fingerprint(self) -> str:
        raise RuntimeError("no")


class NumericFingerprint(Exception):
    fingerprint = 42


def entry_of(error: BaseException, attempt: int = 1) -> Any:
    return error_entry(attempt, render_error(error), ErrorKind.RETRYABLE, AttemptEnd.ERROR, "w1")


def test_a_task_names_its_own_group_through_its_exceptions_fingerprint_attribute() -> None:
    own = entry_of(PartnerDown("upstream 502 at 10:31"))
    assert own["fingerprint"] == "partner-down"
    a = DeadLetterFactory.create(errors=[own])
    b = DeadLetterFactory.create(
        task_name="tests.jobs_app.jobs.other_task",
        errors=[entry_of(PartnerDown("a different message altogether"))],
    )
    c = DeadLetterFactory.create(errors=[entry_of(ValueError("upstream 502 at 10:31"))])
    assert len(fingerprints(a, b)) == 1, "one chosen fingerprint groups across tasks and messages"
    assert fingerprints(a) != fingerprints(c)


@pytest.mark.parametrize("error", [BrokenFingerprint("x"), NumericFingerprint("x")])
def test_a_fingerprint_attribute_that_raises_or_is_not_text_is_ignored(error: BaseException) -> None:
    entry = entry_of(error)
    assert "fingerprint" not in entry
    assert entry["message"] == "x"  # the failure itself is still recorded


def test_attempts_that_ended_without_an_exception_group_by_how_they_ended() -> None:
    lost = [
        DeadLetterFactory.create(
            errors=[event_entry(3, AttemptEnd.LEASE_EXPIRED, f"lease expired: worker {w} stopped", w)]
        )
        for w in ("host-a:101:x1", "host-b:7:q9")
    ]
    shutdown = DeadLetterFactory.create(errors=[event_entry(3, AttemptEnd.SHUTDOWN, "cut off", "host-a")])
    assert len(fingerprints(*lost)) == 1
    assert fingerprints(shutdown) != fingerprints(*lost)


def test_a_retrying_jobs_fingerprint_is_its_last_errors_computed_when_read() -> None:
    entry = attempt_entry(
        1, AttemptEnd.ERROR, ErrorKind.RETRYABLE, "w1", error_class=TIMEOUT, message="order 5"
    )
    job = JobFactory.create(attempts=1, errors=[entry])
    twin = dead("order 6")
    found = Job.objects.annotate(fingerprint=JobFingerprint()).filter(pk=job.pk)
    assert fingerprints(twin) == set(found.values_list("fingerprint", flat=True))


# --- the invariant, with its negative control -------------------------------------------------------

#: Text around the variable parts: letters, spaces and punctuation that is not a quote.
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz :;,-()", max_size=20)
VARIABLE = st.one_of(
    st.integers(min_value=0, max_value=10**12).map(str),
    st.uuids().map(str),
    st.text(alphabet="abcdefghijklmnop", max_size=8).map(lambda s: f"'{s}'"),
    st.integers(min_value=0, max_value=2**64).map(lambda n: f"0x{n:x}"),
)
PROPERTY = settings(
    max_examples=60,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def pattern(function: str, message: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s)", [message])
        return str(cursor.fetchone()[0])


def same_pattern_whatever_the_variables(function: str) -> Any:
    @PROPERTY
    @given(st.lists(WORDS, min_size=2, max_size=4), st.data())
    def check(words: list[str], data: Any) -> None:
        def message() -> str:
            parts = [data.draw(VARIABLE) for _ in words[1:]]
            return words[0] + "".join(f" {p} {w}" for p, w in zip(parts, words[1:], strict=True))

        assert pattern(function, message()) == pattern(function, message())

    return check


def test_property_the_pattern_ignores_numbers_ids_quoted_strings_and_hex() -> None:
    same_pattern_whatever_the_variables("jobretry_error_pattern")()


def test_negative_control_a_pattern_that_keeps_numbers_is_caught() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION pg_temp.keeps_numbers(message text) RETURNS text LANGUAGE sql AS "
            "$$ SELECT regexp_replace(message, '''[^'']*''', '<s>', 'g') $$"
        )
    with pytest.raises(AssertionError):
        same_pattern_whatever_the_variables("pg_temp.keeps_numbers")()


# --- the groups -------------------------------------------------------------------------------------


def test_groups_count_first_and_last_seen_tasks_reasons_and_an_example() -> None:
    now = timezone.now()
    big = [dead(f"order {n} timed out", dead_at=now - timedelta(minutes=n)) for n in (1, 2, 3)]
    big.append(dead("order 4 timed out", reason="exhausted", dead_at=now - timedelta(hours=30)))
    small = dead("missing key 'sku'", error_class="builtins.KeyError", dead_at=now - timedelta(minutes=5))
    found = search.groups()
    assert [(g.count, g.example_class) for g in found] == [(4, TIMEOUT), (1, "builtins.KeyError")]
    first = found[0]
    assert first.fingerprint in fingerprints(*big)
    assert first.tasks == [DEFAULT_TASK]
    assert first.reasons == ["exhausted", "fatal"]
    assert (first.first_seen, first.last_seen) == (now - timedelta(hours=30), now - timedelta(minutes=1))
    assert first.example_message.startswith("order ")
    assert first.example_message.endswith(" timed out")
    assert found[1].example_message == small.last_error
    recent = search.groups(since=timedelta(hours=24))
    assert [g.count for g in recent] == [3, 1]
    assert [g.count for g in search.groups(limit=1)] == [4]


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [({"limit": 0}, "limit 0 is invalid"), ({"since": "1h"}, "since '1h' is invalid")],
)
def test_groups_refuse_a_bad_limit_or_since(kwargs: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        search.groups(**kwargs)


def test_filtered_by_fingerprint_is_exactly_one_group_and_refuses_a_malformed_one() -> None:
    group = [dead(f"order {n} timed out") for n in range(3)]
    dead("order 1 refused")
    (fingerprint,) = fingerprints(*group)
    assert set(filtered(fingerprint=fingerprint).values_list("pk", flat=True)) == {d.pk for d in group}
    with pytest.raises(ValueError, match="fingerprint 'ABC' is invalid: 16 hex digits"):
        filtered(fingerprint="ABC")


# --- the admin --------------------------------------------------------------------------------------

GROUPS = "admin:django_jobretry_deadletter_groups"


def test_the_groups_page_lists_each_group_and_a_group_requeue_acts_on_exactly_its_rows(
    superuser: Operator,
) -> None:
    group = [dead(f"order {n} for 'c{n}' timed out") for n in range(5)]
    others = [dead("missing key 'sku'", error_class="builtins.KeyError") for _ in range(2)]
    (fingerprint,) = fingerprints(*group)
    page = superuser.get(reverse(GROUPS))
    assert page.status_code == 200
    assert [row["group"].count for row in page.context["groups"]] == [5, 2]
    links = page.context["groups"][0]["links"]
    listed = superuser.get(links["list"])
    assert {d.pk for d in listed.context["cl"].result_list} == {d.pk for d in group}

    confirm = superuser.get(links["requeue"])
    assert confirm.context["counts"].total == 5
    done = superuser.post(links["requeue"], hidden_inputs(confirm.content.decode()), follow=True)
    assert "5 dead letters requeued." in " ".join(messages_of(done))
    assert not DeadLetter.objects.filter(fingerprint=fingerprint).exists()
    assert set(DeadLetter.objects.values_list("pk", flat=True)) == {d.pk for d in others}
    revived = Job.objects.filter(requeue_count=1).values_list("requeue_history", flat=True)
    assert sorted(history[-1]["dead_letter_id"] for history in revived) == sorted(d.pk for d in group)


def test_without_the_requeue_and_discard_permissions_the_groups_page_offers_no_action(
    viewer: Operator,
) -> None:
    dead("order 1 timed out")
    page = viewer.get(reverse(GROUPS))
    assert page.status_code == 200
    assert page.context["may"] == {}
    assert b"Requeue group" not in page.content
    assert b"Discard group" not in page.content


def test_a_malformed_fingerprint_in_the_url_is_the_lists_error_page_not_a_500(superuser: Operator) -> None:
    response = superuser.get(reverse("admin:django_jobretry_deadletter_changelist"), {"fingerprint": "x\x00"})
    assert response.status_code in (302, 400)


def test_the_dashboard_shows_the_top_groups_of_the_last_24_hours(superuser: Operator) -> None:
    dead("order 1 timed out")
    dead("order 2 timed out")
    dead("old one", error_class="builtins.KeyError", dead_at=timezone.now() - timedelta(days=2))
    page = superuser.get(reverse("admin:django_jobretry_deadletter_dashboard"))
    assert [row["group"].count for row in page.context["groups"]] == [2]
    assert b'id="failure-groups"' in page.content


# --- the command line -------------------------------------------------------------------------------


def test_deadletters_groups_prints_the_groups_and_requeue_takes_one_by_fingerprint() -> None:
    group = [dead(f"order {n} timed out") for n in range(3)]
    other = dead("missing key 'sku'", error_class="builtins.KeyError")
    (fingerprint,) = fingerprints(*group)
    out, _ = cli_run("groups")
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["fingerprint", "dead"]
    assert lines[1].split()[:2] == [fingerprint, "3"]
    assert "PartnerTimeout: order" in lines[1]
    cli_run("requeue", "--all", "--fingerprint", fingerprint, "--yes")
    assert list(DeadLetter.objects.values_list("pk", flat=True)) == [other.pk]


def test_deadletters_groups_json_and_a_malformed_fingerprint_is_a_usage_error() -> None:
    dead("order 1 timed out")
    out, _ = cli_run("groups", "--json", "--since", "1h")
    (group,) = json.loads(out)["groups"]
    assert group["count"] == 1
    assert group["tasks"] == [DEFAULT_TASK]
    # In process, argparse's refusal is a CommandError; manage.py exits 2 with the same text.
    _, message = exit_code("discard", "--all", "--fingerprint", "not-hex", "--yes")
    assert "argument --fingerprint: 'not-hex' is invalid: 16 hex digits" in message
    assert DeadLetter.objects.count() == 1
