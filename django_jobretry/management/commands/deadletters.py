"""`manage.py deadletters list|groups|show|requeue|discard|repair|import-django-q2`: the operator's tool.

Every change goes through django_jobretry.deadletters (guarded compare-and-swap):
a dead letter someone else handled meanwhile is reported, never silently
skipped. The exit codes are part of the interface: see management/deadletter_arguments.py EPILOG.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from django.core.management.base import CommandError, CommandParser, SystemCheckError
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet

from django_jobretry import deadletters as service
from django_jobretry.management import deadletter_cli as cli
from django_jobretry.management import deadletter_groups, deadletter_repair, filter_hints, import_django_q2
from django_jobretry.management.cli import DatabaseCommand
from django_jobretry.management.deadletter_arguments import (
    EPILOG,
    HelpFormatter,
    accept_django_options,
    add_deadletters_arguments,
    read_options,
)
from django_jobretry.models import DeadLetter

#: Dead letters acted on per service call when unpaced: the unit of progress and of Ctrl-C loss.
BATCH = 100
#: Dry runs list this many items unless -v 2.
DRY_RUN_SHOWN = 50


class Command(DatabaseCommand):
    help = "List, inspect, requeue or discard dead letters: jobs that will not be retried again."
    stealth_options = ("stdin", "clock", "sleep")

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EPILOG)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        accept_django_options(add_deadletters_arguments(parser))

    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            return super().execute(*args, **options)
        except SystemCheckError as exc:  # 1 would read as "partial"
            exc.returncode = cli.EXIT_FAILED
            raise
        except CommandError:
            raise
        except Exception as exc:
            raise CommandError(
                f"failed: {exc!r} (rerun with --traceback)", returncode=cli.EXIT_FAILED
            ) from exc

    def handle(self, *args: Any, **options: Any) -> None:
        read_options(options)
        self.options = options
        action = options["action"]
        if action == "list":
            self.list_page()
        elif action == "groups":
            deadletter_groups.run(self, options)
        elif action == "show":
            self.show_ids(options["ids"])
        elif action == "repair":
            deadletter_repair.run(self, options, confirm=self.confirm)
        elif action == import_django_q2.ACTION:
            import_django_q2.run(self, options)
        else:
            self.act(action)

    def selection(self) -> QuerySet[DeadLetter]:
        return cli.select(self.options)

    def list_page(self) -> None:
        page = service.page_of(self.selection(), limit=self.options["limit"], after=self.options["after"])
        cursor = cli.format_cursor(page.next_cursor) if page.next_cursor else None
        if self.options["json"]:
            out = {"items": [cli.summary(dead) for dead in page.items], "next_cursor": cursor}
            self.stdout.write(json.dumps(out, cls=DjangoJSONEncoder, indent=2))
            return
        if not page.items:
            self.stdout.write("No dead letters match.")
            near = filter_hints.hint(task=self.options["task"], queue=self.options["queue"])
            if near and self.options["after"] is None:
                self.stdout.write(near)
        else:
            for line in cli.table(cli.LIST_HEADERS, [cli.list_row(d) for d in page.items], cli.LIST_CAPS):
                self.stdout.write(line)
        if cursor:
            self.stdout.write(f"More dead letters: repeat with the same filters and --after {cursor}")

    def show_ids(self, ids: list[int]) -> None:
        found = DeadLetter.objects.in_bulk(ids)
        missing = [pk for pk in dict.fromkeys(ids) if pk not in found]
        shown = [found[pk] for pk in dict.fromkeys(ids) if pk in found]
        if self.options["json"]:
            out = {"dead_letters": [cli.detail(dead) for dead in shown], "missing": missing}
            self.stdout.write(json.dumps(out, cls=DjangoJSONEncoder, indent=2))
        else:
            for index, dead in enumerate(shown):
                if index:
                    self.stdout.write("")
                for line in cli.show_lines(dead):
                    self.stdout.write(line)
        if missing:
            raise CommandError(
                f"not dead letters (already requeued or discarded, or never existed): {_ids(missing)}",
                returncode=cli.EXIT_PARTIAL,
            )

    def act(self, action: str) -> None:
        options = self.options
        ids: list[int] = list(dict.fromkeys(options["ids"]))
        filters = [f"--{n.replace('_', '-')}" for n in cli.FILTERS if options[n] is not None]
        if ids and options["all"]:
            raise CommandError("give dead letter ids or --all, not both", returncode=cli.EXIT_USAGE)
        if ids and filters:
            raise CommandError(
                f"{', '.join(filters)} select dead letters for --all: not with ids", returncode=cli.EXIT_USAGE
            )
        if not ids and not options["all"]:
            raise CommandError(
                f"name the dead letters to {action} by id, or pass --all to {action} every dead letter "
                "matching the filters (see `deadletters list`)",
                returncode=cli.EXIT_USAGE,
            )
        if options["all"]:
            ids = sorted(self.selection().values_list("pk", flat=True))
            if not ids:
                raise CommandError(
                    f"no dead letter matches the filters: nothing to {action}", returncode=cli.EXIT_NOTHING
                )
        if options["dry_run"]:
            self.dry_run(action, ids)
            return
        if (options["all"] or (action == "discard" and len(ids) > 1)) and not options["yes"]:
            self.confirm(action, len(ids))
        self.report(action, ids, self.run(action, ids))

    def confirm(self, action: str, count: int) -> None:
        question = f"{action.capitalize()} {_count(count)}?"
        stdin: cli.Terminal = self.options.get("stdin") or sys.stdin
        if not stdin.isatty():
            raise CommandError(
                f"refusing to {action} {_count(count)} without confirmation: stdin is not a terminal. "
                "Pass --yes to confirm in a script, or --dry-run to see what would happen.",
                returncode=cli.EXIT_USAGE,
            )
        self.stderr.write(f"{question} [y/N] ", style_func=str, ending="")
        self.stderr.flush()
        try:
            answer = stdin.readline()
        except KeyboardInterrupt:
            answer = ""
        if answer.strip().lower() not in {"y", "yes"}:
            raise CommandError("not confirmed: nothing was changed", returncode=cli.EXIT_USAGE)

    def run(self, action: str, ids: list[int]) -> service.BulkResult:
        options = self.options
        actor = options["actor"] or cli.default_actor()
        pacer = cli.Pacer(
            options.get("rate"),
            clock=options.get("clock") or time.monotonic,
            sleep=options.get("sleep") or time.sleep,
        )
        size = pacer.batch_size(BATCH)
        show_bar = len(ids) > 1 and (options["progress"] or self.stderr.isatty())
        progress = cli.Progress(self.stderr, len(ids), action, enabled=show_bar)
        total = service.BulkResult()
        try:
            for start in range(0, len(ids), size):
                batch = ids[start : start + size]
                pacer.wait(len(batch))
                if action == "requeue":
                    part = service.requeue_many(batch, run_after=options["run_after"], actor=actor)
                else:
                    part = service.discard_many(batch, actor=actor)
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
                self.stdout.write(f"{past} dead letter {pk}{job}")
        lines = [f"{past} {len(result.done)} of {_count(len(ids))}"]
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
                returncode=cli.EXIT_INTERRUPTED,
            )
        if result.already_handled or result.conflicts:
            missed = len(result.already_handled) + len(result.conflicts)
            raise CommandError(f"{missed} of {_count(len(ids))} not {past}", returncode=cli.EXIT_PARTIAL)

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
        rows = [cli.list_row(dead) for dead in acting[:limit]]
        if rows:
            self.stdout.write(f"Would {action}:")
            for line in cli.table(cli.LIST_HEADERS, rows, cli.LIST_CAPS):
                self.stdout.write(f"  {line}")
        if len(acting) > limit:
            self.stdout.write(
                f"  ... and {len(acting) - limit} more (`deadletters -v 2 {action} ...` shows all)"
            )
        lines = [f"dry run: would {action} {_count(len(acting))}"]
        if missing:
            lines.append(f"already handled (or never existed): {_ids(missing)}")
        if conflicts:
            lines.append(
                f"would not requeue, another job holds the same unique_key: {_ids(sorted(conflicts))}"
            )
        self.stdout.write("; ".join(lines) + "; nothing was changed")
        if missing or conflicts:
            raise CommandError(
                f"{len(missing) + len(conflicts)} would not be {action}d", returncode=cli.EXIT_PARTIAL
            )


def _count(count: int) -> str:
    return f"{count} dead letter{'' if count == 1 else 's'}"


def _ids(ids: list[int], shown: int = 20) -> str:
    text = ", ".join(str(pk) for pk in ids[:shown])
    return text + (f" and {len(ids) - shown} more" if len(ids) > shown else "")
