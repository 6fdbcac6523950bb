"""The one settings object: typed, validated, read lazily from settings.JOBRETRY.

This package is the settings room: the schema (schema.py) and the problems
it reports (problems.py), the system checks (checks.py, databases.py,
database_engine.py, task_modules.py), the database connections of our
processes (databases.py) and the modules imported at start-up (task_modules.py).

Values are read at access time (cached until a `setting_changed` signal) so
`override_settings` works in tests and nothing is read at import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from django_jobretry.conf.schema import DEFAULTS, validate
from django_jobretry.exceptions import InvalidSettings, UnknownPolicy
from django_jobretry.policy import RetryPolicy

#: Heartbeats a lease must have room for; see heartbeat_every().
HEARTBEATS_PER_LEASE = 3


class JobRetrySettings:
    """Access to JOBRETRY; raises :class:`InvalidSettings` when it is malformed."""

    def __init__(self) -> None:
        self._policies: dict[str, RetryPolicy] | None = None
        self._middleware: tuple[Callable[..., Any], ...] | None = None

    @property
    def raw(self) -> Any:
        return getattr(settings, "JOBRETRY", {})

    @property
    def policies(self) -> dict[str, RetryPolicy]:
        """Every configured policy by name; "default" is always present."""
        if self._policies is None:
            policies, problems = validate(self.raw)
            if problems:
                first = problems[0]
                raise InvalidSettings(f"django_jobretry.{first.id}: {first.msg} {first.hint}")
            self._policies = policies
        return self._policies

    def value(self, key: str) -> Any:
        """A validated top-level value (see schema.DEFAULTS), or its default."""
        _ = self.policies  # validates the whole dict once
        return self.raw.get(key, DEFAULTS[key])

    @property
    def lease_seconds(self) -> float:
        return float(self.value("LEASE_SECONDS"))

    @property
    def heartbeat_seconds(self) -> float | None:
        """HEARTBEAT_SECONDS as configured; None means "a third of the lease"."""
        configured = self.value("HEARTBEAT_SECONDS")
        return None if configured is None else float(configured)

    def heartbeat_every(self, lease_seconds: float) -> float:
        """How often a worker with this lease heartbeats: at most a third of it.

        Three beats per lease let two fail before the lease expires; a longer
        HEARTBEAT_SECONDS is capped here (and check W001 says so).
        """
        cap = lease_seconds / HEARTBEATS_PER_LEASE
        configured = self.heartbeat_seconds
        return cap if configured is None else min(configured, cap)

    @property
    def poll_seconds(self) -> float:
        return float(self.value("POLL_SECONDS"))

    @property
    def shutdown_timeout_seconds(self) -> float:
        return float(self.value("SHUTDOWN_TIMEOUT_SECONDS"))

    @property
    def max_args_bytes(self) -> int:
        return int(self.value("MAX_ARGS_BYTES"))

    @property
    def max_args_depth(self) -> int:
        return int(self.value("MAX_ARGS_DEPTH"))

    @property
    def error_history_limit(self) -> int:
        return int(self.value("ERROR_HISTORY_LIMIT"))

    @property
    def error_message_chars(self) -> int:
        return int(self.value("ERROR_MESSAGE_CHARS"))

    @property
    def traceback_chars(self) -> int:
        return int(self.value("TRACEBACK_CHARS"))

    @property
    def session_timeouts_ms(self) -> dict[str, int]:
        """PostgreSQL session settings for the worker's own connections (docs/design.md#rule-8)."""
        return {
            "statement_timeout": int(self.value("STATEMENT_TIMEOUT_MS")),
            "lock_timeout": int(self.value("LOCK_TIMEOUT_MS")),
            "idle_in_transaction_session_timeout": int(self.value("IDLE_IN_TRANSACTION_TIMEOUT_MS")),
        }

    @property
    def succeeded_retention_days(self) -> float:
        return float(self.value("SUCCEEDED_RETENTION_DAYS"))

    @property
    def dead_letter_retention_days(self) -> float | None:
        days = self.value("DEAD_LETTER_RETENTION_DAYS")
        return None if days is None else float(days)

    @property
    def metrics_token(self) -> str | None:
        """The bearer token the metrics view accepts (docs/metrics.md); None: staff users only."""
        token: str | None = self.value("METRICS_TOKEN")  # validated: None or a string
        return token

    @property
    def trace_url(self) -> str | None:
        """A trace backend's page for one trace, with ``{trace_id}`` (docs/tracing.md); None: no links."""
        url: str | None = self.value("TRACE_URL")  # validated: None or an http(s) URL with that one field
        return url

    @property
    def listen(self) -> bool:
        """Whether workers LISTEN for wake-ups at all; False: they only poll."""
        return bool(self.value("LISTEN"))

    @property
    def listen_database(self) -> str | None:
        """The DATABASES alias of the LISTEN connection; None: the worker's own ("default")."""
        alias: str | None = self.value("LISTEN_DATABASE")  # validated: None or a non-empty string
        return alias

    @property
    def payload_redactor(
        self,
    ) -> Callable[[str, list[Any], dict[str, Any]], tuple[list[Any], dict[str, Any]]] | None:
        """The project's redaction hook for arguments shown in the admin, if any."""
        path = self.value("PAYLOAD_REDACTOR")
        return None if path is None else import_string(path)

    @property
    def middleware(self) -> tuple[Callable[..., Any], ...]:
        """The callables of MIDDLEWARE, imported once (jobs/middleware.py); empty: none."""
        if self._middleware is None:
            self._middleware = tuple(import_string(path) for path in self.value("MIDDLEWARE"))
        return self._middleware

    def policy(self, name: str) -> RetryPolicy:
        """The policy called ``name``; :class:`UnknownPolicy` lists the known ones."""
        try:
            return self.policies[name]
        except KeyError:
            raise UnknownPolicy(name, list(self.policies)) from None

    def reset(self) -> None:
        self._policies = None
        self._middleware = None


jobretry_settings = JobRetrySettings()


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: object) -> None:
    if setting == "JOBRETRY":
        jobretry_settings.reset()
