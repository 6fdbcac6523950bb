"""A canary: one upstream internal an adapter relies on, checked, with the adapter code to revisit.

The django-q2 adapter and the ``django.tasks`` backend reach past public
APIs (docs/install.md#tested-versions). A new upstream release that
changes one of those internals fails its canary, by name, with what we use
it for and where, instead of a production worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata


class CanaryFailed(AssertionError):
    """An upstream internal changed; the message says which, why we need it, and what to revisit."""


@dataclass(frozen=True)
class Canary:
    #: The distribution it belongs to ("django-q2", "django"), for the version in the message.
    upstream: str
    #: What we rely on: ``django_q.signing.SignedPackage.dumps/loads``.
    internal: str
    #: Why: what the adapter does with it.
    why: str
    #: Where: the adapter files to revisit when it changes.
    revisit: str
    #: Raises (anything) when the internal is not as we rely on it.
    check: Callable[[], None]

    @property
    def id(self) -> str:
        return self.internal

    def run(self) -> None:
        try:
            self.check()
        except Exception as exc:
            version = metadata.version(self.upstream)
            raise CanaryFailed(
                f"{self.upstream} {version}: {self.internal} is not as the adapter relies on it "
                f"({type(exc).__name__}: {exc}). We use it to {self.why}. Revisit {self.revisit}."
            ) from exc


def require(condition: bool, what: str) -> None:
    """A check's assertion that survives ``python -O``."""
    if not condition:
        raise AssertionError(what)
