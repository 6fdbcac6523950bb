from datetime import timedelta

import pytest

from django_jobretry.display import humanize_age, humanize_delay


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


@pytest.mark.parametrize(
    ("delay", "text"),
    [
        (timedelta(seconds=0.4), "0s"),
        (timedelta(seconds=45), "45s"),
        (timedelta(seconds=245), "4m05s"),
        (timedelta(hours=1, minutes=4, seconds=5), "1h04m05s"),
        (timedelta(days=3, hours=2, minutes=4, seconds=5), "3d02h04m05s"),
        (timedelta(seconds=-3), "0s"),
    ],
)
def test_humanize_age_keeps_the_second(delay: timedelta, text: str) -> None:
    assert humanize_age(delay) == text
