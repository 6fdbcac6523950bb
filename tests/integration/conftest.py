"""Helpers and fixtures shared by integration tests in several folders.

- The admin (admin/, and each capability's pages in its folder): an
  :class:`Operator` - a logged-in browser with CSRF checks on - and the
  staff accounts it acts as.
- Management commands in process (`manage.py deadletters`, `flows`,
  `schedules`, `jobstatus`...): running one for its output, or for its exit
  code and message when it fails.
- The wake-ups (jobs/, holds/): a session LISTENing on the workers' channel.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.urls import reverse

from django_jobretry.jobs.insert import CHANNEL
from django_jobretry.models import DeadLetter, Job

# --- the admin ------------------------------------------------------------------------------------

CHANGELIST = "admin:django_jobretry_deadletter_changelist"
PASSWORD = "pw-for-tests"  # noqa: S105


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


@pytest.fixture
def listener() -> Iterator[psycopg.Connection]:
    """A session of its own LISTENing on the channel workers wake on, as a worker's listener does."""
    session = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    session.execute(f"LISTEN {CHANNEL}")
    yield session
    session.close()


def change_url(obj: Job | DeadLetter) -> str:
    return reverse(f"admin:django_jobretry_{obj._meta.model_name}_change", args=[obj.pk])


def dead_url(dead: DeadLetter, what: str) -> str:
    return reverse(f"admin:django_jobretry_deadletter_{what}", args=[dead.pk])


# --- manage.py commands, in process ---------------------------------------------------------------


def run_command(*args: str, **options: Any) -> str:
    """``call_command(*args, **options)``; returns its stdout; a non-zero exit raises CommandError."""
    out = io.StringIO()
    call_command(*args, stdout=out, **options)
    return out.getvalue()


def refused(*args: str, **options: Any) -> tuple[int, str]:
    """The exit code and the message of a command that fails, in process."""
    with pytest.raises(CommandError) as info:
        run_command(*args, **options)
    return info.value.returncode, str(info.value)


def cli_run(*args: str, **options: Any) -> tuple[str, str]:
    """``manage.py deadletters ARGS``: (stdout, stderr)."""
    err = io.StringIO()
    return run_command("deadletters", *args, stderr=err, **options), err.getvalue()


def exit_code(*args: str, **options: Any) -> tuple[int, str]:
    """The exit code and error message of ``manage.py deadletters ARGS``, its stderr kept from the output."""
    return refused("deadletters", *args, stderr=io.StringIO(), **options)
