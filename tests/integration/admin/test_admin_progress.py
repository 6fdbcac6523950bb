"""How far a job got, in the admin (docs/progress.md): the job's page, the job list, the dead letter's page.

The note is the job's own text: escaped wherever it is shown, and shown to
anyone who may view the job (it is not the arguments, which need their own
permission). Rows are written by the factories; that the worker writes them
is tests/integration/progress/.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from tests.factories import DeadLetterFactory, JobFactory
from tests.integration.conftest import Operator, change_url

pytestmark = pytest.mark.django_db

NOTE = 'copying <script>alert("x")</script> & more'
ESCAPED = "copying &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more"
AT = datetime(2026, 12, 1, 3, 0, 7, tzinfo=UTC)


def test_the_jobs_page_shows_a_bar_the_words_the_note_escaped_and_when(viewer: Operator) -> None:
    job = JobFactory.create(
        running=True, progress_done=420, progress_total=1000, progress_note=NOTE, progress_at=AT
    )
    html = viewer.get(change_url(job)).text
    assert '<progress max="1000" value="420"></progress> 420 of 1,000 (42%) · ' + ESCAPED in html
    assert "<script>alert" not in html
    assert "reported at" in html


def test_without_a_total_there_is_no_bar_and_without_progress_a_dash(viewer: Operator) -> None:
    counted = JobFactory.create(running=True, progress_done=5, progress_at=AT)
    html = viewer.get(change_url(counted)).text
    assert "5 done" in html
    assert "<progress" not in html
    silent = viewer.get(change_url(JobFactory.create(running=True))).text
    assert "field-progress_shown" in silent
    assert "reported at" not in silent


def test_the_list_shows_the_words_under_the_status_and_the_note_on_hover(viewer: Operator) -> None:
    JobFactory.create(running=True, progress_done=3, progress_total=10, progress_note=NOTE, progress_at=AT)
    JobFactory.create(running=True)  # reported nothing: nothing under its status
    html = viewer.get(reverse("admin:django_jobretry_job_changelist")).text
    assert f'<span class="jobretry-quiet" title="{ESCAPED}">3 of 10 (30%)</span>' in html
    assert html.count("(30%)") == 1
    assert "<script>alert" not in html


def test_the_dead_letters_page_says_how_far_its_job_got(viewer: Operator) -> None:
    dead = DeadLetterFactory.create(progress_done=7, progress_total=10, progress_note=NOTE, progress_at=AT)
    html = viewer.get(change_url(dead)).text
    assert "<dt>Got to</dt>" in html
    assert "7 of 10 (70%) · " + ESCAPED in html
    assert "<script>alert" not in html
    assert "Got to" not in viewer.get(change_url(DeadLetterFactory.create())).text
