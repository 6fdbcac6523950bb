"""The admin through Django's test client: what an operator sees - lists, details, arguments.

Users are real staff accounts with exactly the permissions a test names;
every POST carries the CSRF token a browser would, taken from the page, and
the client enforces CSRF checks, so a missing token would fail like in
production. The client and the accounts are in tests/integration/conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from django_jobretry import FatalError
from django_jobretry import deadletters as service
from django_jobretry.admin import rendering
from django_jobretry.models import DeadLetter, Job, JobStatus
from tests.attempts import fail_attempt, kill
from tests.factories import DeadLetterFactory, JobFactory, error_history
from tests.integration.conftest import CHANGELIST, Operator, change_url, dead_url

pytestmark = pytest.mark.django_db


def redact(task_name: str, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The PAYLOAD_REDACTOR of these tests: hides e-mail addresses."""
    return [("[email]" if "@" in str(a) else a) for a in args], {
        k: ("[email]" if k == "email" else v) for k, v in kwargs.items()
    }


def broken_redactor(task_name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    raise RuntimeError("redactor bug")


class TestJobAdmin:
    def test_changelist_and_detail_render_with_history(self, superuser: Operator) -> None:
        job = JobFactory.create(errors=error_history(2, "exhausted"), attempts=2, requeue_count=1)
        job.requeue_history = [{"dead_letter_id": 7, "job_id": 3, "reason": "fatal", "by": "alice"}]
        job.save()
        listing = superuser.get(reverse("admin:django_jobretry_job_changelist"))
        assert listing.status_code == 200
        # The function name first, its module below (may wrap after dots), then the queue.
        assert "record</span>" in listing.text
        assert "tests.<wbr>jobs_app.<wbr>jobs" in listing.text
        assert "queue default" in listing.text
        assert "retrying</span> (attempt 3 of 3, next at " in listing.text
        assert "requeued once" in listing.text
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
        # The one action is Cancel (its own permission): no bulk delete.
        assert 'value="delete_selected"' not in listing
        assert 'value="cancel_selected"' in listing
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

    def test_the_list_says_how_it_died_in_five_columns(self, viewer: Operator) -> None:
        DeadLetterFactory.create(exhausted=True, requeue_count=2, queue_name="mail")
        cl = viewer.get(reverse(CHANGELIST)).context["cl"]
        assert tuple(cl.list_display) == ("id", "task", "reason_code", "died", "last_error_line")
        html = viewer.get(reverse(CHANGELIST)).text
        assert '<span class="jobretry-quiet">queue mail</span>' in html
        assert 'exhausted<span class="jobretry-quiet">3/3 attempts</span>' in html
        assert '<span class="jobretry-quiet">requeued 2 times</span>' in html
        error_class = '<span class="jobretry-error-class" title="builtins.ConnectionResetError">'
        assert f"{error_class}ConnectionResetError</span>: upstream reset for k" in html

    def test_the_heading_names_the_dead_letter_and_times_show_seconds(self, viewer: Operator) -> None:
        dead = DeadLetter.objects.get(pk=DeadLetterFactory.create(exhausted=True).pk)
        html = viewer.get(change_url(dead)).text
        assert f"<h1>Dead letter {dead.pk}</h1>" in html
        assert f"<h2>{dead.task_name} · job {dead.job_id} · Attempts exhausted</h2>" in html
        assert f" | Dead letter {dead.pk} | " in html.split("</title>")[0]  # the browser tab too
        shown = html.replace('</span> <span class="jobretry-time">', " ")
        for moment in (dead.dead_at, dead.enqueued_at):
            assert rendering.time_text(moment) in shown
        q2 = DeadLetterFactory.create(source="django_q2", job_id=0, external_id="abc")
        assert (
            f"<h2>{q2.task_name} · django-q2 task abc · Fatal error</h2>" in viewer.get(change_url(q2)).text
        )

    def test_the_page_leads_with_what_failed_and_the_rule_that_made_it_fatal(self, viewer: Operator) -> None:
        rule = "fatal_errors: shop.errors.PartnerRejected"
        errors = error_history(2, "fatal")
        errors[-1] = {**errors[-1], "error_class": "shop.errors.PartnerRejected", "rule": rule}
        dead = DeadLetterFactory.create(
            reason="fatal", attempts=2, errors=errors, last_error="order 7 rejected: bad VAT id"
        )
        html = viewer.get(change_url(dead)).text
        failure = html.index('class="module jobretry-failure"')
        # What failed comes before every fieldset, and the attempt history right after it.
        assert failure < html.index("jobretry-attempts-section") < html.index("<fieldset")
        lead = html[failure : html.index("jobretry-attempts-section")]
        assert f'<dd class="jobretry-task">{dead.task_name}' in lead
        assert f'Fatal error<span class="jobretry-rule">rule: {rule}</span>' in lead
        assert '<dd class="jobretry-attempts">2/3</dd>' in lead
        assert (
            '<code class="jobretry-error-class" title="shop.errors.PartnerRejected">PartnerRejected</code>'
            in lead
        )
        assert '<pre class="jobretry-message">order 7 rejected: bad VAT id</pre>' in lead
        assert 'class="jobretry-died"><span class="jobretry-date">' in lead
        # In the history, the rule is shown on the attempt it classified, and only there.
        assert html.count(f'<span class="jobretry-rule">rule: {rule}</span>') == 2
        # One id in the breadcrumb: the dead letter's, as in the heading.
        crumbs = html[html.index('<ol class="breadcrumbs">') : html.index("</ol>")]
        assert f'<li aria-current="page">Dead letter {dead.pk}</li>' in crumbs
        assert str(dead.job_id) not in crumbs

    def test_a_history_without_rules_shows_none(self, viewer: Operator) -> None:
        errors = error_history(1, "fatal")
        errors[0]["rule"] = ["not", "a", "string"]  # a hand-edited row: ignored, not a 500
        html = viewer.get(change_url(DeadLetterFactory.create(errors=errors))).text
        assert "jobretry-rule" not in html

    def test_a_real_dead_letter_shows_its_history_and_provenance(self, superuser: Operator) -> None:
        first = kill(key="again")
        service.requeue(first.pk, actor="alice")
        claimed = fail_attempt(FatalError("still bad"))
        second = DeadLetter.objects.get(job_id=claimed.id)
        html = superuser.get(change_url(second)).text
        assert "still bad" in html
        assert "django_jobretry.exceptions.FatalError" in html
        # The worker records which rule made the error fatal; the page leads with it.
        rule = second.errors[-1]["rule"]
        assert f'Fatal error<span class="jobretry-rule">rule: {rule}</span>' in html
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
