"""Repair before requeue (issue 22): new arguments, validated as enqueue validates them, and a diff.

The dead letter died of a bad argument (``failures=5`` for a task that
fails that many times). The operator repairs it to ``failures=0``: the new
job has the new arguments, its requeue entry records who changed what,
and a refused repair changes nothing at all.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from django_jobretry.deadletters import repair
from django_jobretry.exceptions import InvalidArguments, InvalidJob, NotDead, RequeueConflict
from django_jobretry.models import DeadLetter, Job
from tests.factories import DeadLetterFactory, JobFactory
from tests.integration.conftest import Operator, cli_run, hidden_inputs, messages_of

pytestmark = pytest.mark.django_db

TASK = "tests.jobs_app.jobs.flaky"
REDACTOR = "tests.integration.admin.test_admin_security.redact"


@pytest.fixture
def dead() -> DeadLetter:
    return DeadLetterFactory.create(task_name=TASK, args=["order-7"], kwargs={"failures": 5})


def seen(dead: DeadLetter) -> str:
    return repair.digest(dead.args, dead.kwargs)


def unchanged(dead: DeadLetter) -> None:
    dead.refresh_from_db()
    assert (dead.args, dead.kwargs) == (["order-7"], {"failures": 5})
    assert not Job.objects.filter(task_name=TASK).exists()


# --- the service ------------------------------------------------------------------------------------


def test_a_repair_requeues_with_the_new_arguments_and_records_the_diff(dead: DeadLetter) -> None:
    repaired = repair.repair(
        dead.pk, args=["order-7"], kwargs={"failures": 0}, seen=seen(dead), actor="alice"
    )
    job = Job.objects.get(pk=repaired.job.pk)
    assert (job.args, job.kwargs, job.status, job.attempts) == (["order-7"], {"failures": 0}, "ready", 0)
    entry = job.requeue_history[-1]
    assert entry["dead_letter_id"] == dead.pk
    assert entry["by"] == "alice"
    assert entry["repair"] == {
        "by": "alice",
        "changes": [{"path": "kwargs['failures']", "change": "changed", "old": 5, "new": 0}],
    }
    assert not DeadLetter.objects.filter(pk=dead.pk).exists()


def test_changes_name_each_changed_added_and_removed_argument() -> None:
    found = repair.changes(["a", 1], {"x": 1, "y": 2}, ["a"], {"x": 3, "z": 4})
    assert found == [
        {"path": "args[1]", "change": "removed", "old": 1},
        {"path": "kwargs['x']", "change": "changed", "old": 1, "new": 3},
        {"path": "kwargs['y']", "change": "removed", "old": 2},
        {"path": "kwargs['z']", "change": "added", "new": 4},
    ]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "said"),
    [
        (["order-7"], {"failures": 0, "nope": 1}, InvalidArguments, "unexpected keyword argument 'nope'"),
        (["order-7"], {"failures": float("nan")}, InvalidJob, "failures"),
        ("order-7", {"failures": 0}, InvalidJob, "args must be a JSON array"),
        (["order-7"], {"failures": 5}, InvalidJob, "unchanged: requeue it instead"),
    ],
)
def test_a_repair_enqueue_would_refuse_changes_nothing(
    dead: DeadLetter, args: Any, kwargs: Any, error: type[Exception], said: str
) -> None:
    with pytest.raises(error, match=said):
        repair.repair(dead.pk, args=args, kwargs=kwargs, seen=seen(dead), actor="alice")
    unchanged(dead)


def test_an_oversized_payload_is_refused_as_at_enqueue(dead: DeadLetter, settings: Any) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "MAX_ARGS_BYTES": 1024}
    with pytest.raises(InvalidJob, match="the limit is 1024"):
        repair.repair(dead.pk, args=["x" * 2000], kwargs={"failures": 0}, seen=seen(dead), actor="alice")
    unchanged(dead)


def test_arguments_changed_since_they_were_shown_are_a_conflict(dead: DeadLetter) -> None:
    stale = repair.digest(["order-7"], {"failures": 4})
    with pytest.raises(repair.RepairConflict, match="changed since they were shown"):
        repair.repair(dead.pk, args=["order-7"], kwargs={"failures": 0}, seen=stale, actor="alice")
    unchanged(dead)


def test_a_dead_letter_someone_handled_is_not_dead(dead: DeadLetter) -> None:
    digest = seen(dead)
    dead.delete()
    with pytest.raises(NotDead):
        repair.repair(dead.pk, args=["order-7"], kwargs={"failures": 0}, seen=digest, actor="alice")


def test_a_unique_key_conflict_rolls_the_repair_back() -> None:
    dead = DeadLetterFactory.create(
        task_name=TASK, args=["order-7"], kwargs={"failures": 5}, unique_key="o-7"
    )
    JobFactory.create(unique_key="o-7")
    with pytest.raises(RequeueConflict):
        repair.repair(dead.pk, args=["order-7"], kwargs={"failures": 0}, seen=seen(dead), actor="alice")
    dead.refresh_from_db()
    assert dead.kwargs == {"failures": 5}


# --- the admin --------------------------------------------------------------------------------------


def repair_url(dead: DeadLetter) -> str:
    return reverse("admin:django_jobretry_deadletter_repair", args=[dead.pk])


@pytest.fixture
def repairer(make_user: Any) -> Operator:
    return Operator(
        make_user(
            "view_job",
            "view_deadletter",
            "view_job_payload",
            "requeue_deadletter",
            "repair_deadletter",
            name="repairer",
        )
    )


def test_edit_review_confirm_requeues_the_repaired_job_and_logs_it(
    repairer: Operator, dead: DeadLetter
) -> None:
    detail = repairer.get(reverse("admin:django_jobretry_deadletter_change", args=[dead.pk]))
    assert repair_url(dead).encode() in detail.content
    form = repairer.get(repair_url(dead))
    assert form.status_code == 200
    assert json.loads(form.context["kwargs_text"]) == {"failures": 5}
    fields = {
        **hidden_inputs(form.text),
        "args": '["order-7"]',
        "kwargs": '{"failures": 0}',
        "step": "review",
    }
    review = repairer.post(repair_url(dead), fields)
    assert review.status_code == 200
    assert review.context["review"] == [
        {"path": "kwargs['failures']", "change": "changed", "old": "5", "new": "0"}
    ]
    unchanged(dead)  # a review changes nothing
    done = repairer.post(repair_url(dead), {**hidden_inputs(review.text), "step": "confirm"}, follow=True)
    job = Job.objects.get(task_name=TASK)
    assert done.redirect_chain[-1][0] == reverse("admin:django_jobretry_job_change", args=[job.pk])
    assert f"Dead letter {dead.pk} repaired (1 change) and requeued as job {job.pk}." in messages_of(done)
    assert job.kwargs == {"failures": 0}
    assert done.context["repairs"] == {
        "rows": [
            {
                "requeue": 1,
                "by": "repairer",
                "path": "kwargs['failures']",
                "change": "changed",
                "old": "5",
                "new": "0",
            }
        ]
    }
    said = set(LogEntry.objects.values_list("change_message", flat=True))
    assert {f"Requeued as job {job.pk}.", "Arguments repaired before requeue: 1 changes."} <= said


@pytest.mark.parametrize(
    ("args", "kwargs", "said"),
    [
        ('["order-7"', '{"failures": 0}', "args is not valid JSON"),
        ('["order-7"]', '{"failures": 0, "nope": 1}', "unexpected keyword argument"),
        ('["order-7"]', "[]", "kwargs must be a JSON object"),
        ("[" * 100_000 + "]" * 100_000, '{"failures": 0}', "args is nested too deeply to be read"),
        ('["order-7"]', '{"failures": ' + "[" * 5000 + "]" * 5000 + "}", "kwargs is nested too deeply"),
        ('["order-7", ' + "[" * 900 + "]" * 900 + "]", "{}", "nested deeper than 32 levels"),
        ('["order-\\u0000"]', '{"failures": 0}', "contains a NUL character"),
        ('["order-\\ud800"]', '{"failures": 0}', "contains a lone surrogate"),
        ('["order-7"]', '{"failures": NaN}', "JSON has no NaN or infinity"),
        ('["order-7"]', '{"failures": 1e400}', "JSON has no NaN or infinity"),
    ],
)
def test_invalid_arguments_are_shown_on_the_form_and_nothing_changes(
    repairer: Operator, dead: DeadLetter, args: str, kwargs: str, said: str
) -> None:
    form = repairer.get(repair_url(dead))
    for step in ("review", "confirm"):
        response = repairer.post(
            repair_url(dead), {**hidden_inputs(form.text), "args": args, "kwargs": kwargs, "step": step}
        )
        assert response.status_code == 400
        assert said in response.context["error"]
    unchanged(dead)


def test_an_oversized_payload_is_shown_on_the_form(
    repairer: Operator, dead: DeadLetter, settings: Any
) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "MAX_ARGS_BYTES": 1024}
    form = repairer.get(repair_url(dead))
    big = json.dumps(["x" * 2000])
    response = repairer.post(
        repair_url(dead), {**hidden_inputs(form.text), "args": big, "kwargs": "{}", "step": "confirm"}
    )
    assert response.status_code == 400
    assert "the limit is 1024" in response.context["error"]
    unchanged(dead)


@pytest.mark.parametrize(
    "codenames",
    [
        ("view_deadletter", "view_job_payload", "requeue_deadletter"),  # no repair permission
        ("view_deadletter", "requeue_deadletter", "repair_deadletter"),  # no payload permission
        ("view_deadletter", "view_job_payload", "repair_deadletter"),  # no requeue permission
    ],
)
def test_without_every_permission_there_is_no_edit_by_form_or_url(
    make_user: Any, dead: DeadLetter, codenames: tuple[str, ...]
) -> None:
    operator = Operator(make_user(*codenames, name="partial"))
    detail = operator.get(reverse("admin:django_jobretry_deadletter_change", args=[dead.pk]))
    assert detail.status_code == 200
    assert repair_url(dead).encode() not in detail.content
    assert operator.get(repair_url(dead)).status_code == 403
    fields = {"args": '["order-7"]', "kwargs": '{"failures": 0}', "seen": seen(dead), "step": "confirm"}
    assert operator.post(repair_url(dead), fields).status_code == 403
    unchanged(dead)


def test_with_a_payload_redactor_nobody_repairs(superuser: Operator, dead: DeadLetter, settings: Any) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": REDACTOR}
    assert superuser.get(repair_url(dead)).status_code == 403


def test_the_diff_is_as_private_as_the_arguments(
    repairer: Operator, viewer: Operator, dead: DeadLetter
) -> None:
    job = repair.repair(dead.pk, args=["order-7"], kwargs={"failures": 0}, seen=seen(dead), actor="alice").job
    url = reverse("admin:django_jobretry_job_change", args=[job.pk])
    assert repairer.get(url).context["repairs"]["rows"][0]["old"] == "5"
    hidden = viewer.get(url)
    assert hidden.context["repairs"] == {"hidden": 1}
    assert "arguments repaired (1 change)" in hidden.text
    assert "what changed is shown to users who may read arguments" in hidden.text


def test_deadletters_show_prints_the_repair_and_hides_its_values_behind_a_redactor(
    dead: DeadLetter, settings: Any
) -> None:
    job = repair.repair(dead.pk, args=["order-7"], kwargs={"failures": 0}, seen=seen(dead), actor="alice").job
    Job.objects.filter(pk=job.pk).delete()
    again = DeadLetterFactory.create(task_name=TASK, requeue_count=1, requeue_history=job.requeue_history)
    out, _ = cli_run("show", str(again.pk))
    assert "arguments repaired by alice: 1 change(s)" in out
    assert "kwargs['failures'] changed: 5 -> 0" in out
    settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": REDACTOR}
    out, _ = cli_run("show", str(again.pk))
    assert "kwargs['failures'] changed" in out
    assert "5 -> 0" not in out
    shown = json.loads(cli_run("show", str(again.pk), "--json")[0])
    (change,) = shown["dead_letters"][0]["requeue_history"][-1]["repair"]["changes"]
    assert change == {"path": "kwargs['failures']", "change": "changed"}
