"""Bulk requeue and discard in the admin (issue 11): confirmation with counts, and "all matching".

A bulk requeue asks first, like a discard, and says what it would do in
numbers. "Requeue / Discard all matching…" act on every dead letter the
filtered list holds (not one page), through the same confirmation, and only
on what matched when it was shown. Through Django's test client as real
staff accounts (tests/integration/conftest.py).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.urls import reverse

from django_jobretry import deadletters as service
from django_jobretry.admin import confirmation
from django_jobretry.models import DeadLetter, Job
from tests.factories import DeadLetterFactory, JobFactory
from tests.integration.conftest import CHANGELIST, Operator, hidden_inputs, messages_of

pytestmark = pytest.mark.django_db

OTHER_TASK = "tests.jobs_app.jobs.flaky"


def matching_url(verb: str, filters: str = "") -> str:
    """The "… all matching" link of the list filtered by ``filters`` (a query string)."""
    url = reverse(f"admin:django_jobretry_deadletter_{verb}_matching")
    return f"{url}?{urlencode({'_changelist_filters': filters})}"


def confirm(operator: Operator, page: Any, url: str | None = None) -> Any:
    """Press "Yes" on a confirmation page: post its hidden fields where its form posts."""
    assert page.status_code == 200, page
    return operator.post(url or reverse(CHANGELIST), hidden_inputs(page.text), follow=True)


@pytest.fixture
def requeuer(make_user: Any) -> Operator:
    return Operator(make_user("view_deadletter", "requeue_deadletter", name="requeuer"))


class TestRequeueConfirmation:
    def test_counts_what_would_happen(self, superuser: Operator) -> None:
        plain = DeadLetterFactory.create_batch(2)
        held = DeadLetterFactory.create(unique_key="invoice-7")
        JobFactory.create(unique_key="invoice-7")  # a live job holds the key: that requeue will be refused
        other = DeadLetterFactory.create(task_name=OTHER_TASK)
        q2 = DeadLetterFactory.create(source="django_q2", job_id=0, external_id="abc")
        ids = [dead.pk for dead in (*plain, held, other, q2)]
        page = superuser.act("requeue_selected", ids)
        counts = page.context["counts"]
        assert (counts.total, counts.new_jobs, counts.conflicts) == (5, 3, 1)
        assert counts.elsewhere == [("django-q2", 1)]
        assert counts.by_task == [(plain[0].task_name, 4), (OTHER_TASK, 1)]
        text = " ".join(page.text.split())
        assert "Requeue 5 dead letters? Each becomes a new ready job" in text
        assert "<strong>3</strong> become new ready jobs" in text
        assert "<strong>1</strong> goes back to django-q2, which runs it" in text
        assert "<strong>1</strong> will not be requeued: another job holds the same unique key" in text
        assert 'value="Yes, requeue them"' in text
        assert DeadLetter.objects.count() == 5  # nothing happened yet

    def test_two_with_one_key_count_one_conflict(self, superuser: Operator) -> None:
        twins = DeadLetterFactory.create_batch(2, unique_key="invoice-8")
        page = superuser.act("requeue_selected", [dead.pk for dead in twins])
        assert (page.context["counts"].new_jobs, page.context["counts"].conflicts) == (1, 1)

    def test_no_takes_you_back_to_the_filtered_list(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create(queue_name="mail")
        url = reverse(CHANGELIST) + "?queue_name=mail"
        data = {"action": "requeue_selected", "_selected_action": [str(dead.pk)], "index": "0"}
        page = superuser.post(url, data)
        assert f'href="{reverse(CHANGELIST)}?queue_name=mail" class="button cancel-link"' in page.text

    def test_one_is_singular(self, superuser: Operator) -> None:
        page = superuser.act("requeue_selected", [DeadLetterFactory.create().pk])
        assert "Requeue 1 dead letter? It becomes a new ready job" in page.text
        assert 'value="Yes, requeue it"' in page.text


class TestAllMatching:
    def test_the_list_links_to_them_with_its_filters(self, superuser: Operator, requeuer: Operator) -> None:
        listing = superuser.get(reverse(CHANGELIST), {"queue_name": "mail", "p": "2", "o": "1"}).text
        for verb in ("requeue", "discard"):
            # The page and sort order are not filters: they stay behind.
            assert f'href="{matching_url(verb, "queue_name=mail")}"'.replace("&", "&amp;") in listing
        mine = requeuer.get(reverse(CHANGELIST)).text
        assert "Requeue all matching…" in mine
        assert "Discard all matching…" not in mine

    def test_requeue_all_matching(self, make_user: Any) -> None:
        user = make_user("view_deadletter", "requeue_deadletter")
        ops = Operator(user)
        mail = DeadLetterFactory.create_batch(3, queue_name="mail")
        billing = DeadLetterFactory.create(queue_name="billing")
        url = matching_url("requeue", "queue_name=mail")
        page = ops.get(url)
        assert "Every dead letter matching this list: <code>queue_name=mail</code>." in page.text
        assert "Requeue 3 dead letters?" in page.text
        assert DeadLetter.objects.count() == 4
        response = confirm(ops, page, url)
        assert response.redirect_chain[-1][0] == reverse(CHANGELIST) + "?queue_name=mail"
        assert messages_of(response) == ["3 dead letters requeued."]
        assert list(DeadLetter.objects.all()) == [billing]
        assert Job.objects.count() == 3
        logged = LogEntry.objects.filter(user=user, action_flag=CHANGE)
        assert sorted(entry.object_id or "" for entry in logged) == sorted(str(dead.pk) for dead in mail)

    def test_discard_all_matching_a_search(self, superuser: Operator) -> None:
        DeadLetterFactory.create_batch(2, last_error="smtp refused")
        kept = DeadLetterFactory.create(last_error="timeout")
        url = matching_url("discard", "q=smtp")
        page = superuser.get(url)
        assert "Discard 2 dead letters?" in page.text
        assert messages_of(confirm(superuser, page, url)) == ["2 dead letters discarded."]
        assert list(DeadLetter.objects.all()) == [kept]

    def test_no_filter_means_every_dead_letter(self, superuser: Operator) -> None:
        DeadLetterFactory.create_batch(2)
        page = superuser.get(matching_url("requeue"))
        assert "Every dead letter matching this list (no filter)." in page.text
        assert "Requeue 2 dead letters?" in page.text

    def test_acts_only_on_what_matched_when_shown(self, superuser: Operator) -> None:
        shown = DeadLetterFactory.create_batch(3, queue_name="mail")
        url = matching_url("requeue", "queue_name=mail")
        page = superuser.get(url)
        service.discard(shown[0].pk, actor="colleague")  # handled meanwhile...
        late = DeadLetterFactory.create(queue_name="mail")  # ...and one died after the page was drawn
        response = confirm(superuser, page, url)
        assert messages_of(response) == ["2 dead letters requeued. 1 was already handled by someone else."]
        assert list(DeadLetter.objects.all()) == [late]

    def test_nothing_left(self, superuser: Operator) -> None:
        page = superuser.get(matching_url("discard", "queue_name=nowhere"))
        assert "Nothing left to discard: no dead letter matches this list any more." in page.text
        assert 'type="submit"' not in page.text.split('id="content-main"')[1]

    def test_too_many_for_one_request_names_the_command(
        self, superuser: Operator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(confirmation, "BULK_LIMIT", 2)
        DeadLetterFactory.create_batch(3, queue_name="mail", reason="exhausted", attempts=3)
        url = matching_url("requeue", "queue_name=mail&reason=exhausted")
        page = superuser.get(url)
        text = " ".join(page.text.split())
        assert "More than 2 dead letters match this list: too many for one admin request" in text
        assert "`manage.py deadletters requeue --all --queue mail --reason exhausted`" in text
        assert 'type="submit"' not in page.text.split('id="content-main"')[1]
        # A forged "yes" is refused all the same.
        forged = {"post": "yes", "jobretry_upto": "999999", "jobretry_count": "3"}
        response = superuser.post(url, forged, follow=True)
        [message] = messages_of(response)
        assert message.startswith("More than 2 dead letters selected: nothing was done.")
        assert DeadLetter.objects.count() == 3

    def test_a_search_the_command_cannot_take_gets_the_general_hint(
        self, superuser: Operator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(confirmation, "BULK_LIMIT", 1)
        DeadLetterFactory.create_batch(2, last_error="smtp refused")
        text = " ".join(superuser.get(matching_url("discard", "q=smtp")).text.split())
        assert (
            "`manage.py deadletters discard --all --queue/--task/--reason/--error-class/--older-than …`"
            in text
        )

    @pytest.mark.parametrize(
        "form",
        [
            {"post": "yes"},
            {"post": "yes", "jobretry_upto": "²", "jobretry_count": "1"},
            {"post": "yes", "jobretry_upto": "1", "jobretry_count": "-1"},
            {"jobretry_upto": "1", "jobretry_count": "1"},
        ],
    )
    def test_an_altered_confirmation_does_nothing(self, superuser: Operator, form: dict[str, str]) -> None:
        dead = DeadLetterFactory.create()
        response = superuser.post(matching_url("requeue"), form, follow=True)
        assert messages_of(response) == [
            "This confirmation form is incomplete or was altered: nothing was done."
        ]
        assert DeadLetter.objects.filter(pk=dead.pk).exists()


class TestAllMatchingIsGuarded:
    def test_each_verb_needs_its_permission(self, viewer: Operator, requeuer: Operator) -> None:
        dead = DeadLetterFactory.create()
        yes = {"post": "yes", "jobretry_upto": str(dead.pk), "jobretry_count": "1"}
        for verb in ("requeue", "discard"):
            assert viewer.get(matching_url(verb)).status_code == 403
            assert viewer.post(matching_url(verb), yes).status_code == 403
        assert requeuer.get(matching_url("discard")).status_code == 403
        assert requeuer.post(matching_url("discard"), yes).status_code == 403
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_the_post_needs_the_csrf_token(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        yes = {"post": "yes", "jobretry_upto": str(dead.pk), "jobretry_count": "1"}
        assert superuser.post(matching_url("discard"), yes, token=False).status_code == 403
        assert DeadLetter.objects.filter(pk=dead.pk).exists()

    def test_a_lookup_the_list_cannot_run_is_answered_like_the_list(self, superuser: Operator) -> None:
        response = superuser.get(matching_url("requeue", "dead_at__year=9999"))
        assert response.status_code == 302
        assert response["Location"] == reverse(CHANGELIST) + "?e=1"
