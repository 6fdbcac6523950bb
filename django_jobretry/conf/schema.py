"""What JOBRETRY may contain, and the one validator behind checks and settings.

System checks and the lazy settings object call the same `validate()` so a
project that passes `manage.py check` can never fail differently at run time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string

from django_jobretry.conf.problems import Problem, import_error_classes, middleware_problems, service_problems
from django_jobretry.display import did_you_mean
from django_jobretry.policy import InvalidPolicy, RetryPolicy
from django_jobretry.policy.errors import MAX_DELAY

#: Fields of one policy and their defaults: the built-in "default" policy.
#: 20 attempts, 15 s doubling to a 2 h cap with +/-25 % jitter: about a day of
#: retries (16.6 h at best, 27.7 h at worst), see docs/settings.md for the reasoning.
POLICY_DEFAULTS: dict[str, Any] = {
    "max_attempts": 20,
    "base_delay": 15,
    "multiplier": 2.0,
    "max_delay": 7200,
    "jitter": 0.25,
    "total_budget": None,
    "retry_for": None,
    "fatal_errors": [],
    "retryable_errors": [],
    "unknown_errors": "retryable",
    "requeue_budget": 0,
    "timeout": None,
    "circuit": None,
    # None: 20, or no count when snooze_for (a time) is the budget (policy/decisions.py).
    "max_snoozes": None,
    "snooze_for": None,
    "keep_result": False,
}


@dataclass(frozen=True)
class Limit:
    """A numeric top-level setting: its default and inclusive range."""

    default: float | None
    minimum: float
    maximum: float
    integer: bool = False
    optional: bool = False

    def problem(self, key: str, value: object) -> Problem | None:
        if value is None and self.optional:
            return None
        kind = "an integer" if self.integer else "a number"
        bad_type = isinstance(value, bool) or not isinstance(value, int if self.integer else int | float)
        if bad_type or not self.minimum <= value <= self.maximum:  # type: ignore[operator]
            allowed = f"{kind} from {self.minimum:g} to {self.maximum:g}" + (
                " or None" if self.optional else ""
            )
            hint = f"Default: {self.default!r}; leave the key out to use it."
            return Problem("E007", f'JOBRETRY["{key}"] = {value!r} is invalid: expected {allowed}.', hint)
        return None


#: Worker, enqueue and retention limits: JOBRETRY[KEY] -> Limit.
LIMITS: dict[str, Limit] = {
    # How long a claimed job may run without a heartbeat before others take it.
    "LEASE_SECONDS": Limit(60, 1, 86_400),
    # None: a third of the lease, so two heartbeats can fail before it expires.
    "HEARTBEAT_SECONDS": Limit(None, 0.1, 3_600, optional=True),
    # Polling bounds pickup latency when LISTEN/NOTIFY is unavailable.
    "POLL_SECONDS": Limit(1.0, 0.01, 300),
    "SHUTDOWN_TIMEOUT_SECONDS": Limit(30, 0, 86_400),
    "MAX_ARGS_BYTES": Limit(65_536, 64, 16 * 1024 * 1024, integer=True),
    "MAX_ARGS_DEPTH": Limit(32, 1, 1_000, integer=True),
    "ERROR_HISTORY_LIMIT": Limit(100, 1, 10_000, integer=True),
    "ERROR_MESSAGE_CHARS": Limit(2_000, 80, 100_000, integer=True),
    "TRACEBACK_CHARS": Limit(8_000, 0, 1_000_000, integer=True),
    # Worker sessions: bound every statement the worker itself runs.
    "STATEMENT_TIMEOUT_MS": Limit(30_000, 100, 3_600_000, integer=True),
    "LOCK_TIMEOUT_MS": Limit(5_000, 10, 3_600_000, integer=True),
    "IDLE_IN_TRANSACTION_TIMEOUT_MS": Limit(60_000, 100, 3_600_000, integer=True),
    # `prunejobs` default: succeeded jobs older than this many days.
    "SUCCEEDED_RETENTION_DAYS": Limit(7, 0, 36_500),
    # Dead letters are kept until an operator acts unless this is set.
    "DEAD_LETTER_RETENTION_DAYS": Limit(None, 1, 36_500, optional=True),
}

#: Dotted path to ``redact(task_name, args, kwargs) -> (args, kwargs)``,
#: applied before the admin shows arguments, even to users allowed to see them.
HOOKS: dict[str, None] = {"PAYLOAD_REDACTOR": None}

#: Top-level keys of JOBRETRY and their defaults.
DEFAULTS: dict[str, Any] = {
    "POLICIES": {"default": {}},
    **{key: limit.default for key, limit in LIMITS.items()},
    **HOOKS,
    # The django-q2 adapter's settings; django_jobretry.contrib.django_q2 checks them.
    "DJANGO_Q2": None,
    # The bearer token of the metrics view (docs/metrics.md); None: staff users only.
    "METRICS_TOKEN": None,
    # Workers LISTEN for wake-ups (False: poll only), on this DATABASES alias
    # (None: the worker's own, "default"); django_jobretry/conf/databases.py.
    "LISTEN": True,
    "LISTEN_DATABASE": None,
    # Modules every process imports at start-up besides each app's jobs.py and tasks.py
    # (django_jobretry/conf/task_modules.py): where a project keeps tasks elsewhere.
    "TASK_MODULES": [],
    # Dotted paths to middleware(job, call_next) around every attempt, the first outermost
    # (django_jobretry/jobs/middleware.py; checks E017-E019).
    "MIDDLEWARE": [],
    # Periodic schedules by name (django_jobretry/schedules/__init__.py; checks E040-E046).
    "SCHEDULES": {},
    # Concurrency and rate limits by queue name (django_jobretry/limits/__init__.py; check E050).
    "QUEUE_LIMITS": {},
    # A trace backend's page for one trace, "https://.../{trace_id}": the job and dead-letter pages
    # link the enqueue's trace and each traced attempt's there (docs/tracing.md; check E016).
    "TRACE_URL": None,
}

POLICY_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_ERROR_LISTS = ("fatal_errors", "retryable_errors")


def validate(raw: object) -> tuple[dict[str, RetryPolicy], list[Problem]]:
    """Build every configured policy; report each problem instead of stopping at one."""
    if not isinstance(raw, Mapping):
        hint = 'JOBRETRY = {"POLICIES": {"default": {...}}}'
        return {}, [Problem("E001", f"JOBRETRY must be a dict, got {type(raw).__name__}.", hint)]
    problems = [
        Problem(
            "E002",
            f"JOBRETRY has an unknown key {key!r}.{did_you_mean([key], DEFAULTS)}",
            f"Allowed keys: {sorted(DEFAULTS)}.",
        )
        for key in raw
        if key not in DEFAULTS
    ]
    problems += [p for key, limit in LIMITS.items() if key in raw and (p := limit.problem(key, raw[key]))]
    problems += [p for key in HOOKS if raw.get(key) is not None and (p := _hook_problem(key, raw[key]))]
    problems += service_problems(raw)
    problems += _task_modules_problems(raw.get("TASK_MODULES", []))
    problems += middleware_problems(raw.get("MIDDLEWARE", []))
    configured = raw.get("POLICIES", DEFAULTS["POLICIES"])
    if not isinstance(configured, Mapping):
        msg = f'JOBRETRY["POLICIES"] must be a dict of policy name -> dict, got {type(configured).__name__}.'
        return {}, [*problems, Problem("E003", msg, 'e.g. {"default": {"max_attempts": 5}}')]
    policies: dict[str, RetryPolicy] = {}
    # "default" always exists; a project may override it but not remove it.
    for name, fields in {"default": {}, **configured}.items():
        policy, found = _build_policy(name, fields)
        problems += found
        if policy is not None:
            policies[name] = policy
    return policies, problems


def _build_policy(name: object, fields: object) -> tuple[RetryPolicy | None, list[Problem]]:
    where = f'JOBRETRY["POLICIES"]["{name}"]'
    if not isinstance(name, str) or not POLICY_NAME.match(name):
        hint = "Use 1-64 lowercase letters, digits, '_', '.' or '-', starting with a letter or digit."
        return None, [Problem("E003", f"{where}: {name!r} is not a valid policy name.", hint)]
    if not isinstance(fields, Mapping):
        return None, [Problem("E003", f"{where} must be a dict, got {type(fields).__name__}.", "e.g. {}")]
    problems: list[Problem] = []
    unknown = [key for key in fields if key not in POLICY_DEFAULTS]
    if unknown:
        hint = f"Allowed fields: {sorted(POLICY_DEFAULTS)}."
        msg = f"{where} has unknown field(s) {sorted(unknown)}.{did_you_mean(unknown, POLICY_DEFAULTS)}"
        problems.append(Problem("E004", msg, hint))
    values = {**POLICY_DEFAULTS, **{key: value for key, value in fields.items() if key in POLICY_DEFAULTS}}
    for key in _ERROR_LISTS:
        values[key], found = import_error_classes(where, key, values[key])
        problems += found
    circuit = values["circuit"]
    if isinstance(circuit, Mapping) and "errors" in circuit:
        errors, found = import_error_classes(where, 'circuit"]["errors', circuit["errors"])
        values["circuit"], problems = {**circuit, "errors": errors}, problems + found
    overlap = set(values["fatal_errors"]) & set(values["retryable_errors"])
    if overlap:
        names = sorted(f"{k.__module__}.{k.__qualname__}" for k in overlap)
        msg = f"{where} lists {names} as both fatal_errors and retryable_errors."
        problems.append(Problem("E006", msg, "List each exception class in one of the two lists only."))
    # Each field on its own first, so one `check` run names every bad value; the
    # limits between fields (max_delay >= base_delay, total_budget) only once all are valid.
    problems += [
        p for key in fields if key in _SCALAR_FIELDS and (p := _field_problem(where, key, values[key]))
    ]
    if problems:
        return None, problems
    try:
        return RetryPolicy(**values), []
    except InvalidPolicy as exc:
        return None, [_invalid(where, exc)]


#: Policy fields that are checked one at a time (the error lists are imported above).
_SCALAR_FIELDS = frozenset(POLICY_DEFAULTS) - set(_ERROR_LISTS)
#: The other fields while one is checked alone: wide enough that no limit between fields applies.
_ALONE = {**POLICY_DEFAULTS, "max_attempts": 1, "base_delay": 1e-6, "max_delay": MAX_DELAY}


def _field_problem(where: str, key: str, value: object) -> Problem | None:
    try:
        RetryPolicy(**{**_ALONE, key: value})
    except InvalidPolicy as exc:
        return _invalid(where, exc)
    return None


def _invalid(where: str, exc: InvalidPolicy) -> Problem:
    # A nested field ("circuit.failures") is shown as ["circuit"]["failures"].
    path = "".join(f'["{part}"]' for part in exc.field.split("."))
    msg = f"{where}{path} = {exc.value!r} is invalid: {exc.allowed}."
    hint = (
        f"Default for {exc.field!r}: {POLICY_DEFAULTS.get(exc.field)!r}; leave the field out to use it. "
        "Once the settings are valid, manage.py showpolicies prints each policy's schedule."
    )
    return Problem("E005", msg, hint)


def _hook_problem(key: str, path: object) -> Problem | None:
    hint = f'JOBRETRY["{key}"] = "myproject.privacy.redact_job_payload"'
    if not isinstance(path, str):
        return Problem("E008", f'JOBRETRY["{key}"] must be a dotted path to a callable, got {path!r}.', hint)
    try:
        hook = import_string(path)
    except Exception as exc:  # any import failure is a configuration problem
        msg = f'JOBRETRY["{key}"]: cannot import {path!r} ({type(exc).__name__}: {exc}).'
        return Problem("E008", msg, hint)
    if not callable(hook):
        return Problem("E008", f'JOBRETRY["{key}"]: {path!r} is not callable.', hint)
    return None


#: A dotted module path: identifiers joined by dots.
MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
TASK_MODULES_EXAMPLE = 'e.g. JOBRETRY["TASK_MODULES"] = ["billing.background", "shop.emails.jobs"]'


def task_modules(raw: object) -> list[str]:
    """The usable entries of JOBRETRY["TASK_MODULES"]; a malformed one is left out (E014 reports it)."""
    configured = raw.get("TASK_MODULES", []) if isinstance(raw, Mapping) else []
    if isinstance(configured, str) or not isinstance(configured, list | tuple):
        return []
    return [path for path in configured if isinstance(path, str) and MODULE_PATH.match(path)]


def _task_modules_problems(configured: object) -> list[Problem]:
    """TASK_MODULES is a list of dotted module paths (whether each imports: task_modules.py)."""
    if isinstance(configured, str) or not isinstance(configured, list | tuple):
        msg = f'JOBRETRY["TASK_MODULES"] = {configured!r} is invalid: expected a list of dotted module paths.'
        return [Problem("E014", msg, TASK_MODULES_EXAMPLE)]
    return [
        Problem(
            "E014", f'JOBRETRY["TASK_MODULES"]: {path!r} is not a dotted module path.', TASK_MODULES_EXAMPLE
        )
        for path in configured
        if not (isinstance(path, str) and MODULE_PATH.match(path))
    ]
