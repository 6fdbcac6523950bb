"""The options both faces declare, ``@job(...)`` and JobRetryBackend's ``@task(...)``: written once.

Each option's name, default and type is a field of :class:`TaskOptions`,
and its check is in :meth:`TaskOptions.declare`. ``JobRetryTask``
(contrib/django_tasks/task_class.py) inherits the fields; ``@job`` builds a
``TaskOptions`` from its keywords, which :class:`TaskKeywords` types for
mypy and IDEs (a ``TypedDict`` is the only way to type ``**options``; mypy
checks it against the fields where ``@job`` builds one, and
tests/unit/test_task_options.py that the names match). So an option added
here shows on both faces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple, TypedDict

from django_jobretry.conf.uniqueness import OnConflict, Uniqueness
from django_jobretry.exceptions import InvalidJob
from django_jobretry.limits import declare_limit
from django_jobretry.policy.limits import Limit
from django_jobretry.validation import check_timeout


class TaskKeywords(TypedDict, total=False):
    """:class:`TaskOptions`' fields as keywords, for ``**options: Unpack[...]``."""

    timeout: float | timedelta | None
    unique_args: tuple[str, ...]
    unique_for: float | timedelta | None
    on_conflict: OnConflict
    concurrency: int | None
    concurrency_key: str | None
    rate: str | None
    burst: int | None


class Declared(NamedTuple):
    """A task's options once checked: what its enqueues and the worker read of them."""

    timeout: timedelta | None
    unique: Uniqueness
    limit: Limit | None


@dataclass(frozen=True, kw_only=True)
class TaskOptions:
    """The options both faces take, as given; :meth:`declare` checks them."""

    #: How long one attempt may run, seconds or a timedelta; None: the policy's ``timeout``, if any.
    timeout: timedelta | float | None = None
    #: The arguments whose values make each enqueue's key (docs/jobs.md#deduplication).
    unique_args: tuple[str, ...] = ()
    #: How long a key stays taken after its job succeeded: seconds or a timedelta.
    unique_for: timedelta | float | None = None
    #: What an enqueue whose key is taken does: "return_existing", "raise" or "replace".
    on_conflict: OnConflict = "return_existing"
    #: How many of its jobs run at once across every worker; per value of ``concurrency_key``, if given.
    concurrency: int | None = None
    concurrency_key: str | None = None
    #: How many of its jobs start per period ("10/m"), ``burst`` at once (docs/limits.md).
    rate: str | None = None
    burst: int | None = None

    def declare(
        self,
        where: str,
        func: Callable[..., Any],
        *,
        takes_context: bool = False,
        unique_key: str | None = None,
    ) -> Declared:
        """The options checked, in field order, against ``func``'s parameters.

        InvalidJob (InvalidLimit for the limit options) names ``where``
        ("@job app.jobs.sync"), the option and the value. Nothing is
        recorded: the face registers the task, then the limit.
        """
        try:
            timeout = check_timeout(self.timeout)
        except InvalidJob as exc:
            raise InvalidJob(f"{where}: {exc}") from None
        unique = Uniqueness.declare(
            where,
            unique_key=unique_key,
            unique_args=self.unique_args,
            unique_for=self.unique_for,
            on_conflict=self.on_conflict,
            func=func,
            takes_context=takes_context,
        )
        limit = declare_limit(
            where,
            func,
            takes_context=takes_context,
            concurrency=self.concurrency,
            concurrency_key=self.concurrency_key,
            rate=self.rate,
            burst=self.burst,
        )
        return Declared(timeout, unique, limit)
