"""Search by arguments (issue 22): only for users who may read arguments, answered by a GIN index.

``?arguments=customer_id=42`` on the dead-letter and job lists: jsonb
containment on args/kwargs. Without the payload permission there is no
field, and the parameter in a URL is a 400 before any query.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.urls import reverse

from django_jobretry.deadletters.search import InvalidSearch, containment
from django_jobretry.models import DeadLetter, Job
from tests.factories import DeadLetterFactory, JobFactory
from tests.integration.conftest import Operator, hidden_inputs, messages_of

pytestmark = pytest.mark.django_db

DEAD_LIST = "admin:django_jobretry_deadletter_changelist"
JOB_LIST = "admin:django_jobretry_job_changelist"
FIELD = b'class="jobretry-argument-search"'


def shown(response: Any) -> set[int]:
    return {row.pk for row in response.context["cl"].result_list}


@pytest.fixture
def reader(make_user: Any) -> Operator:
    return Operator(make_user("view_job", "view_deadletter", "view_job_payload", name="reader"))


@pytest.fixture
def dead() -> dict[str, DeadLetter]:
    return {
        "42": DeadLetterFactory.create(kwargs={"customer_id": 42, "region": "eu"}),
        "42 as text": DeadLetterFactory.create(kwargs={"customer_id": "42", "region": "us"}),
        "7": DeadLetterFactory.create(kwargs={"customer_id": 7, "order": {"id": 9}}),
        "positional": DeadLetterFactory.create(args=[42, "abc"], kwargs={}),
    }


@pytest.mark.parametrize(
    ("search", "expected"),
    [
        ("customer_id=42", {"42", "42 as text"}),
        ('customer_id="42"', {"42 as text"}),
        ("customer_id=42 region=eu", {"42"}),
        ("region='us'", {"42 as text"}),
        ("order.id=9", {"7"}),
        ('{"customer_id": 7}', {"7"}),
        ("42", {"positional"}),
        ('[42, "abc"]', {"positional"}),
        ("customer_id=1000", set()),
    ],
)
def test_a_search_lists_exactly_the_dead_letters_whose_arguments_contain_it(
    reader: Operator, dead: dict[str, DeadLetter], search: str, expected: set[str]
) -> None:
    response = reader.get(reverse(DEAD_LIST), {"arguments": search})
    assert response.status_code == 200
    assert shown(response) == {dead[name].pk for name in expected}


FLAKY = "tests.jobs_app.jobs.flaky"  # flaky(key, failures)
RECORD = "tests.jobs_app.jobs.record"  # record(key)


@pytest.mark.parametrize(
    ("search", "expected"),
    [
        ("failures=5", {"positional", "keyword"}),
        ("key=order-7", {"positional", "keyword"}),
        ("key='order-7' failures=5", {"positional", "keyword"}),
        ("failures=order-7", set()),  # order-7 is passed at key's index, not at failures'
        ("key=5", set()),
    ],
)
def test_a_parameter_name_finds_its_argument_passed_by_position(
    reader: Operator, search: str, expected: set[str]
) -> None:
    """The row stores ``flaky("order-7", 5)`` as args ["order-7", 5]: the names find it as by keyword."""
    rows = {
        "positional": DeadLetterFactory.create(task_name=FLAKY, args=["order-7", 5], kwargs={}),
        "keyword": DeadLetterFactory.create(
            task_name=FLAKY, args=[], kwargs={"key": "order-7", "failures": 5}
        ),
        # takes_anything(*args, **kwargs): its positional arguments have no names.
        "no names": DeadLetterFactory.create(
            task_name="tests.jobs_app.jobs.takes_anything", args=["order-7", 5], kwargs={}
        ),
    }
    response = reader.get(reverse(DEAD_LIST), {"arguments": search})
    assert response.status_code == 200
    assert shown(response) == {rows[name].pk for name in expected}


def test_the_label_says_whole_values_and_a_part_of_a_text_finds_nothing(reader: Operator) -> None:
    """The reporter's "contain": the field said contain, a substring found nothing. It says what it does."""
    dead = DeadLetterFactory.create(kwargs={"email": "not-an-address"})
    page = reader.get(reverse(DEAD_LIST)).content.decode()
    label = page.split('for="jobretry-arguments" class="help">', 1)[1].split("</label>", 1)[0]
    assert "equal to this" in label
    assert "never part of a text" in label
    assert "contain" not in label
    assert shown(reader.get(reverse(DEAD_LIST), {"arguments": "email=not-an"})) == set()
    assert shown(reader.get(reverse(DEAD_LIST), {"arguments": "email=not-an-address"})) == {dead.pk}


def test_the_field_is_in_the_sidebar_and_keeps_the_other_filters(reader: Operator) -> None:
    DeadLetterFactory.create(queue_name="mail")
    response = reader.get(reverse(DEAD_LIST), {"queue_name": "mail"})
    form = response.content.decode().split(FIELD.decode(), 1)[1].split("</form>", 1)[0]
    assert hidden_inputs(form) == {"queue_name": "mail"}


@pytest.mark.parametrize("listing", [DEAD_LIST, JOB_LIST])
def test_without_the_payload_permission_there_is_no_field_and_the_url_is_refused(
    viewer: Operator, dead: dict[str, DeadLetter], listing: str
) -> None:
    assert FIELD not in viewer.get(reverse(listing)).content
    assert viewer.get(reverse(listing), {"arguments": "customer_id=42"}).status_code == 400


def test_refused_to_everyone_when_a_redactor_hides_values(
    reader: Operator, superuser: Operator, settings: Any
) -> None:
    redactor = "tests.integration.admin.test_admin_security.redact"
    settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": redactor}
    for operator in (reader, superuser):
        assert FIELD not in operator.get(reverse(DEAD_LIST)).content
        assert operator.get(reverse(DEAD_LIST), {"arguments": "password=h"}).status_code == 400


@pytest.mark.parametrize(
    ("search", "said"),
    [
        ("customer_id=", "a value after '='"),
        ("=42", "a name before '='"),
        ('{"customer_id": 4', "is not valid JSON"),
        ("region='eu", "cannot be read"),
        ("x" * 1001, "longer than 1000 characters"),
    ],
)
def test_a_search_that_cannot_be_read_is_the_lists_error_page_with_a_message(
    reader: Operator, dead: dict[str, DeadLetter], search: str, said: str
) -> None:
    response = reader.get(reverse(DEAD_LIST), {"arguments": search}, follow=True)
    assert response.redirect_chain[-1][0].endswith("?e=1")
    assert any(said in message for message in messages_of(response)), messages_of(response)
    assert DeadLetter.objects.count() == 4


@pytest.mark.parametrize(
    ("search", "said"),
    [
        ('customer_id="a\\u0000b"', "contains a NUL character"),
        ('{"customer_id": "\\u0000"}', "contains a NUL character"),
        ('{"\\u0000": 1}', "a key in the argument search contains a NUL character"),
        ('"\\ud800"', "contains a lone surrogate"),
        ('region="eu\\udfff"', "contains a lone surrogate"),
        ("NaN", "holds nan"),
        ("customer_id=Infinity", "holds inf"),
        ("customer_id=-Infinity", "holds -inf"),
        ("1e400", "holds inf"),
        ("[" * 499 + "]" * 499, "nested deeper than 100 levels"),
        ("customer_id=" + "[" * 400 + "]" * 400, "nested deeper than 100 levels"),
        (".".join(["a"] * 300) + "=1", "nested deeper than 100 levels"),
    ],
)
@pytest.mark.parametrize("listing", [DEAD_LIST, JOB_LIST])
@pytest.mark.parametrize("who", ["reader", "superuser"])
@pytest.mark.usefixtures("dead")
def test_a_search_jsonb_refuses_is_the_lists_error_page_with_a_message(
    request: pytest.FixtureRequest, who: str, listing: str, search: str, said: str
) -> None:
    """It parses, but PostgreSQL would refuse it: refused before any query, like a search that does not."""
    operator: Operator = request.getfixturevalue(who)
    response = operator.get(reverse(listing), {"arguments": search}, follow=True)
    assert response.redirect_chain[-1][0].endswith("?e=1")
    assert any(said in message for message in messages_of(response)), messages_of(response)
    assert DeadLetter.objects.count() == 4


def test_the_job_list_searches_retrying_jobs(reader: Operator) -> None:
    retrying = JobFactory.create(retrying=True, kwargs={"customer_id": 42})
    JobFactory.create(kwargs={"customer_id": 42})  # never attempted: not searched
    JobFactory.create(retrying=True, kwargs={"customer_id": 7})
    response = reader.get(reverse(JOB_LIST), {"arguments": "customer_id=42"})
    assert shown(response) == {retrying.pk}


def test_requeue_all_matching_a_search_acts_on_exactly_those(
    superuser: Operator, dead: dict[str, DeadLetter]
) -> None:
    url = reverse("admin:django_jobretry_deadletter_requeue_matching")
    query = {"_changelist_filters": "arguments=customer_id%3D42"}
    page = superuser.get(url, query)
    assert page.context["counts"].total == 2
    superuser.post(f"{url}?_changelist_filters=arguments%3Dcustomer_id%253D42", hidden_inputs(page.text))
    assert set(DeadLetter.objects.values_list("pk", flat=True)) == {dead["7"].pk, dead["positional"].pk}
    assert sorted(Job.objects.values_list("kwargs__region", flat=True)) == ["eu", "us"]


def test_containment_refuses_an_empty_search() -> None:
    with pytest.raises(InvalidSearch, match="the argument search is empty"):
        containment("   ")


@pytest.mark.django_db(transaction=True)
def test_the_search_reads_the_gin_indexes_not_the_tables() -> None:
    with connection.cursor() as cursor:
        for table in (DeadLetter._meta.db_table, Job._meta.db_table):
            cursor.execute(f"TRUNCATE {table}")
        cursor.execute(
            f"""
            INSERT INTO {DeadLetter._meta.db_table} (job_id, task_name, queue_name, policy_name, priority,
                args, kwargs, reason, attempts, max_attempts, errors, last_error_class, last_error,
                requeue_count, requeue_history, enqueued_at, dead_at)
            SELECT g, %s, 'default', 'default', 0, jsonb_build_array(g),
                   jsonb_build_object('customer_id', g, 'region', 'eu'), 'fatal', 1, 3, '[]', 'E', 'boom',
                   0, '[]', now(), now()
            FROM generate_series(1, 20000) AS g
            """,
            [RECORD],
        )
        cursor.execute(f"ANALYZE {DeadLetter._meta.db_table}")
    found = DeadLetter.objects.filter(containment("customer_id=4242"))
    plan = str(found.explain())
    assert "jobretry_dead_kwargs" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert found.count() == 1
    # A parameter name looked for by position too (record(key): index 0) reads both indexes.
    by_name = DeadLetter.objects.filter(containment("key=4242"))
    plan = str(by_name.explain())
    assert "jobretry_dead_kwargs" in plan, plan
    assert "jobretry_dead_args" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert by_name.count() == 1
    # Among jobs, the search reads a partial index of the retrying ones (the GIN one, or the btree
    # one), not the claim's index of every ready job: a backlog of 5,000 never tried and 50 retrying,
    # with fresh statistics. Without them the plan depended on what earlier tests left in pg_statistic
    # (CI once saw jobretry_job_claim_queue). Scans are priced out: the index is what is pinned here.
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {Job._meta.db_table} (task_name, queue_name, policy_name, status, args, kwargs,
                priority, run_at, attempts, max_attempts, lease_owner, errors, requeue_count,
                requeue_history, enqueued_at)
            SELECT %s, 'default', 'default', 'ready', jsonb_build_array(g),
                   jsonb_build_object('customer_id', g), 0, now(), CASE WHEN g <= 50 THEN 1 ELSE 0 END, 3,
                   '', '[]', 0, '[]', now()
            FROM generate_series(1, 5050) AS g
            """,
            [RECORD],
        )
        cursor.execute(f"ANALYZE {Job._meta.db_table}")
    jobs = Job.objects.filter(containment("customer_id=42"), status="ready", attempts__gt=0)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = str(jobs.explain())
    assert "jobretry_job_retrying" in plan, plan
    assert "jobretry_job_claim" not in plan, plan
    assert "Seq Scan" not in plan, plan
    assert jobs.count() == 1
