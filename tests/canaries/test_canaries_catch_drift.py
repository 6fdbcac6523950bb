"""Negative controls: a canary fails, naming the adapter code to revisit, when its internal changes.

Each control changes one upstream internal in-process (monkeypatch, undone
after the test) the way a new release might, and runs the canary.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.canaries.canary import Canary, CanaryFailed
from tests.canaries.test_django_q2_internals import CANARIES as Q2


def by_internal(canaries: list[Canary], internal: str) -> Canary:
    return next(canary for canary in canaries if canary.internal.startswith(internal))


def test_a_signed_package_that_no_longer_round_trips_fails_its_canary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django_q.signing import SignedPackage

    monkeypatch.setattr(SignedPackage, "loads", staticmethod(lambda text: {"changed": True}))
    with pytest.raises(CanaryFailed, match=r"Revisit django_jobretry/contrib/django_q2/monitor\.py"):
        by_internal(Q2, "django_q.signing.SignedPackage").run()


def test_a_removed_error_reporter_fails_its_canary(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q import worker

    monkeypatch.delattr(worker, "error_reporter")
    with pytest.raises(CanaryFailed, match=r"django_q\.worker\.error_reporter is gone.*hooks\.py"):
        by_internal(Q2, "django_q.worker.error_reporter").run()


def test_a_renamed_queue_column_fails_its_canary(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.models import OrmQ

    fields = [field for field in OrmQ._meta.get_fields() if field.name != "lock"]
    monkeypatch.setattr(OrmQ._meta, "get_fields", lambda: fields)
    with pytest.raises(
        CanaryFailed, match=r"OrmQ has .*Revisit django_jobretry/contrib/django_q2/monitor\.py"
    ):
        by_internal(Q2, "django_q.models.OrmQ").run()


def test_a_task_result_without_a_field_we_pass_fails_its_canary(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("django.tasks")
    import dataclasses

    from tests.canaries import test_django_tasks_internals as tasks

    real = dataclasses.fields
    monkeypatch.setattr(
        dataclasses,
        "fields",
        lambda cls: tuple(f for f in real(cls) if f.name != "worker_ids"),
    )
    with pytest.raises(CanaryFailed, match=r"TaskResult lacks \['worker_ids'\].*results\.py"):
        by_internal(tasks.CANARIES, "django.tasks.base.TaskResult fields").run()


def test_a_reworded_queue_refusal_fails_its_canary(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("django.tasks")
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.exceptions import InvalidTask

    from tests.canaries import test_django_tasks_internals as tasks

    original = BaseTaskBackend.validate_task

    def reworded(self: BaseTaskBackend, task: Any) -> None:
        if task.queue_name not in self.queues:
            raise InvalidTask("Unknown queue.")
        original(self, task)

    monkeypatch.setattr(BaseTaskBackend, "validate_task", reworded)
    with pytest.raises(CanaryFailed, match=r"says 'Unknown queue\.'.*backend\.py \(UndeclaredQueue\)"):
        by_internal(tasks.CANARIES, "BaseTaskBackend.validate_task's").run()
