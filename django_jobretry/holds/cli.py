"""The holds on a terminal and to a scraper: `pause`, `resume`, `jobstatus`' Held section, the metrics.

`manage.py pause --queue Q | --task T [--reason ...] [--until ... | --for ...]`
holds work everywhere: no worker on any host claims a job of the paused
queue or task until `manage.py resume` (or the pause's end); jobs already
running finish. `manage.py resume --queue Q | --task T | --circuit TASK`
lets held work run again, now, and wakes idle workers of the released
queues at once; ``--circuit`` closes a task's circuit breaker by hand,
releasing every job it holds at the breaker's release rate (those parked at
its end and the one that raised ``CircuitOpen`` too), and says how many.
Exit code 1 when there was nothing to resume. The commands in
management/commands/ are these classes, where Django finds them.

argparse refuses a malformed value with the option's name and exit code 2,
before anything is stored; what only the hold service can judge (an
``until`` that has passed on the database clock, a name neither declared
nor on any job: usually a typo) it refuses the same way. ``--undeployed``
pauses such a name anyway, for a task or queue whose code is not deployed
yet (held from its first job).

`jobstatus` and the metrics read the report of holds/__init__.py, the
dashboard's too. Names and reasons come from rows anyone with database
access can write: every cell is made printable (display/__init__.py
``table``). The metrics' series exist only while something is held, so a
paused queue or an open breaker is an alert rule on the series' presence or
value (docs/metrics.md); prometheus_client, an optional extra, is imported
only by a scrape.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from django_jobretry.deadletters.cli_bulk import default_actor
from django_jobretry.display import table
from django_jobretry.holds import (
    CircuitLine,
    HoldsReport,
    PauseLine,
    breakers,
    held_by_pause,
    holds_report,
    pauses,
)
from django_jobretry.management.cli import DatabaseCommand, cancel_actor, duration
from django_jobretry.models.holds import REASON_MAX_LENGTH

if TYPE_CHECKING:
    from prometheus_client.core import Metric

#: What the command says instead of the Python keyword the service's message names.
UNDEPLOYED = "Add --undeployed to pause it before it is deployed."


def moment(text: str) -> datetime:
    """An ISO 8601 date or time (2026-12-24, 2026-12-24T08:00+01:00); naive: the current time zone."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date or time like 2026-12-24 or 2026-12-24T08:00+01:00"
        ) from None
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def reason(text: str) -> str:
    if len(text) > REASON_MAX_LENGTH:
        raise argparse.ArgumentTypeError(
            f"is {len(text)} characters long; at most {REASON_MAX_LENGTH} are kept"
        )
    return text


def add_target(parser: CommandParser, *, circuit: bool = False) -> None:
    """``--queue`` or ``--task`` (or, for a resume, ``--circuit``): exactly one."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--queue", metavar="QUEUE", help="a queue: every task's jobs on it")
    target.add_argument("--task", metavar="TASK", help="a task, by its registered name")
    if circuit:
        target.add_argument(
            "--circuit", metavar="TASK", help="close the circuit breaker of this task now, releasing its jobs"
        )
    parser.add_argument(
        "--actor", type=cancel_actor, help="who acts, recorded with the pause (default: the OS user)"
    )


class Pause(DatabaseCommand):
    help = "Pause a queue or a task on every worker: none of its jobs is claimed until it is resumed."

    def add_arguments(self, parser: CommandParser) -> None:
        add_target(parser)
        parser.add_argument(
            "--undeployed",
            action="store_true",
            help="pause it although no code declares it and no job has it: code not deployed yet "
            "(without this, such a name is refused as a likely typo)",
        )
        parser.add_argument("--reason", type=reason, default="", help="why, shown wherever the pause is")
        end = parser.add_mutually_exclusive_group()
        end.add_argument("--until", type=moment, help="the pause ends by itself at this date or time")
        end.add_argument(
            "--for",
            dest="for_",
            metavar="DURATION",
            type=duration,
            help="the pause ends by itself after 30m, 2h, 1d, ...",
        )

    def handle(self, *args: Any, queue: str | None, task: str | None, **options: Any) -> None:
        actor = options["actor"] or default_actor()
        until = options["until"] or options["for_"]
        try:
            created = pauses.pause(
                queue=queue,
                task=task,
                actor=actor,
                reason=options["reason"],
                until=until,
                undeployed=options["undeployed"],
            )
        except pauses.UnknownName as exc:
            raise CommandError(f"{exc.problem} {UNDEPLOYED}", returncode=2) from None
        except pauses.InvalidHold as exc:
            raise CommandError(str(exc), returncode=2) from None
        target = pauses.target(queue=queue, task=task)
        line = next(p for p in holds_report().pauses if (p.kind, p.name) == (target.kind, target.name))
        until_text = f" until {line.until.isoformat()}" if line.until else " until resumed"
        again = "" if created else " (it was paused already: who, why and until are updated)"
        self.stdout.write(f"{target} paused by {line.paused_by}{until_text}{again}")
        self.stdout.write(
            f"{held_by_pause(target.kind, target.name)} due job(s) of {target} held "
            "(ready and past their run time, as `jobstatus` counts them); jobs already running finish"
        )


class Resume(DatabaseCommand):
    help = "Resume a paused queue or task, or close a task's circuit breaker, on every worker."

    def add_arguments(self, parser: CommandParser) -> None:
        add_target(parser, circuit=True)

    def handle(
        self, *args: Any, queue: str | None, task: str | None, circuit: str | None, **options: Any
    ) -> None:
        actor = options["actor"] or default_actor()
        if circuit is not None:
            try:
                pauses.target(task=circuit)  # a name no task can have is a usage error, not a query
            except pauses.InvalidHold as exc:
                raise CommandError(str(exc), returncode=2) from None
            closed = breakers.close_by_hand(circuit, actor=actor)
            if closed is None:
                raise CommandError(f"the circuit of task {circuit!r} is not open", returncode=1)
            released = f"{closed.released} held job(s) released, {closed.rate:g} a second"
            self.stdout.write(f"circuit of task {circuit} closed by {actor}; {released}")
            return
        try:
            ended = pauses.resume(queue=queue, task=task, actor=actor)
        except pauses.InvalidHold as exc:
            raise CommandError(str(exc), returncode=2) from None
        target = pauses.target(queue=queue, task=task)
        if ended is None:
            raise CommandError(f"{target} is not paused", returncode=1)
        since = ended.paused_at.isoformat()
        self.stdout.write(f"{target} resumed by {actor} (paused by {ended.paused_by} since {since})")
        self.stdout.write(f"{ended.held} ready job(s) released")


# -- jobstatus' Held section ----------------------------------------------------------------------
def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def pause_json(line: PauseLine) -> dict[str, Any]:
    return {
        "kind": line.kind,
        "name": line.name,
        "paused_by": line.paused_by,
        "reason": line.reason,
        "paused_at": _time(line.paused_at),
        "until": _time(line.until),
        "held": line.held,
    }


def circuit_json(line: CircuitLine) -> dict[str, Any]:
    return {
        "task": line.task_name,
        "state": line.state,
        "opened_at": _time(line.opened_at),
        "open_until": _time(line.open_until),
        "opens": line.opens,
        "probe_job_id": line.probe_job_id,
        "reason": line.reason,
        "held": line.held,
    }


def as_json(report: HoldsReport) -> dict[str, Any]:
    """``pauses`` and ``circuits`` lists, empty when nothing is held."""
    return {
        "pauses": [pause_json(line) for line in report.pauses],
        "circuits": [circuit_json(line) for line in report.circuits],
    }


def status_lines(report: HoldsReport) -> list[str]:
    """The Held section: a row per pause ("paused by, why, until") and per breaker not closed, or none."""
    if not report.pauses and not report.circuits:
        return []
    rows = [
        (
            f"{line.kind} {line.name}",
            f"paused by {line.paused_by}" + (f" ({line.reason})" if line.reason else ""),
            "until " + (line.until.isoformat(timespec="seconds") if line.until else "resumed"),
            f"{line.held:,}",
        )
        for line in report.pauses
    ]
    rows += [
        (
            f"task {line.task_name}",
            f"circuit {'half-open' if line.state == 'half_open' else 'open'}: {line.reason}",
            (
                f"probe job {line.probe_job_id}"
                if line.state == "half_open"
                else f"until {line.open_until.isoformat(timespec='seconds') if line.open_until else '?'}"
                f" (opening {line.opens})"
            ),
            f"{line.held:,}",
        )
        for line in report.circuits
    ]
    title = f"Held: {len(report.pauses)} paused, {len(report.circuits)} circuit(s) open"
    return [title, *table(("what", "why", "until", "held jobs"), rows, {3})]


# -- the metrics --------------------------------------------------------------------------------
def collect() -> Iterator[Metric]:
    """``jobretry_paused``, ``jobretry_circuit_open`` and ``jobretry_held_jobs``."""
    from prometheus_client.core import GaugeMetricFamily  # the optional extra: only a scrape needs it

    paused = GaugeMetricFamily(
        "jobretry_paused",
        "1 for each queue or task an operator has paused (kind: queue or task).",
        labels=["kind", "name"],
    )
    circuit = GaugeMetricFamily(
        "jobretry_circuit_open",
        "1 for each task whose circuit breaker is open or half-open (state), with no series when closed.",
        labels=["task_name", "state"],
    )
    held = GaugeMetricFamily(
        "jobretry_held_jobs",
        "Ready jobs held by a pause (kind queue or task) or a breaker (kind circuit), by what holds them.",
        labels=["kind", "name"],
    )
    report = holds_report()
    for pause in report.pauses:
        paused.add_metric([pause.kind, pause.name], 1)
        held.add_metric([pause.kind, pause.name], pause.held)
    for line in report.circuits:
        circuit.add_metric([line.task_name, line.state], 1)
        held.add_metric(["circuit", line.task_name], line.held)
    yield from (paused, circuit, held)
