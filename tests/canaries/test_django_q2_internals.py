"""Canaries on the django-q2 internals the adapter relies on (django_jobretry/contrib/django_q2/).

One check per internal: the attribute, signature or behaviour, why the
adapter needs it, and which adapter file to revisit when it fails.
"""

from __future__ import annotations

import inspect
import re

import pytest

from tests.canaries.canary import Canary, require

Q2 = "django_jobretry/contrib/django_q2/"


def signed_package_round_trips() -> None:
    from django_q.signing import SignedPackage

    package = {"id": "abc", "func": "shop.tasks.sync", "args": (1,), "kwargs": {"a": 2}, "cluster": None}
    require(SignedPackage.loads(SignedPackage.dumps(package)) == package, "dumps/loads lose the package")


def conf_settings_exist() -> None:
    from django_q.conf import Conf

    missing = [name for name in ("ORM", "CACHED", "CLUSTER_NAME", "ACK_FAILURES") if not hasattr(Conf, name)]
    require(not missing, f"Conf has no {missing}")


def signals_are_sent_with_what_the_hooks_read() -> None:
    from django.dispatch import Signal
    from django_q import monitor, signals, worker

    for name in ("pre_execute", "post_execute", "post_execute_in_worker", "post_spawn"):
        require(isinstance(getattr(signals, name, None), Signal), f"django_q.signals.{name} is not a Signal")
    sent = {
        "pre_execute": (worker, ("func", "task")),
        "post_execute_in_worker": (worker, ("func", "task")),
        "post_execute": (monitor, ("task",)),
        "post_spawn": (worker, ("proc_name",)),
    }
    for name, (module, keywords) in sent.items():
        calls = re.findall(rf"\b{name}\.send\(([^)]*)\)", inspect.getsource(module))
        require(bool(calls), f"{module.__name__} no longer sends {name}")
        for call in calls:
            for keyword in keywords:
                require(re.search(rf"\b{keyword}=", call) is not None, f"{name} is sent without {keyword}=")


def worker_has_an_error_reporter() -> None:
    from django_q import worker

    require(hasattr(worker, "error_reporter"), "django_q.worker.error_reporter is gone")


def brokers_enqueue_and_name_their_list() -> None:
    from django_q.brokers import Broker, get_broker

    for name in ("enqueue", "dequeue", "get_connection"):
        require(callable(getattr(Broker, name, None)), f"Broker.{name} is gone")
    init = inspect.getsource(Broker.__init__)
    require("list_key" in inspect.signature(Broker.__init__).parameters, "Broker(list_key=...) is gone")
    require(
        "self.list_key" in init and "self.connection" in init, "a broker no longer keeps list_key, connection"
    )
    require("list_key" in inspect.signature(get_broker).parameters, "get_broker(list_key) is gone")


def orm_queue_rows_have_key_payload_and_lock() -> None:
    from django_q.models import OrmQ

    fields = {field.name for field in OrmQ._meta.get_fields()}
    require({"key", "payload", "lock"} <= fields, f"OrmQ has {sorted(fields)}")


def failures_have_the_imported_fields() -> None:
    from django_q.models import Failure, Task

    require(issubclass(Failure, Task) and Failure._meta.proxy, "Failure is no longer a proxy of Task")
    fields = {field.name for field in Task._meta.get_fields()}
    used = {
        "id",
        "name",
        "func",
        "hook",
        "args",
        "kwargs",
        "result",
        "group",
        "cluster",
        "started",
        "stopped",
    }
    used |= {"success", "attempt_count"}
    require(used <= fields, f"Task lacks {sorted(used - fields)}")


def humanhash_uuid_returns_name_and_hex() -> None:
    from django_q.humanhash import uuid

    name, hexed = uuid()
    require(isinstance(name, str) and re.fullmatch(r"[0-9a-f]{32}", hexed) is not None, "uuid() changed")


def func_repr_names_a_function() -> None:
    from django_q.utils import get_func_repr

    require(get_func_repr("shop.tasks.sync") == "shop.tasks.sync", "get_func_repr(str) changed")
    require(
        get_func_repr(signed_package_round_trips).endswith(".signed_package_round_trips"), "get_func_repr(f)"
    )


def admin_resubmit_and_fail_admin() -> None:
    from django.contrib import admin
    from django_q.admin import FailAdmin, resubmit_task

    require(issubclass(FailAdmin, admin.ModelAdmin), "FailAdmin is not a ModelAdmin")
    parameters = list(inspect.signature(resubmit_task).parameters)
    require(parameters[:3] == ["model_admin", "request", "queryset"], f"resubmit_task{parameters}")


def timeout_exception_exists() -> None:
    from django_q.exceptions import TimeoutException

    require(issubclass(TimeoutException, BaseException), "TimeoutException is not an exception")


CANARIES = [
    Canary(
        "django-q2",
        "django_q.signing.SignedPackage.dumps/loads",
        "read and rewrite queued and failed task packages (retry, redelivery, resubmit, claims)",
        f"{Q2}monitor.py, redelivery.py, claims.py",
        signed_package_round_trips,
    ),
    Canary(
        "django-q2",
        "django_q.conf.Conf.ORM/CACHED/CLUSTER_NAME/ACK_FAILURES",
        "find the ORM broker's database and refuse settings the adapter cannot honour",
        f"{Q2}apps.py, monitor.py, claims.py",
        conf_settings_exist,
    ),
    Canary(
        "django-q2",
        "django_q.signals pre_execute/post_execute/post_execute_in_worker/post_spawn",
        "classify each attempt, keep claims of running tasks and recover a killed worker's",
        f"{Q2}apps.py, hooks.py, claims.py, monitor.py",
        signals_are_sent_with_what_the_hooks_read,
    ),
    Canary(
        "django-q2",
        "django_q.worker.error_reporter",
        "see the exception a task raised, not only its text",
        f"{Q2}hooks.py",
        worker_has_an_error_reporter,
    ),
    Canary(
        "django-q2",
        "django_q.brokers.Broker enqueue/dequeue/list_key/connection",
        "put a retry back on its cluster's queue",
        f"{Q2}redelivery.py, monitor.py",
        brokers_enqueue_and_name_their_list,
    ),
    Canary(
        "django-q2",
        "django_q.models.OrmQ key/payload/lock",
        "delay a retry in the ORM broker's queue row",
        f"{Q2}monitor.py, failure_rows.py",
        orm_queue_rows_have_key_payload_and_lock,
    ),
    Canary(
        "django-q2",
        "django_q.models.Failure fields",
        "import existing failures as dead letters",
        f"{Q2}importer.py, admin.py",
        failures_have_the_imported_fields,
    ),
    Canary(
        "django-q2",
        "django_q.humanhash.uuid",
        "give a resubmitted task a new id",
        f"{Q2}redelivery.py",
        humanhash_uuid_returns_name_and_hex,
    ),
    Canary(
        "django-q2",
        "django_q.utils.get_func_repr",
        "name a task's function the way django-q2 does",
        f"{Q2}monitor.py",
        func_repr_names_a_function,
    ),
    Canary(
        "django-q2",
        "django_q.admin.FailAdmin and resubmit_task",
        "guard django-q2's own resubmit action",
        f"{Q2}admin.py",
        admin_resubmit_and_fail_admin,
    ),
    Canary(
        "django-q2",
        "django_q.exceptions.TimeoutException",
        "treat django-q2's timeouts as retryable",
        f"{Q2}hooks.py, importer.py",
        timeout_exception_exists,
    ),
]


@pytest.mark.parametrize("canary", CANARIES, ids=lambda canary: canary.id)
def test_django_q2_internal(canary: Canary) -> None:
    canary.run()
