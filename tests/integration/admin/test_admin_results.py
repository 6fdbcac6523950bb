"""A succeeded job's result on its admin page (docs/results.md): only to holders of ``view_job_payload``.

Through Django's test client, as real staff accounts (tests/integration/conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.factories import JobFactory
from tests.integration.admin.test_admin_pages import redact
from tests.integration.conftest import Operator, change_url

pytestmark = pytest.mark.django_db

JOBS = "admin:django_jobretry_job_changelist"
SECRET = "card-4242"  # noqa: S105
HIDDEN = "hidden (needs the 'Can view job and dead-letter arguments' permission)"


@pytest.fixture
def reader(make_user: Any) -> Operator:
    """May see arguments, and so results."""
    return Operator(make_user("view_job", "view_job_payload", name="reader"))


def result_section(html: str) -> str:
    """The Result fieldset of a detail page, or "" when it has none."""
    start = html.find('<fieldset class="module aligned jobretry-result">')
    return "" if start < 0 else html[start : html.index("</fieldset>", start)]


def test_shown_to_holders_of_the_payload_permission(reader: Operator) -> None:
    job = JobFactory.create(succeeded=True, return_value={"charge": SECRET, "items": [1, 2]})
    section = result_section(reader.get(change_url(job)).text)
    assert "<h2>Result</h2>" in section
    assert f"&quot;charge&quot;: &quot;{SECRET}&quot;" in section
    assert "hidden" not in section


def test_hidden_from_those_without_it(viewer: Operator) -> None:
    job = JobFactory.create(succeeded=True, return_value={"charge": SECRET})
    html = viewer.get(change_url(job)).text
    assert HIDDEN in result_section(html)
    assert SECRET not in html


def test_hidden_from_everyone_while_a_redactor_is_configured(superuser: Operator, settings: Any) -> None:
    """The redactor is given arguments only: a result it never saw is not shown (fail closed)."""
    settings.JOBRETRY = {**settings.JOBRETRY, "PAYLOAD_REDACTOR": f"{redact.__module__}.redact"}
    job = JobFactory.create(succeeded=True, return_value={"charge": SECRET})
    html = superuser.get(change_url(job)).text
    assert "hidden: a PAYLOAD_REDACTOR is configured, and it redacts arguments only" in result_section(html)
    assert SECRET not in html


def test_a_job_that_kept_none_says_so_and_an_unfinished_one_has_no_section(reader: Operator) -> None:
    succeeded = JobFactory.create(succeeded=True)
    assert "None kept: its task keeps no result (keep_result)." in result_section(
        reader.get(change_url(succeeded)).text
    )
    for state in ({}, {"running": True}, {"retrying": True}):
        assert result_section(reader.get(change_url(JobFactory.create(**state))).text) == ""


def test_never_in_the_list(reader: Operator) -> None:
    JobFactory.create(succeeded=True, return_value={"charge": SECRET})
    listing = reader.get(reverse(JOBS))
    assert listing.status_code == 200
    assert SECRET not in listing.text
