"""The dashboard's bar charts, as positioned bars an SVG template draws (no JavaScript, no CDN).

A chart is drawn server-side, so nothing on the page is left for a CSP to
block; admin/dashboard.py reads the counts and hands them here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from django_jobretry import console

#: Plot height of both charts, in SVG user units.
PLOT_HEIGHT = 120


@dataclass(frozen=True)
class Bar:
    """One chart bar, positioned for the SVG template."""

    x: int
    center: float
    y: float
    height: float
    count: console.Count
    label: str
    tick: str
    #: No sample in this bar's time (samples charts only): drawn as a gap.
    missing: bool = False

    @property
    def value(self) -> str:
        """The bar's number, short enough to sit on a narrow bar: 950, 1k, 1k+ (past console.BAR_LIMIT)."""
        number = self.count.value or 0
        text = f"{number / 1000:.1f}k".replace(".0k", "k") if number >= 1000 else str(number)
        return f"{text}+" if self.count.more else text


@dataclass(frozen=True)
class Chart:
    """A bar chart: bars in time order, the drawing's size and the total it shows.

    A chart of samples (``peak=True``) shows levels, not events: its ``total``
    is its highest bar, and it is ``empty`` when no bar has a sample.
    """

    bars: list[Bar]
    slot: int
    total: console.Count
    peak_chart: bool = False

    @property
    def headline(self) -> str:
        return f"peak {self.total}" if self.peak_chart else str(self.total)

    @property
    def description(self) -> str:
        if self.peak_chart:
            sampled = sum(1 for bar in self.bars if not bar.missing)
            return f"at most {self.total} in one sample; {sampled} of {len(self.bars)} bars sampled"
        return f"{self.total} in all, at most {self.peak} in one bar"

    @property
    def empty(self) -> bool:
        return all(bar.missing for bar in self.bars)

    @property
    def width(self) -> int:
        return self.slot * len(self.bars)

    @property
    def bar_width(self) -> int:
        return bar_width(self.slot)

    @property
    def peak(self) -> int:
        return max((bar.count.value or 0 for bar in self.bars), default=0)


def bar_width(slot: int) -> int:
    """A bar fills its slot but for a gap, so neighbours stay apart."""
    return slot - max(slot // 6, 2)


def bars(
    starts: list[datetime],
    counts: list[console.Count | None],
    *,
    slot: int,
    label: str,
    tick: str,
    every: int,
) -> list[Bar]:
    """Bars ``slot`` SVG units apart, ``label`` naming each and ``tick`` every ``every``-th one.

    A count of None is a bar with no sample: no height, marked ``missing``.
    A chart is about as wide in SVG units as its half of the page in pixels,
    so its text is drawn at about the size the stylesheet gives it.
    """
    peak = max([*(count.value or 0 for count in counts if count is not None), 1])
    drawn = []
    for index, (start, count) in enumerate(zip(starts, counts, strict=True)):
        shown_count = console.Count(0) if count is None else count
        height = PLOT_HEIGHT * (shown_count.value or 0) / peak
        local = timezone.localtime(start)
        shown = local.strftime(tick) if index % every == 0 else ""
        x = index * slot
        drawn.append(
            Bar(
                x,
                x + bar_width(slot) / 2,
                PLOT_HEIGHT - height,
                height,
                shown_count,
                local.strftime(label),
                shown,
                missing=count is None,
            )
        )
    return drawn


def chart(
    starts: list[datetime], counts: list[console.Count], *, slot: int, label: str, tick: str, every: int
) -> Chart:
    """Deaths per bucket starting at each of ``starts``."""
    drawn = bars(starts, list(counts), slot=slot, label=label, tick=tick, every=every)
    return Chart(drawn, slot, sum(counts, console.Count(0)))
