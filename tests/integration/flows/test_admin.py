"""The Flows admin on real flows: the list's counts and blocking link, a flow's graph, cancel, dead letters.

Flows are built with ``Workflow`` and driven by ``testing.run_jobs``: the
diamond A -> (B, C) -> D with B failing fatally blocks on B's dead letter,
D and the success callback waiting for it (tests/integration/flows/
test_failure_rules.py). The pages are read through an :class:`Operator`, a
logged-in browser with CSRF checks on.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_jobretry.flows import Workflow, admin_pages
from django_jobretry.flows.service import cancelled_by_discard
from django_jobretry.models import DeadLetter, Flow, FlowState, FlowStep, Job, JobStatus, StepState
from django_jobretry.testing import run_jobs
from tests.integration.conftest import Operator, dead_url, hidden_inputs, messages_of
from tests.jobs_app import flow_jobs

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:django_jobretry_flow_changelist")
#: The arguments of every step start so: none may show on a page.
ARGUMENT_MARK = "argument-mark-"


def change(flow: Flow) -> str:
    return reverse("admin:django_jobretry_flow_change", args=[flow.pk])


def cancel(flow: Flow) -> str:
    return reverse("admin:django_jobretry_flow_cancel", args=[flow.pk])


def diamond(name: str = "order-4007") -> Flow:
    flow = Workflow(name)
    a = flow.add(flow_jobs.step, f"{ARGUMENT_MARK}A", name="A")
    b = flow.add(flow_jobs.step_unless, f"{ARGUMENT_MARK}B", True, after=[a], name="B")
    c = flow.add(flow_jobs.step, f"{ARGUMENT_MARK}C", after=[a], name="C")
    flow.add(flow_jobs.step, f"{ARGUMENT_MARK}D", after=[b, c], name="D")
    flow.on_success(flow_jobs.step, f"{ARGUMENT_MARK}success")
    flow.on_complete(flow_jobs.step, f"{ARGUMENT_MARK}complete")
    flow.on_death(flow_jobs.step, f"{ARGUMENT_MARK}death")
    return flow.enqueue()


def blocked(name: str = "order-4007") -> tuple[Flow, DeadLetter]:
    """The diamond, run until B is a dead letter: 3 of its 7 steps done (A, C, the death callback)."""
    flow = diamond(name)
    run_jobs(include_scheduled=True)
    flow.refresh_from_db()
    assert flow.state == FlowState.BLOCKED
    return flow, DeadLetter.objects.get(flow_step__flow=flow, flow_step__name="B")


def chain(name: str, steps: int = 2) -> Flow:
    flow = Workflow(name)
    previous = None
    for n in range(steps):
        previous = flow.add(
            flow_jobs.step, f"{ARGUMENT_MARK}{n}", after=[previous] if previous else [], name=f"s{n}"
        )
    return flow.enqueue()


@pytest.fixture
def looker(make_user: Any) -> Operator:
    """May view flows, jobs and dead letters; may not cancel."""
    return Operator(make_user("view_flow", "view_job", "view_deadletter", name="looker"))


@pytest.fixture
def canceller(make_user: Any) -> Operator:
    return Operator(make_user("view_flow", "cancel_flow", "view_job", "view_deadletter", name="canceller"))


def rows_of(html: str) -> list[str]:
    """The list's rows as text, tags removed, blanks collapsed."""
    body = html.split('id="result_list"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)[1:]  # the header first
    return [" ".join(re.sub(r"<[^>]+>", " ", row).split()) for row in rows]


class TestTheList:
    def test_each_flow_with_its_steps_done_and_what_blocks_it_since_when(self, looker: Operator) -> None:
        flow, dead = blocked()
        done = chain("done-chain")
        run_jobs(include_scheduled=True)
        fresh = chain("fresh-chain", steps=3)
        response = looker.get(CHANGELIST)
        assert response.status_code == 200
        html = response.content.decode()
        rows = rows_of(html)
        assert [row[: row.index(" steps done")] for row in rows] == [
            f"fresh-chain flow {fresh.pk} Running 0 of 3",
            f"done-chain flow {done.pk} Completed 2 of 2",
            f"order-4007 flow {flow.pk} Blocked by a dead letter 3 of 7",
        ]
        assert f"steps done dead letter {dead.pk} since" in rows[2]
        link = reverse("admin:django_jobretry_deadletter_change", args=[dead.pk])
        assert f'<a href="{link}" class="jobretry-blocked-by">dead letter {dead.pk}</a>' in html
        assert re.search(r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d ?, \S+ ago", rows[2]), rows[2]
        assert html.count("jobretry-blocked-by") == 1
        assert ARGUMENT_MARK not in html

    def test_its_queries_do_not_grow_with_the_rows(self, looker: Operator) -> None:
        blocked("first")
        looker.get(CHANGELIST)  # the session and content types, once
        with CaptureQueriesContext(connection) as one:
            assert looker.get(CHANGELIST).status_code == 200
        for n in range(6):
            blocked(f"more-{n}")
        with CaptureQueriesContext(connection) as seven:
            response = looker.get(CHANGELIST)
        assert response.content.decode().count("3 of 7 steps done") == 7
        assert len(seven) == len(one) <= 6, [query["sql"] for query in seven.captured_queries]

    def test_filtered_by_state_and_searched_by_name_or_id(self, looker: Operator) -> None:
        flow, _ = blocked()
        other = chain("other")
        assert "order-4007" in looker.get(CHANGELIST, {"state__exact": "blocked"}).content.decode()
        assert "other" not in rows_of(looker.get(CHANGELIST, {"state__exact": "blocked"}).content.decode())[0]
        found = rows_of(looker.get(CHANGELIST, {"q": "othe"}).content.decode())
        assert len(found) == 1
        assert f"flow {other.pk}" in found[0]
        found = rows_of(looker.get(CHANGELIST, {"q": str(flow.pk)}).content.decode())
        assert any(f"flow {flow.pk}" in row for row in found)

    def test_nothing_is_added_or_changed_here(self, superuser: Operator) -> None:
        flow, _ = blocked()
        assert superuser.get(reverse("admin:django_jobretry_flow_add")).status_code == 403
        page = superuser.get(change(flow)).content.decode()
        assert 'name="_save"' not in page
        assert superuser.post(change(flow), {"name": "renamed"}).status_code == 403
        assert Flow.objects.get(pk=flow.pk).name == "order-4007"


class TestTheFlowPage:
    def test_the_steps_by_level_with_links_to_the_dead_letter_and_the_jobs(self, looker: Operator) -> None:
        flow, dead = blocked()
        response = looker.get(change(flow))
        assert response.status_code == 200
        html = response.content.decode()
        levels = dict(re.findall(r'data-step="([^"]+)" data-level="(\d+)"', html))
        assert levels == {"A": "1", "B": "2", "C": "2", "D": "3", "step": "4", "step-2": "4", "step-3": "4"}
        dead_link = reverse("admin:django_jobretry_deadletter_change", args=[dead.pk])
        assert html.count(f'<a href="{dead_link}">') == 2  # the box and the table's row
        waiting = Job.objects.get(flow_step__flow=flow, flow_step__name="D")
        assert waiting.status == JobStatus.WAITING
        job_link = reverse("admin:django_jobretry_job_change", args=[waiting.pk])
        assert f'<a href="{job_link}">job {waiting.pk}</a>' in html
        assert 'class="jobretry-step jobretry-step-dead"' in html
        assert html.count('class="jobretry-step jobretry-step-succeeded"') == 3
        # Seven boxes, and an edge per parent: A->B, A->C, B->D, C->D, four into each of two callbacks.
        assert html.count("<rect ") == 7
        assert html.count('class="jobretry-edge ') == 12
        assert ARGUMENT_MARK not in html
        assert "Cancel flow" not in html  # the looker may not cancel

    def test_a_user_who_may_not_view_dead_letters_gets_no_link(self, make_user: Any) -> None:
        flow, dead = blocked()
        html = Operator(make_user("view_flow")).get(change(flow)).content.decode()
        assert f"dead letter {dead.pk}" in html
        assert reverse("admin:django_jobretry_deadletter_change", args=[dead.pk]) not in html

    def test_a_flow_too_large_to_draw_is_listed(
        self, looker: Operator, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(admin_pages, "GRAPH_LIMIT", 2)
        monkeypatch.setattr(admin_pages, "STEPS_SHOWN", 2)
        flow = chain("long", steps=4)
        html = looker.get(change(flow)).content.decode()
        assert "jobretry-flow-graph" not in html
        assert "Too many steps to draw" in html
        assert "… and 2 more steps" in html


class TestCancel:
    def test_refused_without_the_permission(self, looker: Operator) -> None:
        flow, _ = blocked()
        assert looker.post(cancel(flow), {"post": "yes"}).status_code == 403
        response = looker.post(
            CHANGELIST, {"action": "cancel_selected", "_selected_action": [str(flow.pk)], "post": "yes"}
        )
        assert response.status_code == 200  # Django's list again: it offers no such action to this user
        assert 'value="cancel_selected"' not in looker.get(CHANGELIST).content.decode()
        assert Flow.objects.get(pk=flow.pk).state == FlowState.BLOCKED
        assert Job.objects.filter(flow_step__flow=flow, status=JobStatus.WAITING).count() == 3

    def test_post_only_and_offered_to_who_may(self, canceller: Operator) -> None:
        flow, _ = blocked()
        assert canceller.get(cancel(flow)).status_code == 405
        assert 'value="cancel_selected"' in canceller.get(CHANGELIST).content.decode()
        assert "Cancel flow…" in canceller.get(change(flow)).content.decode()

    def test_the_button_asks_with_the_counts_then_cancels(self, canceller: Operator) -> None:
        flow, dead = blocked()
        page = canceller.post(cancel(flow), {"cancel": "1"})
        assert page.status_code == 200
        html = page.content.decode()
        assert "Cancel 1 flow, cancelling 3 waiting or ready steps and stopping 0 running steps?" in html
        assert re.search(
            r"<td>order-4007 #\d+</td><td>Blocked by a dead letter</td>"
            r'<td class="num">3</td><td class="num">0</td><td class="num">0</td>',
            html,
        )
        assert Flow.objects.get(pk=flow.pk).state == FlowState.BLOCKED  # asking changes nothing
        response = canceller.post(cancel(flow), hidden_inputs(html), follow=True)
        assert messages_of(response) == [
            f"Cancelled: order-4007 #{flow.pk} (3 steps cancelled, 0 running asked to stop)."
        ]
        flow.refresh_from_db()
        assert (flow.state, flow.cancelled_by) == (FlowState.CANCELLED, "canceller")
        # The waiting steps' jobs are gone; the succeeded ones are kept, as any succeeded job.
        left = Job.objects.filter(flow_step__flow=flow).values_list("flow_step__name", "status")
        assert sorted(left) == [("A", "succeeded"), ("C", "succeeded"), ("step-3", "succeeded")]
        states = dict(FlowStep.objects.filter(flow=flow).values_list("name", "state"))
        assert [states[name] for name in ("D", "step", "step-2")] == [StepState.CANCELLED] * 3
        assert DeadLetter.objects.filter(pk=dead.pk).exists()  # left for an operator
        again = canceller.post(cancel(flow), {"post": "yes"}, follow=True)
        assert messages_of(again) == [f"Nothing to do, ended already: order-4007 #{flow.pk} (cancelled)."]

    def test_the_list_action_cancels_the_running_ones_and_names_the_ended(self, canceller: Operator) -> None:
        done = chain("done")
        run_jobs(include_scheduled=True)
        fresh = chain("fresh", steps=3)
        selected = {
            "action": "cancel_selected",
            "_selected_action": [str(fresh.pk), str(done.pk)],
            "index": "0",
        }
        page = canceller.post(CHANGELIST, selected)
        html = page.content.decode()
        assert "Cancel 1 flow, cancelling 3 waiting or ready steps" in html
        assert re.search(r'<td class="num">2</td><td class="num">1</td><td class="num">0</td>', html)
        response = canceller.post(CHANGELIST, hidden_inputs(html), follow=True)
        assert messages_of(response) == [
            f"Cancelled: fresh #{fresh.pk} (3 steps cancelled, 0 running asked to stop).",
            f"Nothing to do, ended already: done #{done.pk} (completed).",
        ]
        assert Flow.objects.get(pk=fresh.pk).state == FlowState.CANCELLED
        assert Flow.objects.get(pk=done.pk).state == FlowState.COMPLETED
        assert not Job.objects.filter(flow_step__flow=fresh).exists()
        assert Job.objects.filter(flow_step__flow=done).count() == 2


class TestTheDeadLetter:
    def test_its_page_names_the_flow_it_blocks(self, looker: Operator) -> None:
        flow, dead = blocked()
        html = looker.get(dead_url(dead, "change")).content.decode()
        assert f'blocks flow <a href="{change(flow)}">order-4007 #{flow.pk}</a>' in html
        assert "A requeue resumes the flow" in html

    def test_a_dead_letter_outside_flows_names_none(self, looker: Operator) -> None:
        _, dead = blocked()
        DeadLetter.objects.filter(pk=dead.pk).update(flow_step=None)
        FlowStep.objects.filter(dead_letter_id=dead.pk).update(dead_letter_id=None)
        assert "jobretry-flow-blocks" not in looker.get(dead_url(dead, "change")).content.decode()

    def test_the_discard_confirmation_lists_the_steps_it_cancels(self, superuser: Operator) -> None:
        _, dead = blocked()
        page = superuser.post(dead_url(dead, "discard"), {"discard": "1"})
        assert page.status_code == 200
        html = page.content.decode()
        assert cancelled_by_discard([dead.pk]) == {dead.pk: ["D", "step"]}
        assert f"<tr><td>{dead.pk}</td><td>D, step</td></tr>" in html

    def test_the_bulk_discard_lists_them_per_dead_letter(self, superuser: Operator) -> None:
        _, first = blocked("one")
        _, second = blocked("two")
        html = superuser.act("discard_selected", [first.pk, second.pk]).content.decode()
        assert f"<tr><td>{first.pk}</td><td>D, step</td></tr>" in html
        assert f"<tr><td>{second.pk}</td><td>D, step</td></tr>" in html

    def test_a_requeue_confirmation_lists_none(self, superuser: Operator) -> None:
        _, dead = blocked()
        html = superuser.act("requeue_selected", [dead.pk]).content.decode()
        assert "jobretry-flow-cancels" not in html


def test_the_jobs_list_filters_a_flows_waiting_steps(looker: Operator) -> None:
    diamond()
    url = reverse("admin:django_jobretry_job_changelist")
    html = looker.get(url, {"status": "waiting"}).content.decode()
    waiting = Job.objects.filter(status=JobStatus.WAITING)
    assert waiting.count() == 6
    assert all(f"/{job.pk}/change/" in html for job in waiting)
    ready = Job.objects.get(status=JobStatus.READY)
    assert f"/{ready.pk}/change/" not in html
