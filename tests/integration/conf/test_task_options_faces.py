"""The options ``@job`` and JobRetryBackend's ``@task`` share are declared once, in conf/task_options.py.

Each face is probed from outside, through its real decorator, for every
field of ``TaskOptions``: an option added there shows on both faces, or a
test here fails. Django 6.1+ only (6.0's ``task()`` takes no such keyword).
"""

from __future__ import annotations

import django
import pytest

if django.VERSION < (6, 1):
    pytest.skip("@task(...) passes JobRetryBackend's options on from Django 6.1", allow_module_level=True)

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from django.tasks import task
from django.tasks.exceptions import InvalidTask

from django_jobretry.conf.task_options import TaskKeywords, TaskOptions
from django_jobretry.contrib.django_tasks.task_class import JobRetryTask
from django_jobretry.decorators import JobKeywords, job
from django_jobretry.exceptions import JobRetryError
from django_jobretry.limits import task_limits
from django_jobretry.registry import registry
from tests.declarations import forgotten_afterwards

#: The one declaration: every option both faces take, with its default.
DEFAULTS: dict[str, Any] = {option.name: option.default for option in fields(TaskOptions)}
#: A value each probed keyword takes: the defaults, Django's own queue (None for the rest).
VALUES: dict[str, Any] = {**DEFAULTS, "queue_name": "default"}
PATH = f"{__name__}.charge"


def charge(order_id: int) -> None:
    """The task function each test declares on a face, and forgets."""


#: Each face: its decorator, and how it refuses a keyword it does not take, naming it.
FACES: dict[str, tuple[Callable[..., Any], type[Exception], str]] = {
    "@job": (job, TypeError, "unexpected keyword argument {!r}"),
    "@task": (task, InvalidTask, "unknown option {!r}"),
}


def takes(face: str, name: str) -> bool:
    """Whether the face's decorator takes the keyword: declares ``charge`` with it, then forgets it."""
    decorator, refusal, says = FACES[face]
    options: dict[str, Any] = {name: VALUES.get(name)}
    try:
        with forgotten_afterwards():
            decorator(**options)(charge)
    except refusal as exc:
        if says.format(name) not in str(exc):
            raise
        return False
    return True


@pytest.mark.parametrize("name", list(DEFAULTS))
def test_both_faces_take_every_option_of_the_one_declaration(name: str) -> None:
    assert (takes("@job", name), takes("@task", name)) == (True, True)


@pytest.mark.parametrize(
    ("name", "taken"),
    [
        ("unique_key", (False, True)),  # @task's own: one key for every enqueue; @job's is per .using() call
        ("queue_name", (True, True)),  # Django's own keyword on @task, not a shared option
        ("schedule", (True, False)),
        ("timout", (False, False)),
    ],
)
def test_the_probes_tell_an_option_one_face_lacks(name: str, taken: tuple[bool, bool]) -> None:
    """The negative control: the probes above can answer no."""
    assert (takes("@job", name), takes("@task", name)) == taken


def test_the_typed_keywords_and_the_task_class_are_derived_from_the_declaration() -> None:
    assert list(TaskKeywords.__annotations__) == list(DEFAULTS), "@job's typed keywords are the fields"
    assert set(DEFAULTS) <= set(JobKeywords.__annotations__)
    assert issubclass(JobRetryTask, TaskOptions), "the task class inherits the fields"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "timeout 0 is invalid: "),
        ({"unique_args": ("order",)}, "unique_args ['order'] names 'order', which charge() does not take"),
        ({"unique_args": ("order_id",), "unique_for": "1h"}, "unique_for '1h' is invalid"),
        ({"unique_args": ("order_id",), "on_conflict": "ignore"}, "on_conflict 'ignore' is invalid"),
        ({"on_conflict": "raise"}, "unique_for and on_conflict apply to a keyed enqueue"),
        ({"concurrency": 0}, "concurrency=0 is invalid"),
        ({"concurrency": 1, "concurrency_key": "{tenant}"}, "concurrency_key '{tenant}' names 'tenant'"),
        ({"rate": "fast"}, "rate 'fast' is invalid"),
        ({"burst": 5}, "burst=5 needs a rate"),
    ],
)
def test_a_bad_option_gets_the_same_refusal_on_both_faces(options: dict[str, Any], message: str) -> None:
    """One check per option: the two messages differ only in the face that names the task."""
    with pytest.raises(JobRetryError) as on_job:
        job(**options)(charge)
    with pytest.raises(InvalidTask) as on_task:
        task(**options)(charge)
    assert str(on_job.value).removeprefix(f"@job {PATH}: ") == str(on_task.value).removeprefix(
        f"@task {PATH}: "
    )
    assert message in str(on_job.value)
    assert str(on_job.value).startswith(f"@job {PATH}: ")
    assert registry.get(PATH) is None
    assert PATH not in task_limits()
