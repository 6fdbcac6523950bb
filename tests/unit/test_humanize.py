from datetime import timedelta

import pytest

from django_jobretry.display.humanize import humanize_delay


@pytest.mark.parametrize(
    ("delay", "text"),
    [
        (timedelta(milliseconds=250), "250ms"),
        (timedelta(seconds=15), "15s"),
        (timedelta(seconds=11.25), "11.2s"),
        (timedelta(seconds=150), "2m30s"),
        (timedelta(minutes=64), "1h04m"),
        (timedelta(hours=27, minutes=30), "1d03h"),
    ],
)
def test_humanize_delay(delay: timedelta, text: str) -> None:
    assert humanize_delay(delay) == text
