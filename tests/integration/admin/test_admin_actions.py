"""The admin through Django's test client: requeue and discard - actions, buttons, permissions, CSRF, log.

Users are real staff accounts with exactly the permissions a test names;
every POST carries the CSRF token a browser would, taken from the page, and
the client enforces CSRF checks, so a missing token would fail like in
production. The client and the accounts are in tests/integration/conftest.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.urls import reverse

from django_jobretry import deadletters as service
from django_jobretry.admin import confirmation
from django_jobretry.models import DeadLetter, Job
from tests.factories import DeadLetterFactory, JobFactory
from tests.integration.conftest import (
    CHANGELIST,
    Operator,
    change_url,
    dead_url,
    hidden_inputs,
    messages_of,
)

pytestmark = pytest.mark.django_db


class TestRequeueAction:
    def test_asks_for_confirmation_then_requeues_reports_and_logs(self, make_user: Any) -> None:
        user = make_user("view_deadletter", "requeue_deadletter")
        ops = Operator(user)
        dead = DeadLetterFactory.create_batch(2)
        page = ops.act("requeue_selected", [d.pk for d in dead])
        assert "Requeue 2 dead letters?" in page.text
        assert "the admin log records who requeued them." in page.text
        assert DeadLetter.objects.count() == 2  # nothing requeued yet
        response = ops.post(reverse(CHANGELIST), hidden_inputs(page.text), follow=True)
        assert messages_of(response) == ["2 dead letters requeued."]
        assert DeadLetter.objects.count() == 0
        jobs = list(Job.objects.order_by("id"))
        assert [j.requeue_history[-1]["by"] for j in jobs] == ["operator", "operator"]
        entries = LogEntry.objects.filter(user=user)
        # A requeue changes the dead letter into a job (not a red deletion) and adds the job.
        assert sorted((e.action_flag, e.object_id) for e in entries) == sorted(
            [(CHANGE, str(d.pk)) for d in dead] + [(ADDITION, str(j.pk)) for j in jobs]
        )
        assert {e.get_change_message() for e in entries if e.action_flag == CHANGE} == {
            f"Requeued as job {j.pk}." for j in jobs
        }

    def test_one_requeued_is_singular(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        response = superuser.act("requeue_selected", [dead.pk], post="yes")
        assert messages_of(response) == ["1 dead letter requeued."]

    def test_already_handled_between_render_and_action(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create_batch(3)
        page = superuser.act("requeue_selected", [d.pk for d in dead])  # the operator is asked about 3...
        service.discard(dead[0].pk, actor="colleague")  # ...a colleague discards one
        response = superuser.post(reverse(CHANGELIST), hidden_inputs(page.text), follow=True)
        assert messages_of(response) == ["2 dead letters requeued. 1 was already handled by someone else."]
        assert Job.objects.count() == 2

    def test_unique_key_conflict_is_reported(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create(unique_key="invoice-7")
        JobFactory.create(unique_key="invoice-7")
        response = superuser.act("requeue_selected", [dead.pk], post="yes")
        assert messages_of(response) == [
            f"0 dead letters requeued. 1 not requeued: dead letter {dead.pk}: "
            "a live job holds unique key 'invoice-7'."
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
        page = superuser.post(url, {**data, "select_across": "1"}, follow=True)
        assert "Requeue 2 dead letters?" in page.text
        response = superuser.post(url, hidden_inputs(page.text), follow=True)
        assert messages_of(response) == ["2 dead letters requeued."]
        assert list(DeadLetter.objects.all()) == [other]

    def test_too_large_a_selection_is_refused_whole(
        self, superuser: Operator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(confirmation, "BULK_LIMIT", 2)
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
        assert "the admin log records who discarded them." in page.text
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
        assert "not requeued: a live job holds unique key 'invoice-9'" in message

    def test_filters_survive_the_round_trip(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        url = dead_url(dead, "requeue") + "?_changelist_filters=reason%3Dfatal"
        assert superuser.post(url).url == reverse(CHANGELIST) + "?reason=fatal"
