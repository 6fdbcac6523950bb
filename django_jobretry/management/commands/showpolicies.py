"""`manage.py showpolicies`: the retry schedule each configured policy produces.

Operators read this before trusting a policy in production: how long until a
failing job is dead, and how far apart its attempts are at worst.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from django_jobretry.conf import jobretry_settings
from django_jobretry.display import count_of, humanize_delay
from django_jobretry.exceptions import UnknownPolicy
from django_jobretry.management.cli import DatabaseCommand
from django_jobretry.policy import CircuitBreaker, ErrorKind, RetryPolicy
from django_jobretry.policy.decisions import MAX_SNOOZES

_HEADER = ("after attempt", "nominal", "min (jitter)", "max (jitter)", "cumulative worst")


class Command(DatabaseCommand):
    help = "Print the retry schedule (delays and worst-case totals) of each configured policy."
    uses_database = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("names", nargs="*", metavar="POLICY", help="policies to show (default: all)")

    def handle(self, *args: Any, names: list[str], **options: Any) -> None:
        try:
            policies = {name: jobretry_settings.policy(name) for name in names} or jobretry_settings.policies
        except UnknownPolicy as exc:
            raise CommandError(str(exc)) from exc
        for name, policy in policies.items():
            self.stdout.write(self.style.MIGRATE_HEADING(f"Policy {name!r}: {describe(policy)}"))
            self.stdout.write(render_schedule(policy))
            self.stdout.write("\n".join(render_rules(policy)))
            self.stdout.write("")


def describe(policy: RetryPolicy) -> str:
    """One line summing the policy up the way an operator asks about it."""
    parts = [
        count_of(policy.max_attempts, "attempt"),
        f"base {humanize_delay(policy.base_delay)} x{policy.multiplier:g}",
        f"cap {humanize_delay(policy.max_delay)}",
        f"jitter +/-{policy.jitter:.0%}",
    ]
    if policy.retry_for is not None:
        parts.append(f"gives up {humanize_delay(policy.retry_for)} after the first attempt")
    if policy.requeue_budget:
        parts.append(f"then requeued automatically up to {policy.requeue_budget}x")
    if policy.total_budget is not None:
        parts.append(f"budget {humanize_delay(policy.total_budget)}")
    return ", ".join(parts)


def render_schedule(policy: RetryPolicy) -> str:
    """The schedule as an aligned text table, ending with the give-up row."""
    rows = [_HEADER]
    rows += [
        (
            str(row.attempt),
            humanize_delay(row.nominal),
            humanize_delay(row.shortest),
            humanize_delay(row.longest),
            humanize_delay(row.cumulative_longest),
        )
        for row in policy.schedule()
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines.append(f"  attempt {policy.max_attempts} fails -> dead letter (exhausted)")
    if policy.retry_for is not None:
        lines.append(
            f"  or earlier: a retry that would start more than {humanize_delay(policy.retry_for)} "
            "after the first attempt -> dead letter (deadline)"
        )
    return "\n".join(lines)


def _classes(classes: tuple[type[BaseException], ...]) -> str:
    return ", ".join(f"{klass.__module__}.{klass.__qualname__}" for klass in classes) or "none listed"


def render_rules(policy: RetryPolicy) -> list[str]:
    """How the policy treats errors, one attempt's time limit and automatic requeues."""
    other = "fatal: dead at once" if policy.unknown_errors is ErrorKind.FATAL else "retryable"
    timeout = (
        humanize_delay(policy.timeout)
        if policy.timeout is not None
        else "none (a job's own timeout= may set one)"
    )
    budget = policy.requeue_budget
    return [
        f"  fatal errors:      {_classes(policy.fatal_errors)}; a FatalError always",
        f"  retryable errors:  {_classes(policy.retryable_errors)}; a RetryableError always",
        f"  other errors:      {other} (unknown_errors)",
        f"  timeout:           {timeout}",
        "  requeue budget:    "
        + (
            f"up to {count_of(budget, 'automatic requeue')} after it dies"
            if budget
            else "0 (dead letters wait for an operator)"
        ),
        f"  circuit breaker:   {_circuit(policy.circuit)}",
        f"  snoozes:           {_snoozes(policy)} (Snooze, CircuitOpen), then dead (snooze_budget)",
    ]


def _snoozes(policy: RetryPolicy) -> str:
    """The snooze budget: a count, a time (the delays added up), or both, the first spent ending it."""
    count = f"{policy.max_snoozes} a job"
    if policy.snooze_for is None:
        return count
    time = f"{humanize_delay(policy.snooze_for)} in all a job"
    return time if policy.max_snoozes == MAX_SNOOZES else f"{count} or {time}, the first spent"


def _circuit(breaker: CircuitBreaker | None) -> str:
    """One line for the policy's breaker (docs/outages.md)."""
    if breaker is None:
        return "none (a job's CircuitOpen still holds its task)"
    errors = f" of {_classes(breaker.errors)}" if breaker.errors else ""
    return (
        f"open after {count_of(breaker.failures, 'retryable failure')}{errors} within "
        f"{humanize_delay(breaker.window)}, for {humanize_delay(breaker.cooldown)} doubling to "
        f"{humanize_delay(breaker.max_cooldown)}; then {breaker.release_per_second:g} held jobs a second"
    )
