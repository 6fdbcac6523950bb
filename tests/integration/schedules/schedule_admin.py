"""Driving the schedules page as an operator does: its URLs, its rows, an action and its confirmation."""

from __future__ import annotations

import re
from typing import Any

from django.urls import reverse

from tests.integration.conftest import Operator, hidden_inputs

LIST = reverse("admin:django_jobretry_schedule_changelist")
VIEW = "view_schedule"


def detail(name: str) -> str:
    return reverse("admin:django_jobretry_schedule_change", args=[name])


def rows_of(html: str) -> dict[str, str]:
    """The list's rows by schedule name (the name is the first cell's link text)."""
    body = html.split('id="result_list"', 1)[1].split("</table>", 1)[0]
    found = {}
    for row in re.findall(r"<tr>.*?</tr>", body, flags=re.S)[1:]:  # the first is the header
        name = re.search(r'<span class="jobretry-task-name">([^<]+)</span>', row)
        assert name is not None, row
        found[name.group(1)] = row
    return found


def operator(make_user: Any, *codenames: str) -> Operator:
    ops = Operator(make_user(*codenames))
    assert ops.get(LIST).status_code == 200  # also sets the CSRF cookie, as a browser's first visit
    return ops


def act(ops: Operator, action: str, names: list[str], **extra: Any) -> Any:
    """Tick ``names`` and run ``action``: the confirmation page, or the list after a refusal."""
    data = {"action": action, "_selected_action": names, "index": "0", **extra}
    return ops.post(LIST, data, follow=True)


def confirm(ops: Operator, page: Any, **extra: Any) -> Any:
    """Say yes on a confirmation page, as its form posts."""
    return ops.post(LIST, {**hidden_inputs(page.text), **extra}, follow=True)
