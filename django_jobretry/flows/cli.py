"""`manage.py flows list | show ID | cancel ID`: the workflows from a terminal.

``list`` pages the newest flows (``--state`` one state); ``show`` prints a
flow and each of its steps: role, task, state, its current job or the dead
letter it is, and for a dead step what its requeue would resume (flows/detail.py).
``cancel`` goes through flows/service.py, as the admin does, and records the
OS user (or ``--actor``). `jobstatus` has the flows' counts and the blocked
ones (flows/status.py). Django finds the command in
management/commands/flows.py, which imports :class:`Command` from here.

Flow and step names come from rows anyone with database access can write:
every cell is made printable (display.py ``table``); ``--json`` keeps them
as stored, ASCII-only as `jobstatus` writes it. Step arguments are never shown.

Exit codes: 0 done; 1 no flow has the id (show, cancel) or the flow has
ended already (cancel); 2 usage error; 4 the database cannot be reached.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from django_jobretry.deadletters.cli import HelpFormatter, accept_django_options
from django_jobretry.deadletters.cli_bulk import EXIT_PARTIAL, default_actor
from django_jobretry.display import count_of, printable, table
from django_jobretry.flows import detail, service
from django_jobretry.flows.detail import FlowDetail, StepLine
from django_jobretry.management.cli import DatabaseCommand, cancel_actor, page_size, positive_int
from django_jobretry.models import Flow, FlowState

EPILOG = """\
exit codes:
  0    done
  1    no flow has this id (show, cancel), or the flow has ended already (cancel)
  2    usage error: a bad id, state or option
  4    the database cannot be reached
"""


class Command(DatabaseCommand):
    help = "List the workflows, show one with its steps and dead letters, or cancel one."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EPILOG)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{list,show,cancel}")
        listing = actions.add_parser("list", help="the newest flows first", formatter_class=HelpFormatter)
        listing.add_argument("--state", choices=FlowState.values, help="only the flows in this state")
        listing.add_argument("--limit", type=page_size, default=50, help="flows shown, 1-1000 (default 50)")
        show = actions.add_parser(
            "show", help="a flow, its steps, and what a requeue would resume", formatter_class=HelpFormatter
        )
        cancel = actions.add_parser(
            "cancel",
            help="cancel a running or blocked flow: none of its steps starts again",
            formatter_class=HelpFormatter,
        )
        for subparser in (show, cancel):
            subparser.add_argument(
                "id", type=positive_int, metavar="ID", help="the flow's id (see `flows list`)"
            )
        for subparser in (listing, show):
            subparser.add_argument("--json", action="store_true", help="machine-readable output")
        cancel.add_argument(
            "--actor", type=cancel_actor, help="who cancels, recorded with the flow (default: the OS user)"
        )
        accept_django_options(actions)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "list":
            self.list_flows(options["state"], options["limit"], as_json=options["json"])
        elif action == "show":
            self.show(options["id"], as_json=options["json"])
        else:
            self.cancel(options["id"], options["actor"] or default_actor())

    def write_json(self, value: object) -> None:
        self.stdout.write(json.dumps(value, indent=2, ensure_ascii=True))

    def list_flows(self, state: str | None, limit: int, *, as_json: bool) -> None:
        flows = detail.page(state, limit)
        if as_json:
            self.write_json({"flows": [flow_json(flow) for flow in flows]})
        elif not flows:
            self.stdout.write(f"No {state} flows." if state else "No flows.")
        else:
            self.stdout.write("\n".join(list_lines(flows)))

    def show(self, flow_id: int, *, as_json: bool) -> None:
        found = detail.detail(flow_id)
        if found is None:
            raise CommandError(
                f"no flow has id {flow_id} (see `manage.py flows list`)", returncode=EXIT_PARTIAL
            )
        if as_json:
            self.write_json(
                {"flow": flow_json(found.flow), "steps": [step_json(line) for line in found.steps]}
            )
        else:
            self.stdout.write("\n".join(show_lines(found)))

    def cancel(self, flow_id: int, actor: str) -> None:
        done = service.cancel_flow(flow_id, actor)
        if done is None:
            flow = Flow.objects.filter(pk=flow_id).first()
            if flow is None:
                raise CommandError(f"no flow has id {flow_id}: nothing cancelled", returncode=EXIT_PARTIAL)
            raise CommandError(
                printable(
                    f"flow {flow_id} ({flow.name}) has ended already ({flow.state}): nothing cancelled"
                ),
                returncode=EXIT_PARTIAL,
            )
        self.stdout.write(
            printable(
                f"flow {flow_id} cancelled by {actor}: {count_of(done.cancelled, 'waiting or ready step')} "
                f"cancelled, {count_of(done.stopping, 'running step')} asked to stop "
                "(its dead letters stay: requeue or discard them)"
            )
        )


# -- how flows read on a terminal and in JSON -----------------------------------------------------


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _clock(value: datetime | None) -> str:
    return "-" if value is None else timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def flow_json(flow: Flow) -> dict[str, Any]:
    return {
        "id": flow.pk,
        "name": flow.name,
        "state": flow.state,
        "steps": flow.steps,
        "open_steps": flow.open_steps,
        "blocked_by": flow.blocked_by,
        "blocked_at": _time(flow.blocked_at),
        "created_at": _time(flow.created_at),
        "finished_at": _time(flow.finished_at),
        "cancelled_by": flow.cancelled_by,
    }


def step_json(line: StepLine) -> dict[str, Any]:
    step = line.step
    return {
        "name": step.name,
        "role": step.role,
        "task": step.task_name,
        "state": step.state,
        "waiting_on": step.waiting_on,
        "job_id": line.job_id,
        "job_status": line.job_status,
        "dead_letter_id": line.dead_letter_id,
        "requeue_resumes": line.resumes,
        "also_behind_other_dead_letters": line.also_behind_others,
        "ended_at": _time(step.ended_at),
    }


def state_cell(flow: Flow) -> str:
    if flow.state == FlowState.BLOCKED and flow.blocked_by is not None:
        return f"blocked by dead letter {flow.blocked_by}"
    if flow.state == FlowState.CANCELLED and flow.cancelled_by:
        return f"cancelled by {flow.cancelled_by}"
    return str(flow.state)


def list_lines(flows: list[Flow]) -> list[str]:
    header = ("flow", "name", "state", "steps done", "created", "finished")
    rows = [
        (
            str(flow.pk),
            flow.name,
            state_cell(flow),
            f"{flow.steps - flow.open_steps}/{flow.steps}",
            _clock(flow.created_at),
            _clock(flow.finished_at),
        )
        for flow in flows
    ]
    return table(header, rows, {0, 3})


def where_cell(line: StepLine) -> str:
    """The step's job, or the dead letter it is now, or "-" (ended, or cancelled before it ran)."""
    if line.dead_letter_id is not None:
        return f"dead letter {line.dead_letter_id}"
    if line.job_id is not None:
        return f"job {line.job_id} ({line.job_status})"
    return "-"


def show_lines(found: FlowDetail) -> list[str]:
    flow = found.flow
    lines = [
        printable(f"Flow {flow.pk}: {flow.name}", one_line=True),
        printable(f"  state:    {state_cell(flow)}", one_line=True)
        + (f" since {_clock(flow.blocked_at)}" if flow.blocked_at else ""),
        f"  steps:    {flow.steps - flow.open_steps} of {flow.steps} done",
        f"  created:  {_clock(flow.created_at)}",
        f"  finished: {_clock(flow.finished_at)}",
        "",
    ]
    rows = [
        (line.step.name, line.step.role, line.step.task_name, line.step.state, where_cell(line))
        for line in found.steps
    ]
    lines += table(("step", "role", "task", "state", "job"), rows, ())
    for line in found.steps:
        if line.step.state != "dead":
            continue
        text = f"A requeue of dead letter {line.dead_letter_id} runs {line.step.name} again"
        if line.resumes:
            text += f", then the steps waiting for it: {', '.join(line.resumes)}"
        if line.also_behind_others:
            text += f"; waiting for another dead letter too: {', '.join(line.also_behind_others)}"
        lines.append(printable(text, one_line=True))
    return lines
