"""The dashboard's capability panels: what each is built for (:class:`Page`), and how a time reads there.

Each panel is one function of the :class:`Page` returning its include's
context (None: the panel is not shown) and one template include; the
dashboard builds them from features.py's list. The Held panel is the
holds' (holds/panel.py), the Limits panel the limits' (limits/faces.py),
the Schedules panel the schedules' (schedules/admin.py). Nothing here
changes state on a GET.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar, cast

from django.http import HttpRequest
from django.utils.safestring import SafeString

from django_jobretry.admin import rendering
from django_jobretry.display import humanize_age

_T = TypeVar("_T")


@dataclass
class Page:
    """What a panel is built for: the request, the admin site's name, the database's now."""

    request: HttpRequest
    site: str
    now: datetime
    _reads: dict[Callable[[], object], object] = field(default_factory=dict)

    def read(self, reader: Callable[[], _T]) -> _T:
        """``reader()``, once per page: panels showing the same report share one read of it."""
        if reader not in self._reads:
            self._reads[reader] = reader()
        return cast(_T, self._reads[reader])


def since(moment: datetime | None, now: datetime) -> tuple[SafeString | str, str]:
    """A time to the second (wrapping between date and time only) and its age ("1h04m05s"); "" for None."""
    if moment is None:
        return "", ""
    return rendering.time_html(moment), humanize_age(max(now - moment, timedelta(0)))
