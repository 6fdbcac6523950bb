"""The admin through Django's test client: pages, permissions (server-side), CSRF, messages, log.

Users are real staff accounts with exactly the permissions a test names;
every POST carries the CSRF token a browser would, taken from the page, and
the client enforces CSRF checks, so a missing token would fail like in
production.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_jobretry import FatalError
from django_jobretry import deadletters as service
from django_jobretry.admin import operations
from django_jobretry.admin.changelist import CappedCountPaginator, IndexedDatesQuerySet, RecentValuesFilter
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.services import transitions
from django_jobretry.services.history import AttemptEnd
from django_jobretry.services.outcomes import Failed, Recorder
from tests.factories import DeadLetterFactory, JobFactory, error_history
from tests.integration.test_deadletters import kill

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:django_jobretry_deadletter_changelist"
PASSWORD = "pw-for-tests"  # noqa: S105


def redact(task_name: str, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The PAYLOAD_REDACTOR of these tests: hides e-mail addresses."""
    return [("[email]" if "@" in str(a) else a) for a in args], {
        k: ("[email]" if k == "email" else v) for k, v in kwargs.items()
    }


def broken_redactor(task_name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    raise RuntimeError("redactor bug")


class Inputs(HTMLParser):
    """The hidden inputs of a page's forms, to submit them the way a browser would."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "input" and found.get("type") == "hidden" and found.get("name"):
            self.fields.append((found["name"] or "", found.get("value") or ""))


def hidden_inputs(html: str) -> dict[str, Any]:
    parser = Inputs()
    parser.feed(html)
    data: dict[str, Any] = {}
    for name, value in parser.fields:
        data.setdefault(name, []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in data.items()}


class Operator:
    """A logged-in browser with CSRF checks on: GETs pages, POSTs forms with the page's token."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.client = Client(enforce_csrf_checks=True)
        self.client.force_login(user)

    def get(self, url: str, data: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        return self.client.get(url, data, **kwargs)

    def post(self, url: str, data: dict[str, Any] | None = None, *, token: bool = True, **kwargs: Any) -> Any:
        if token and "csrftoken" not in self.client.cookies:
            self.get(reverse(CHANGELIST))  # any admin form page sets the cookie
        payload = dict(data or {})
        if token:
            payload["csrfmiddlewaretoken"] = self.client.cookies["csrftoken"].value
        return self.client.post(url, payload, **kwargs)

    def act(self, action: str, ids: list[int], **extra: Any) -> Any:
        """Tick ``ids`` on the dead-letter list and run ``action``, following the redirect."""
        data = {"action": action, "_selected_action": [str(i) for i in ids], "index": "0", **extra}
        return self.post(reverse(CHANGELIST), data, follow=True)


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


@pytest.fixture
def make_user(django_user_model: Any) -> Any:
    def make(*codenames: str, name: str = "operator") -> Any:
        user = django_user_model.objects.create_user(username=name, password=PASSWORD, is_staff=True)
        perms = Permission.objects.filter(content_type__app_label="django_jobretry", codename__in=codenames)
        assert perms.count() == len(codenames), codenames
        user.user_permissions.add(*perms)
        return user

    return make


@pytest.fixture
def superuser(admin_user: Any) -> Operator:
    return Operator(admin_user)


@pytest.fixture
def viewer(make_user: Any) -> Operator:
    """May look at jobs and dead letters, nothing else."""
    return Operator(make_user("view_job", "view_deadletter", name="viewer"))


def change_url(obj: Job | DeadLetter) -> str:
    return reverse(f"admin:django_jobretry_{obj._meta.model_name}_change", args=[obj.pk])


def dead_url(dead: DeadLetter, what: str) -> str:
    return reverse(f"admin:django_jobretry_deadletter_{what}", args=[dead.pk])


class TestJobAdmin:
    def test_changelist_and_detail_render_with_history(self, superuser: Operator) -> None:
        job = JobFactory.create(errors=error_history(2, "exhausted"), attempts=2, requeue_count=1)
        job.requeue_history = [{"dead_letter_id": 7, "job_id": 3, "reason": "fatal", "by": "alice"}]
        job.save()
        listing = superuser.get(reverse("admin:django_jobretry_job_changelist"))
        assert listing.status_code == 200
        assert "tests.<wbr>jobs_app.<wbr>jobs.<wbr>record" in listing.text  # may wrap after dots
        assert "2/3" in listing.text
        detail = superuser.get(change_url(job))
        assert detail.status_code == 200
        html = detail.text
        assert '<table class="jobretry-history">' in html
        assert html.count("<summary>Traceback</summary>") == 2
        assert "builtins.ConnectionResetError" in html
        assert "upstream reset for k" in html
        assert "<td>alice</td>" in html  # requeue provenance

    def test_read_only_everywhere(self, superuser: Operator) -> None:
        job = JobFactory.create()
        assert superuser.get(reverse("admin:django_jobretry_job_add")).status_code == 403
        assert superuser.get(reverse("admin:django_jobretry_job_delete", args=[job.pk])).status_code == 403
        assert superuser.post(change_url(job), {"status": "succeeded"}).status_code == 403
        listing = superuser.get(reverse("admin:django_jobretry_job_changelist")).text
        assert 'name="action"' not in listing  # no actions, so no bulk delete
        assert Job.objects.get().status == JobStatus.READY

    def test_filters_and_search_by_id_and_task(self, superuser: Operator) -> None:
        ready, running = (
            JobFactory.create(),
            JobFactory.create(running=True, task_name="tests.jobs_app.jobs.flaky"),
        )
        url = reverse("admin:django_jobretry_job_changelist")
        assert list(superuser.get(url, {"status": "running"}).context["cl"].result_list) == [running]
        assert list(superuser.get(url, {"q": str(ready.pk)}).context["cl"].result_list) == [ready]
        assert list(superuser.get(url, {"q": "flaky"}).context["cl"].result_list) == [running]
        assert list(
            superuser.get(url, {"task_name": "tests.jobs_app.jobs.flaky"}).context["cl"].result_list
        ) == [running]
        assert superuser.get(url, {"q": "not-a-number"}).status_code == 200


class TestDeadLetterPages:
    def test_changelist_columns_and_detail_with_tracebacks(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create(exhausted=True, last_error="first line\nsecond line")
        listing = superuser.get(reverse(CHANGELIST))
        assert listing.status_code == 200
        assert "first line" in listing.text
        assert "second line" not in listing.text
        assert "3/3" in listing.text
        detail = superuser.get(change_url(dead))
        assert detail.status_code == 200
        assert detail.text.count("<summary>Traceback</summary>") == 3
        assert "Attempts exhausted" in detail.text
        assert f'action="{dead_url(dead, "requeue")}"' in detail.text
        assert f'action="{dead_url(dead, "discard")}"' in detail.text

    def test_a_real_dead_letter_shows_its_history_and_provenance(self, superuser: Operator) -> None:
        first = kill(key="again")
        service.requeue(first.pk, actor="alice")
        [claimed] = transitions.claim("w", 1, 30, None)
        Recorder("w", object).record_failure(Failed(claimed, FatalError("still bad"), AttemptEnd.ERROR))
        second = DeadLetter.objects.get(job_id=claimed.id)
        html = superuser.get(change_url(second)).text
        assert "still bad" in html
        assert "django_jobretry.policy.errors.FatalError" in html
        assert "<td>alice</td>" in html
        assert f"<td>{first.pk}</td>" in html

    def test_view_only_user_sees_no_buttons_and_no_actions(self, viewer: Operator) -> None:
        dead = DeadLetterFactory.create()
        listing = viewer.get(reverse(CHANGELIST))
        assert listing.status_code == 200
        assert "requeue_selected" not in listing.text
        assert "discard_selected" not in listing.text
        detail = viewer.get(change_url(dead))
        assert detail.status_code == 200
        assert dead_url(dead, "requeue") not in detail.text
        assert dead_url(dead, "discard") not in detail.text

    def test_no_add_change_or_plain_delete(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        assert superuser.get(reverse("admin:django_jobretry_deadletter_add")).status_code == 403
        assert superuser.post(dead_url(dead, "delete"), {"post": "yes"}).status_code == 403
        assert superuser.post(change_url(dead), {"reason": "fatal"}).status_code == 403
        assert "delete_selected" not in superuser.get(reverse(CHANGELIST)).text
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_search_by_text_dead_letter_id_and_job_id(self, superuser: Operator) -> None:
        a = DeadLetterFactory.create(last_error="smtp refused")
        b = DeadLetterFactory.create()
        url = reverse(CHANGELIST)

        def found(term: str) -> list[DeadLetter]:
            return list(superuser.get(url, {"q": term}).context["cl"].result_list)

        assert found("smtp") == [a]
        assert found(str(b.pk)) == [b]
        assert found(str(a.job_id)) == [a]
        assert found("x" * 30) == []

    def test_filters_by_queue_task_reason(self, superuser: Operator) -> None:
        fatal = DeadLetterFactory.create(queue_name="mail")
        exhausted = DeadLetterFactory.create(exhausted=True)
        url = reverse(CHANGELIST)
        page = superuser.get(url)
        assert "?queue_name=mail" in page.text  # the filter offers the queue
        assert list(superuser.get(url, {"queue_name": "mail"}).context["cl"].result_list) == [fatal]
        assert list(superuser.get(url, {"reason": "exhausted"}).context["cl"].result_list) == [exhausted]
        assert list(superuser.get(url, {"task_name": "nope"}).context["cl"].result_list) == []
        assert superuser.get(url, {"_facets": "True"}).status_code == 200


class TestPayload:
    def test_hidden_without_the_permission(self, viewer: Operator) -> None:
        dead = DeadLetterFactory.create(kwargs={"email": "someone@example.com"})
        job = JobFactory.create(args=["secret-token"])
        for obj in (dead, job):
            html = viewer.get(change_url(obj)).text
            assert "hidden (needs the 'Can view job and dead-letter arguments' permission)" in html
        assert "someone@example.com" not in viewer.get(change_url(dead)).text
        assert "secret-token" not in viewer.get(change_url(job)).text

    def test_shown_with_the_permission(self, make_user: Any) -> None:
        reader = Operator(make_user("view_job", "view_deadletter", "view_job_payload"))
        dead = DeadLetterFactory.create(args=["k1"], kwargs={"email": "someone@example.com"})
        html = reader.get(change_url(dead)).text
        assert "someone@example.com" in html
        assert "&quot;k1&quot;" in html
        assert "hidden (needs" not in html

    def test_the_redactor_applies_even_with_the_permission(self, make_user: Any, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": f"{__name__}.redact"}
        reader = Operator(make_user("view_job", "view_deadletter", "view_job_payload"))
        dead = DeadLetterFactory.create(args=["a@b.example", 42], kwargs={"email": "x@y.example", "n": 1})
        job = JobFactory.create(args=["c@d.example"])
        html = reader.get(change_url(dead)).text + reader.get(change_url(job)).text
        assert "x@y.example" not in html
        assert "a@b.example" not in html
        assert "c@d.example" not in html
        assert html.count("&quot;[email]&quot;") == 3
        assert "42" in html
        assert "Shown after the project's PAYLOAD_REDACTOR." in html

    def test_a_failing_redactor_hides_everything(self, superuser: Operator, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": f"{__name__}.broken_redactor"}
        dead = DeadLetterFactory.create(kwargs={"email": "x@y.example"})
        html = superuser.get(change_url(dead)).text
        assert "x@y.example" not in html
        assert "hidden: PAYLOAD_REDACTOR raised RuntimeError" in html


class TestRequeueAction:
    def test_requeues_reports_and_logs(self, make_user: Any) -> None:
        user = make_user("view_deadletter", "requeue_deadletter")
        ops = Operator(user)
        dead = DeadLetterFactory.create_batch(2)
        response = ops.act("requeue_selected", [d.pk for d in dead])
        assert messages_of(response) == ["2 dead letters requeued."]
        assert DeadLetter.objects.count() == 0
        jobs = list(Job.objects.order_by("id"))
        assert [j.requeue_history[-1]["by"] for j in jobs] == ["operator", "operator"]
        entries = LogEntry.objects.filter(user=user)
        assert sorted((e.action_flag, e.object_id) for e in entries) == sorted(
            [(DELETION, str(d.pk)) for d in dead] + [(ADDITION, str(j.pk)) for j in jobs]
        )
        assert {e.get_change_message() for e in entries if e.action_flag == DELETION} == {
            f"Requeued as job {j.pk}." for j in jobs
        }

    def test_one_requeued_is_singular(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        assert messages_of(superuser.act("requeue_selected", [dead.pk])) == ["1 dead letter requeued."]

    def test_already_handled_between_render_and_action(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create_batch(3)
        superuser.get(reverse(CHANGELIST))  # the operator sees three...
        service.discard(dead[0].pk, actor="colleague")  # ...a colleague discards one
        response = superuser.act("requeue_selected", [d.pk for d in dead])
        assert messages_of(response) == ["2 dead letters requeued. 1 was already handled by someone else."]
        assert Job.objects.count() == 2

    def test_unique_key_conflict_is_reported(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create(unique_key="invoice-7")
        JobFactory.create(unique_key="invoice-7")
        response = superuser.act("requeue_selected", [dead.pk])
        assert messages_of(response) == [
            "0 dead letters requeued. 1 not requeued: a live job holds the same unique key."
        ]
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_view_only_user_cannot_forge_the_action(self, viewer: Operator) -> None:
        dead = DeadLetterFactory.create()
        response = viewer.act("requeue_selected", [dead.pk])
        assert response.status_code == 200
        assert DeadLetter.objects.filter(pk=dead.pk).exists()
        assert Job.objects.count() == 0
        assert not LogEntry.objects.exists()

    def test_requeue_permission_does_not_allow_discard(self, make_user: Any) -> None:
        ops = Operator(make_user("view_deadletter", "requeue_deadletter"))
        dead = DeadLetterFactory.create()
        listing = ops.get(reverse(CHANGELIST)).text
        assert "requeue_selected" in listing
        assert "discard_selected" not in listing
        ops.act("discard_selected", [dead.pk], post="yes")
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_action_without_csrf_token_is_refused(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        data = {"action": "requeue_selected", "_selected_action": [str(dead.pk)], "index": "0"}
        assert superuser.post(reverse(CHANGELIST), data, token=False).status_code == 403
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_select_across_requeues_the_filtered_list(self, superuser: Operator) -> None:
        mail = DeadLetterFactory.create_batch(2, queue_name="mail")
        other = DeadLetterFactory.create()
        url = reverse(CHANGELIST) + "?queue_name=mail"
        data = {"action": "requeue_selected", "_selected_action": [str(mail[0].pk)], "index": "0"}
        response = superuser.post(url, {**data, "select_across": "1"}, follow=True)
        assert messages_of(response) == ["2 dead letters requeued."]
        assert list(DeadLetter.objects.all()) == [other]

    def test_too_large_a_selection_is_refused_whole(
        self, superuser: Operator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(operations, "BULK_LIMIT", 2)
        dead = DeadLetterFactory.create_batch(3)
        data = {"action": "requeue_selected", "_selected_action": [str(dead[0].pk)], "index": "0"}
        response = superuser.post(reverse(CHANGELIST), {**data, "select_across": "1"}, follow=True)
        [message] = messages_of(response)
        assert message.startswith("More than 2 dead letters selected: nothing was done.")
        assert DeadLetter.objects.count() == 3


class TestDiscardAction:
    def test_asks_for_confirmation_then_discards(self, make_user: Any) -> None:
        user = make_user("view_deadletter", "discard_deadletter")
        ops = Operator(user)
        dead = DeadLetterFactory.create_batch(2)
        page = ops.act("discard_selected", [d.pk for d in dead])
        assert page.status_code == 200
        assert "Discard 2 dead letters?" in page.text
        assert all(f"<td>{d.pk}</td>" in page.text for d in dead)
        assert DeadLetter.objects.count() == 2  # nothing deleted yet
        form = hidden_inputs(page.text)
        assert form["post"] == "yes"
        response = ops.post(reverse(CHANGELIST), form, follow=True)
        assert messages_of(response) == ["2 dead letters discarded."]
        assert DeadLetter.objects.count() == 0
        assert Job.objects.count() == 0
        entries = LogEntry.objects.filter(user=user)
        assert sorted((e.action_flag, e.object_id, e.get_change_message()) for e in entries) == sorted(
            (DELETION, str(d.pk), "Discarded.") for d in dead
        )

    def test_handled_while_the_confirmation_was_open(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create_batch(2)
        page = superuser.act("discard_selected", [d.pk for d in dead])
        service.requeue(dead[1].pk, actor="colleague")
        response = superuser.post(reverse(CHANGELIST), hidden_inputs(page.text), follow=True)
        assert messages_of(response) == ["1 dead letter discarded. 1 was already handled by someone else."]
        assert Job.objects.count() == 1

    def test_confirmation_pins_what_was_shown(self, superuser: Operator) -> None:
        shown = DeadLetterFactory.create_batch(2)
        url = reverse(CHANGELIST)
        page = superuser.post(
            url, {"action": "discard_selected", "_selected_action": [str(shown[0].pk)], "select_across": "1"}
        )
        assert "Discard 2 dead letters?" in page.text
        late = DeadLetterFactory.create()  # dies after the operator looked
        superuser.post(url, hidden_inputs(page.text), follow=True)
        assert list(DeadLetter.objects.all()) == [late]

    def test_delete_selected_style_post_also_works(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        response = superuser.post(
            reverse(CHANGELIST),
            {"action": "discard_selected", "_selected_action": [str(dead.pk)], "post": "yes"},
            follow=True,
        )
        assert messages_of(response) == ["1 dead letter discarded."]

    def test_view_only_user_cannot_forge_a_confirmed_discard(self, viewer: Operator) -> None:
        dead = DeadLetterFactory.create()
        viewer.act("discard_selected", [dead.pk], post="yes")
        assert DeadLetter.objects.filter(pk=dead.pk).exists()


class TestDetailButtons:
    def test_requeue_button(self, make_user: Any) -> None:
        user = make_user("view_deadletter", "requeue_deadletter")
        ops = Operator(user)
        dead = DeadLetterFactory.create()
        response = ops.post(dead_url(dead, "requeue"))
        assert response.status_code == 302
        assert response.url == reverse(CHANGELIST)
        job = Job.objects.get()
        assert messages_of(ops.get(response.url)) == [f"Dead letter {dead.pk} requeued as job {job.pk}."]
        assert (job.requeue_count, job.requeue_history[0]["by"]) == (1, "operator")
        assert LogEntry.objects.filter(user=user, action_flag=ADDITION, object_id=str(job.pk)).exists()

    def test_get_is_not_allowed(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        assert superuser.get(dead_url(dead, "requeue")).status_code == 405
        assert superuser.get(dead_url(dead, "discard")).status_code == 405
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_403_without_the_permission(self, viewer: Operator, make_user: Any) -> None:
        dead = DeadLetterFactory.create()
        assert viewer.post(dead_url(dead, "requeue")).status_code == 403
        assert viewer.post(dead_url(dead, "discard"), {"post": "yes"}).status_code == 403
        requeuer = Operator(make_user("view_deadletter", "requeue_deadletter", name="requeuer"))
        assert requeuer.post(dead_url(dead, "discard"), {"post": "yes"}).status_code == 403
        assert DeadLetter.objects.filter(pk=dead.pk).exists()
        assert Job.objects.count() == 0

    def test_csrf_is_required(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        assert superuser.post(dead_url(dead, "requeue"), token=False).status_code == 403
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_discard_button_confirms_first(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        page = superuser.post(dead_url(dead, "discard"))
        assert page.status_code == 200
        assert "Discard 1 dead letter?" in page.text
        assert DeadLetter.objects.filter(pk=dead.pk).exists()
        form_action = re.search(r'<form method="post" action="([^"]+)">', page.text)
        assert form_action
        assert form_action.group(1) == dead_url(dead, "discard")
        response = superuser.post(form_action.group(1), hidden_inputs(page.text), follow=True)
        assert messages_of(response) == [f"Dead letter {dead.pk} discarded."]
        assert not DeadLetter.objects.exists()
        assert LogEntry.objects.get().action_flag == DELETION

    @pytest.mark.parametrize("what", ["requeue", "discard"])
    def test_already_handled(self, superuser: Operator, what: str) -> None:
        dead = DeadLetterFactory.create()
        superuser.get(change_url(dead))
        service.discard(dead.pk, actor="colleague")
        response = superuser.post(dead_url(dead, what), {"post": "yes"})
        assert response.status_code == 302
        assert response.url == reverse(CHANGELIST)
        assert messages_of(superuser.get(response.url)) == [
            f"Dead letter {dead.pk} was already handled by someone else."
        ]

    def test_requeue_conflict_returns_to_the_detail_page(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create(unique_key="invoice-9")
        JobFactory.create(unique_key="invoice-9")
        response = superuser.post(dead_url(dead, "requeue"))
        assert response.url == change_url(dead)
        [message] = messages_of(superuser.get(response.url))
        assert "not requeued: a live job holds the same unique key 'invoice-9'" in message

    def test_filters_survive_the_round_trip(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        url = dead_url(dead, "requeue") + "?_changelist_filters=reason%3Dfatal"
        assert superuser.post(url).url == reverse(CHANGELIST) + "?reason=fatal"


class TestDashboard:
    def test_counts_and_charts(self, viewer: Operator) -> None:
        JobFactory.create_batch(2)
        JobFactory.create(running=True)
        JobFactory.create(succeeded=True, queue_name="mail")
        DeadLetterFactory.create_batch(2)
        DeadLetterFactory.create(exhausted=True, queue_name="mail")
        DeadLetterFactory.create(queue_name="mail", dead_at=timezone.now() - timedelta(days=3))
        response = viewer.get(reverse("admin:django_jobretry_deadletter_dashboard"))
        assert response.status_code == 200
        context = response.context
        assert context["statuses"] == ["Ready", "Running", "Succeeded"]
        assert [(row["queue"], row["counts"], row["dead"]) for row in context["queues"]] == [
            ("default", [2, 1, 0], 2),
            ("mail", [0, 0, 1], 2),
        ]
        assert context["totals"] == {"counts": [2, 1, 1], "dead": 4}
        assert {r["value"]: r["dead"] for r in context["reasons"]} == {
            "fatal": 3,
            "exhausted": 1,
            "deadline": 0,
            "lease_expired": 0,
        }
        assert (context["hourly"].total, len(context["hourly"].bars)) == (3, 24)
        assert context["hourly"].bars[-1].count == 3
        assert (context["daily"].total, len(context["daily"].bars)) == (4, 7)
        assert "<svg" in response.text
        assert "<script" not in response.text.split('id="content-main"')[1]

    def test_needs_view_permission(self, make_user: Any, superuser: Operator) -> None:
        nobody = Operator(make_user("view_job"))
        assert nobody.get(reverse("admin:django_jobretry_deadletter_dashboard")).status_code == 403
        empty = superuser.get(reverse("admin:django_jobretry_deadletter_dashboard"))
        assert empty.status_code == 200
        assert "No jobs and no dead letters yet." in empty.text

    def test_linked_from_the_changelist(self, superuser: Operator) -> None:
        page = superuser.get(reverse(CHANGELIST)).text
        assert f'href="{reverse("admin:django_jobretry_deadletter_dashboard")}"' in page


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
