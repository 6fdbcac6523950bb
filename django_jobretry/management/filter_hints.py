"""Why a `deadletters` filter matched nothing: a near name that does match, if there is one.

"No dead letters match." after `--task sync_to_partner` leaves the operator
guessing; task names are full dotted paths, and a queue name may be one
letter off. The candidates are names dead letters (and registered tasks)
actually have.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from django_jobretry.models import DeadLetter
from django_jobretry.registry import registry

#: Distinct names read to find a close one; more would only slow an empty listing down.
CANDIDATES = 1000


def nearest(value: str, known: Iterable[str]) -> list[str]:
    """Names ending in ``.value`` (a missing module prefix) first, else close spellings."""
    names = sorted(set(known))
    suffixed = [name for name in names if name.endswith(f".{value}")]
    return suffixed[:3] or difflib.get_close_matches(value, names, n=3)


def hint(*, task: str | None, queue: str | None) -> str | None:
    """A sentence for a --task or --queue that no dead letter has, or None when both exist."""
    for option, field, value, extra in (
        ("--task", "task_name", task, registry.names()),
        ("--queue", "queue_name", queue, ()),
    ):
        if value is None or DeadLetter.objects.filter(**{field: value}).exists():
            continue
        seen = DeadLetter.objects.order_by().values_list(field, flat=True).distinct()[:CANDIDATES]
        close = nearest(value, [*seen, *extra])
        names = " or ".join(repr(name) for name in close)
        suggestion = f" Did you mean {names}?" if close else ""
        return f"No dead letter has {option} {value!r}.{suggestion}"
    return None
