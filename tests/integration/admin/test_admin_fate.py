"""Old admin links lead to what a row became (issue 11), and the admin log reads right.

A dead letter's URL outlives the dead letter: a requeue deletes it and a new
job carries it on. Following the old link must lead to that job (or to the
dead letter it became when it died again), say "discarded" when the admin
log knows, and otherwise answer as Django does. Through Django's test client
as real staff accounts; rows are made the real way (enqueue, fail, requeue).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.db import connection
from django.urls import reverse

from django_jobretry import FatalError
from django_jobretry import deadletters as service
from django_jobretry.admin import audit
from django_jobretry.deadletters.external import Resubmitted
from django_jobretry.models import DeadLetter, Job
from tests.attempts import fail_attempt, kill
from tests.factories import DeadLetterFactory, JobFactory
from tests.integration.conftest import CHANGELIST, Operator, change_url, dead_url, messages_of

pytestmark = pytest.mark.django_db

DOES_NOT_EXIST = "exist. Perhaps it was deleted?"  # Django's message


def history_url(obj: Job | DeadLetter) -> str:
    return reverse(f"admin:django_jobretry_{obj._meta.model_name}_history", args=[obj.pk])


def requeue(dead: DeadLetter, actor: str = "alice") -> Job:
    """Requeue through the service, as `manage.py deadletters requeue` does (no admin log)."""
    job = service.requeue(dead.pk, actor=actor)
    assert isinstance(job, Job)
    return job


def follow(operator: Operator, url: str) -> tuple[str, list[str]]:
    """Where ``url`` finally leads, and the messages shown there."""
    response = operator.get(url, follow=True)
    assert response.status_code == 200
    return response.redirect_chain[-1][0], messages_of(response)


class TestARequeuedDeadLetter:
    def test_its_page_and_history_lead_to_the_job(self, superuser: Operator) -> None:
        dead = kill()
        job = requeue(dead, "alice")
        for url in (change_url(dead), history_url(dead)):
            assert follow(superuser, url) == (
                change_url(job),
                [f"Dead letter {dead.pk} was requeued: it is job {job.pk} now."],
            )

    def test_after_it_died_again_its_page_leads_to_the_new_dead_letter(self, superuser: Operator) -> None:
        first = kill(key="again")
        job = requeue(first, "alice")
        fail_attempt(FatalError("still bad"))
        second = DeadLetter.objects.get(job_id=job.pk)
        where, said = follow(superuser, change_url(first))
        assert where == change_url(second)
        assert said == [
            f"Dead letter {first.pk} was requeued and its job died again: it is dead letter {second.pk} now."
        ]
        # Requeued once more: both old dead letters lead to the one job that carries them.
        final = requeue(second, "bob")
        assert follow(superuser, change_url(first))[0] == change_url(final)
        assert follow(superuser, change_url(second))[0] == change_url(final)

    def test_without_the_right_to_see_jobs_the_message_still_says_where(self, make_user: Any) -> None:
        dead_only = Operator(make_user("view_deadletter", name="dead-only"))
        dead = kill()
        job = requeue(dead, "alice")
        assert follow(dead_only, change_url(dead)) == (
            reverse(CHANGELIST),
            [f"Dead letter {dead.pk} was requeued: it is job {job.pk} now."],
        )

    def test_whoever_may_not_view_dead_letters_learns_nothing(self, make_user: Any) -> None:
        jobs_only = Operator(make_user("view_job", name="jobs-only"))
        dead = kill()
        requeue(dead, "alice")
        assert jobs_only.get(change_url(dead)).status_code == 403
        where, said = follow(jobs_only, history_url(dead))  # Django asks only after looking the row up
        assert where == reverse("admin:index")
        assert len(said) == 1
        assert DOES_NOT_EXIST in said[0]

    def test_the_lookup_is_served_by_the_provenance_index(self) -> None:
        # Enough requeued rows, analysed, for the planner to weigh its choices as in production.
        def history(n: int) -> list[dict[str, int]]:
            return [{"dead_letter_id": n, "job_id": n}]

        for template in (JobFactory.build(requeue_count=1), DeadLetterFactory.build(requeue_count=1)):
            model = type(template)
            fields = {f.attname: getattr(template, f.attname) for f in model._meta.concrete_fields}
            rows: list[Any] = [model(**{**fields, "requeue_history": history(n)}) for n in range(1, 1001)]
            model.objects.bulk_create(rows)
        with connection.cursor() as cursor:
            for table, index in (
                ("job", "jobretry_job_provenance"),
                ("deadletter", "jobretry_dead_provenance"),
            ):
                cursor.execute(f"ANALYZE django_jobretry_{table}")
                cursor.execute(
                    f"EXPLAIN SELECT id FROM django_jobretry_{table} "
                    "WHERE requeue_count > 0 AND requeue_history @> %s::jsonb",
                    ['[{"dead_letter_id": 12}]'],
                )
                plan = " ".join(row[0] for row in cursor.fetchall())
                assert index in plan, plan


class TestWhatTheAdminLogKnows:
    def test_discarded_in_the_admin(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        superuser.post(dead_url(dead, "discard"), {"post": "yes"}, follow=True)
        where, [said] = follow(superuser, change_url(dead))
        assert where == reverse(CHANGELIST)
        assert said.startswith(f"Dead letter {dead.pk} was discarded by admin at ")

    def test_discarded_from_the_command_line_is_djangos_message(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        service.discard(dead.pk, actor="cron")  # no admin user: no LogEntry
        where, [said] = follow(superuser, change_url(dead))
        assert where == reverse("admin:index")
        assert DOES_NOT_EXIST in said

    def test_resubmitted_to_django_q2(self, superuser: Operator, admin_user: Any) -> None:
        dead = DeadLetterFactory.create(source="django_q2", job_id=0, external_id="abc")
        back = Resubmitted(
            pk="f00d", task_name=dead.task_name, queue_name="default", requeue_count=1, source="django_q2"
        )
        request = type("Request", (), {"user": admin_user})()
        audit.log(request, audit.requeued(dead, back))  # what the admin writes for such a requeue
        DeadLetter.objects.filter(pk=dead.pk).delete()
        where, [said] = follow(superuser, change_url(dead))
        assert where == reverse(CHANGELIST)
        assert said.startswith(f"Dead letter {dead.pk} was resubmitted to django-q2 by admin at ")
        assert said.endswith(" as its task f00d: django-q2 runs it, so it has no job here.")

    def test_requeued_as_a_job_since_pruned(self, superuser: Operator) -> None:
        dead = DeadLetterFactory.create()
        superuser.post(dead_url(dead, "requeue"), follow=True)
        job = Job.objects.get()
        Job.objects.filter(pk=job.pk).delete()  # it ran, succeeded, and prunejobs removed it
        where, [said] = follow(superuser, change_url(dead))
        assert where == reverse(CHANGELIST)
        assert said.startswith(f"Dead letter {dead.pk} was requeued as job {job.pk} by admin at ")
        assert said.endswith("; that job no longer exists (finished jobs are pruned).")


class TestAJobThatMoved:
    def test_a_dead_job_leads_to_its_dead_letter_then_to_its_requeue(self, superuser: Operator) -> None:
        dead = kill()
        assert follow(superuser, change_url_of_job(dead.job_id)) == (
            change_url(dead),
            [f"Job {dead.job_id} died: it is dead letter {dead.pk} now."],
        )
        job = requeue(dead, "alice")
        assert follow(superuser, change_url_of_job(dead.job_id)) == (
            change_url(job),
            [f"Job {dead.job_id} died and was requeued: it is job {job.pk} now."],
        )

    def test_a_job_nothing_knows_of_is_djangos_message(self, superuser: Operator) -> None:
        where, [said] = follow(superuser, change_url_of_job(987654))
        assert where == reverse("admin:index")
        assert DOES_NOT_EXIST in said


def change_url_of_job(pk: int) -> str:
    return reverse("admin:django_jobretry_job_change", args=[pk])


class TestTheAdminLog:
    def test_recent_actions_say_requeued_and_discarded(self, superuser: Operator) -> None:
        requeued, discarded = DeadLetterFactory.create(), DeadLetterFactory.create()
        superuser.post(dead_url(requeued, "requeue"))
        superuser.post(dead_url(discarded, "discard"), {"post": "yes"})
        job = Job.objects.get()
        entries = {(e.object_id, e.action_flag): e for e in LogEntry.objects.all()}
        assert entries[(str(requeued.pk), CHANGE)].object_repr == (
            f"Dead letter {requeued.pk} requeued as job {job.pk} ({requeued.task_name})"
        )
        assert entries[(str(discarded.pk), DELETION)].object_repr == (
            f"Dead letter {discarded.pk} discarded ({discarded.task_name})"
        )
        index = superuser.get(reverse("admin:index")).text
        # The requeue is a change (not a red deletion) linking to the old URL, which leads to the job.
        changed = (
            r'<li class="changelink">\s*<span class="visually-hidden">Changed:</span>\s*'
            rf'<a href="{re.escape(change_url(requeued))}">'
            rf"Dead letter {requeued.pk} requeued as job {job.pk} "
        )
        assert re.search(changed, index), index
        deleted = (
            r'<li class="deletelink">\s*<span class="visually-hidden">Deleted:</span>\s*'
            rf"Dead letter {discarded.pk} discarded"
        )
        assert re.search(deleted, index)
        assert f"Job {job.pk} requeued from dead letter {requeued.pk}" in index
