"""The bulk actions of `manage.py deadletters`: requeue and discard, by id or --all, paced.

Every change goes through the dead-letter service (deadletters/service.py,
guarded compare-and-swap): a dead letter someone else handled meanwhile is
reported, never silently skipped. A run is split in batches (BATCH, or
smaller when --rate paces it), each a service call: the unit of progress and
of what Ctrl-C loses. --dry-run predicts the same outcome without locking.

A discard of a flow step's dead letter cancels the steps waiting on it
(flows/service.py ``cancelled_by_discard``): both the discard and its dry
run name them, by flow, as the admin's confirmation does.
"""

from __future__ import annotations

import getpass
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from django.db.models import QuerySet

from django_jobretry.deadletters import cli_lines, service
from django_jobretry.flows.service import cancelled_by_discard
from django_jobretry.models import DeadLetter, FlowStep

#: The command's exit codes (cli.py EPILOG); the other operator commands use them too.
EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3
EXIT_FAILED = 4
EXIT_INTERRUPTED = 130
#: Dead letters acted on per service call when unpaced: the unit of progress and of Ctrl-C loss.
BATCH = 100
#: Dry runs list this many items unless -v 2.
DRY_RUN_SHOWN = 50


class Terminal(Protocol):
    """What the confirmation prompt needs from stdin."""

    def isatty(self) -> bool: ...

    def readline(self) -> str: ...


def default_actor() -> str:
    """The OS user running the command, recorded as the actor (of a requeue, a pause, a cancel)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry, e.g. in a container
        return "unknown-os-user"


class BulkActions(BaseCommand):
    """The requeue and discard actions of the command (deadletters/cli.py ``Command``)."""

    options: dict[str, Any]
    #: Of the dead letters discarded: each flow step's flow and the waiting steps its discard cancelled.
    cancels: dict[int, tuple[int, list[str]]]

    def selection(self) -> QuerySet[DeadLetter]:
        """The dead letters the filters select (``--all``), newest dead first."""
        return cli_lines.select(self.options)

    def act(self, action: str) -> None:
        options = self.options
        ids: list[int] = list(dict.fromkeys(options["ids"]))
        filters = [f"--{n.replace('_', '-')}" for n in cli_lines.FILTERS if options[n] is not None]
        if ids and options["all"]:
            raise CommandError("give dead letter ids or --all, not both", returncode=EXIT_USAGE)
        if ids and filters:
            raise CommandError(
                f"{', '.join(filters)} select dead letters for --all: not with ids", returncode=EXIT_USAGE
            )
        if not ids and not options["all"]:
            raise CommandError(
                f"name the dead letters to {action} by id, or pass --all to {action} every dead letter "
                "matching the filters (see `deadletters list`)",
                returncode=EXIT_USAGE,
            )
        if options["all"]:
            ids = sorted(self.selection().values_list("pk", flat=True))
            if not ids:
                raise CommandError(
                    f"no dead letter matches the filters: nothing to {action}", returncode=EXIT_NOTHING
                )
        if options["dry_run"]:
            self.dry_run(action, ids)
            return
        if (options["all"] or (action == "discard" and len(ids) > 1)) and not options["yes"]:
            self.confirm(action, len(ids))
        self.report(action, ids, self.run(action, ids))

    def confirm(self, action: str, count: int) -> None:
        question = f"{action.capitalize()} {_count(count)}?"
        stdin: Terminal = self.options.get("stdin") or sys.stdin
        if not stdin.isatty():
            raise CommandError(
                f"refusing to {action} {_count(count)} without confirmation: stdin is not a terminal. "
                "Pass --yes to confirm in a script, or --dry-run to see what would happen.",
                returncode=EXIT_USAGE,
            )
        self.stderr.write(f"{question} [y/N] ", style_func=str, ending="")
        self.stderr.flush()
        try:
            answer = stdin.readline()
        except KeyboardInterrupt:
            answer = ""
        if answer.strip().lower() not in {"y", "yes"}:
            raise CommandError("not confirmed: nothing was changed", returncode=EXIT_USAGE)

    def run(self, action: str, ids: list[int]) -> service.BulkResult:
        options = self.options
        actor = options["actor"] or default_actor()
        pacer = Pacer(
            options.get("rate"),
            clock=options.get("clock") or time.monotonic,
            sleep=options.get("sleep") or time.sleep,
        )
        size = pacer.batch_size(BATCH)
        show_bar = len(ids) > 1 and (options["progress"] or self.stderr.isatty())
        progress = Progress(self.stderr, len(ids), action, enabled=show_bar)
        total = service.BulkResult()
        self.cancels = {}
        try:
            for start in range(0, len(ids), size):
                batch = ids[start : start + size]
                pacer.wait(len(batch))
                if action == "requeue":
                    part = service.requeue_many(batch, run_after=options["run_after"], actor=actor)
                else:
                    # Read just before the batch's discard, which decides again in its transaction.
                    cancels = flow_cancels(batch)
                    part = service.discard_many(batch, actor=actor)
                    self.cancels.update((pk, cancels[pk]) for pk in part.done if pk in cancels)
                total.extend(part)
                progress.update(start + len(batch))
        except KeyboardInterrupt:
            progress.close()
            self.report(action, ids, total, interrupted=True)
        progress.close()
        return total

    def report(
        self, action: str, ids: list[int], result: service.BulkResult, *, interrupted: bool = False
    ) -> None:
        past = f"{action}d" if action.endswith("e") else f"{action}ed"
        if not self.options["all"] or self.options["verbosity"] >= 2:
            jobs = dict(zip(result.done, result.jobs, strict=False))
            for pk in result.done:
                job = f" as job {jobs[pk].pk}" if pk in jobs else ""
                self.stdout.write(f"{past} dead letter {pk}{job}{_cancelled(self.cancels.get(pk))}")
        lines = [f"{past} {len(result.done)} of {_count(len(ids))}"]
        if cancelled := sum(len(names) for _, names in self.cancels.values()):
            lines.append(f"cancelled {_steps(cancelled)} waiting on them")
        if result.already_handled:
            lines.append(
                f"already handled by someone else (or never existed): {_ids(result.already_handled)}"
            )
        if result.conflicts:
            lines.append(f"not requeued, another job holds the same unique_key: {_ids(result.conflicts)}")
        self.stdout.write("; ".join(lines))
        if interrupted:
            raise CommandError(
                f"interrupted after {len(result.done)} of {len(ids)}: finished batches stay {past}; "
                "the batch in flight may or may not have completed (see `deadletters list`)",
                returncode=EXIT_INTERRUPTED,
            )
        if result.already_handled or result.conflicts:
            missed = len(result.already_handled) + len(result.conflicts)
            raise CommandError(f"{missed} of {_count(len(ids))} not {past}", returncode=EXIT_PARTIAL)

    def dry_run(self, action: str, ids: list[int]) -> None:
        found = DeadLetter.objects.in_bulk(ids)
        missing = [pk for pk in ids if pk not in found]
        conflicts = (
            service.predicted_conflicts(found[pk] for pk in ids if pk in found)
            if action == "requeue"
            else set()
        )
        acting = [found[pk] for pk in ids if pk in found and pk not in conflicts]
        limit = len(acting) if self.options["verbosity"] >= 2 else DRY_RUN_SHOWN
        rows = [cli_lines.list_row(dead) for dead in acting[:limit]]
        if rows:
            self.stdout.write(f"Would {action}:")
            for line in cli_lines.table(cli_lines.LIST_HEADERS, rows, cli_lines.LIST_CAPS):
                self.stdout.write(f"  {line}")
        if len(acting) > limit:
            self.stdout.write(
                f"  ... and {len(acting) - limit} more (`deadletters -v 2 {action} ...` shows all)"
            )
        cancels = flow_cancels([dead.pk for dead in acting]) if action == "discard" else {}
        for pk, (flow, names) in list(cancels.items())[:limit]:
            self.stdout.write(f"  dead letter {pk} would cancel, in flow {flow}: {', '.join(names)}")
        lines = [f"dry run: would {action} {_count(len(acting))}"]
        if cancels:
            lines.append(
                f"would cancel {_steps(sum(len(names) for _, names in cancels.values()))} waiting on them"
            )
        if missing:
            lines.append(f"already handled (or never existed): {_ids(missing)}")
        if conflicts:
            lines.append(
                f"would not requeue, another job holds the same unique_key: {_ids(sorted(conflicts))}"
            )
        self.stdout.write("; ".join(lines) + "; nothing was changed")
        if missing or conflicts:
            raise CommandError(
                f"{len(missing) + len(conflicts)} would not be {action}d", returncode=EXIT_PARTIAL
            )


def flow_cancels(ids: list[int]) -> dict[int, tuple[int, list[str]]]:
    """Of ``ids``, the flow steps' dead letters whose discard cancels steps: each one's flow, the names."""
    found = {pk: names for pk, names in cancelled_by_discard(ids).items() if names}
    flows = dict(
        FlowStep.objects.filter(dead_letter_id__in=list(found)).values_list("dead_letter_id", "flow_id")
    )
    return {pk: (flows[pk], names) for pk, names in sorted(found.items()) if pk in flows}


def _cancelled(cancels: tuple[int, list[str]] | None) -> str:
    return "" if cancels is None else f"; cancelled, in flow {cancels[0]}: {', '.join(cancels[1])}"


def _steps(count: int) -> str:
    return f"{count} flow step{'' if count == 1 else 's'}"


def _count(count: int) -> str:
    return f"{count} dead letter{'' if count == 1 else 's'}"


def _ids(ids: list[int], shown: int = 20) -> str:
    text = ", ".join(str(pk) for pk in ids[:shown])
    return text + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


class Pacer:
    """Spaces batches so that at most ``per_second`` items start per second.

    ``clock`` and ``sleep`` are injectable: tests count the sleeps instead of timing them.
    """

    def __init__(
        self,
        per_second: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.per_second, self.clock, self.sleep = per_second, clock, sleep
        self._next: float | None = None

    def batch_size(self, unpaced: int) -> int:
        """Unpaced: ``unpaced``; paced: about ten small batches a second, at least one item each."""
        return unpaced if self.per_second is None else max(1, min(unpaced, int(self.per_second / 10)))

    def wait(self, count: int) -> None:
        """Call before acting on ``count`` items: sleeps until they are due."""
        if self.per_second is None:
            return
        now = self.clock()
        start = now if self._next is None else max(self._next, now)
        if start > now:
            self.sleep(start - now)
        self._next = start + count / self.per_second


class Progress:
    """A one-line text bar redrawn in place on stderr: `requeue [#####-----] 50/100`."""

    WIDTH = 30

    def __init__(self, stream: OutputWrapper, total: int, label: str, *, enabled: bool) -> None:
        self.stream, self.total, self.label, self.enabled = stream, total, label, enabled
        self._drawn = False

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        filled = self.WIDTH * done // max(self.total, 1)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total}", style_func=str, ending="")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("", style_func=str)
            self._drawn = False
