"""`manage.py deadletters import-django-q2`: django-q2's existing failures as dead letters.

Its options (exit codes: IMPORT_EPILOG), the run and its report; the reading
and mapping are in contrib/django_q2/importer.py, the insert in
deadletters/external.py.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError

from django_jobretry.deadletters.cli_bulk import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_PARTIAL, Progress
from django_jobretry.display import printable
from django_jobretry.management.cli import since

ACTION = "import-django-q2"
ADAPTER = "django_jobretry.contrib.django_q2"
#: Seconds between two progress lines when stderr is not a terminal.
PLAIN_EVERY = 5.0
#: Ids listed per category unless -v 2.
SHOWN = 20
ALL = f"(`deadletters -v 2 {ACTION}` shows all)"


IMPORT_EPILOG = """\
exit codes:
  0    done: every selected failure was imported, or skipped because it was
       imported before, already is a dead letter, or is still in django-q2's
       queue (so running it again imports 0 and exits 0)
  1    partial: some failures cannot be read here (no function path, a
       function or hook not of the project's apps, pickles that are not
       plain data, arguments too deep to sign, or a row the database
       refuses) and were not imported, each named; the rest were
  2    usage error (a bad --since): nothing changed
  4    failed: django-q2 or the adapter not installed, database unreachable,
       unexpected error (details with --traceback)
  130  interrupted (Ctrl-C): batches finished before the interrupt stay imported
--dry-run writes nothing and exits with the code the real run would have.
"""


def add_parser(actions: Any, formatter_class: type[argparse.HelpFormatter]) -> None:
    """The ``import-django-q2`` action (its run: ``run`` below)."""
    parser = actions.add_parser(
        ACTION,
        help="turn django-q2's existing failures into dead letters",
        formatter_class=formatter_class,
        epilog=IMPORT_EPILOG,
    )
    parser.description = (
        "Turn django-q2 Failure rows into dead letters (source django_q2) that can be requeued to "
        "django-q2 or discarded like any other. Each failure is imported once, however often this "
        "runs; the Failure rows are kept. Failures whose task is still in django-q2's queue are skipped."
    )
    parser.add_argument(
        "--since",
        type=since,
        metavar="WHEN",
        help="only failures that stopped after this: a duration back from now (7d, 12h) or a date "
        "or time (2025-01-31, 2025-01-31T08:00+01:00; without an offset: the current time zone)",
    )
    parser.add_argument(
        "--func",
        metavar="PATH",
        help="only this function path, e.g. shop.tasks.send_receipt",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be imported; write nothing")
    parser.add_argument("--progress", action="store_true", help="draw the progress bar even if not a TTY")


def require_adapter() -> None:
    """CommandError naming what to add when django-q2 or the adapter is not installed."""
    if not apps.is_installed("django_q"):
        raise CommandError(
            f'{ACTION} needs django-q2: pip install "django-jobretry[django-q2]" and add "django_q" '
            "to INSTALLED_APPS",
            returncode=EXIT_FAILED,
        )
    if not apps.is_installed(ADAPTER):
        raise CommandError(
            f'{ACTION} needs the django-q2 adapter: add "{ADAPTER}" to INSTALLED_APPS, after '
            '"django_q" and "django_jobretry" (its dead letters are requeued through it)',
            returncode=EXIT_FAILED,
        )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    require_adapter()
    from django_jobretry.contrib.django_q2 import importer

    verbose = options["verbosity"] >= 2
    show = _Progress(command, options)
    try:
        report = importer.import_failures(
            since=options["since"], func=options["func"], dry_run=options["dry_run"], progress=show
        )
    except KeyboardInterrupt as exc:
        show.close()
        report = exc.report  # type: ignore[attr-defined]
        _summary(command, report, dry_run=options["dry_run"], verbose=verbose)
        raise CommandError(
            f"interrupted after {report.read} of {report.total} failures read: finished batches stay "
            "imported; run it again to import the rest",
            returncode=EXIT_INTERRUPTED,
        ) from None
    show.close()
    _summary(command, report, dry_run=options["dry_run"], verbose=verbose)
    if report.unreadable:
        verb = "would not be" if options["dry_run"] else "were not"
        raise CommandError(
            f"{_failures(len(report.unreadable))} {verb} imported: they cannot be read here",
            returncode=EXIT_PARTIAL,
        )


class _Progress:
    """A bar on a terminal (or with --progress); otherwise a plain line every PLAIN_EVERY seconds."""

    def __init__(self, command: BaseCommand, options: dict[str, Any]) -> None:
        self.stderr = command.stderr
        self.quiet = options["verbosity"] == 0
        self.verb = "importable" if options["dry_run"] else "imported"
        self.bar: Progress | None = None
        if options["progress"] or self.stderr.isatty():
            self.bar = Progress(self.stderr, 0, "import", enabled=not self.quiet)
        self.clock: Callable[[], float] = options.get("clock") or time.monotonic
        self.last = self.clock()

    def __call__(self, report: Any) -> None:
        if self.bar is not None:
            self.bar.total = report.total
            self.bar.update(report.read)
        elif not self.quiet and (now := self.clock()) - self.last >= PLAIN_EVERY:
            self.last = now
            self.stderr.write(
                f"{ACTION}: {report.read}/{report.total} failures read, {len(report.imported)} {self.verb}",
                style_func=str,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _summary(command: BaseCommand, report: Any, *, dry_run: bool, verbose: bool) -> None:
    out = command.stdout
    shown = len(report.imported) if verbose else SHOWN
    if dry_run and report.imported:
        out.write("Would import:")
        for task_id in list(report.imported)[:shown]:
            out.write(f"  django-q2 task {task_id} ({printable(report.funcs[task_id], one_line=True)})")
        if len(report.imported) > shown:
            out.write(f"  ... and {len(report.imported) - shown} more {ALL}")
    elif verbose:
        for task_id, pk in report.imported.items():
            func = printable(report.funcs[task_id], one_line=True)
            out.write(f"imported django-q2 task {task_id} ({func}) as dead letter {pk}")
    head = "dry run: would import" if dry_run else "imported"
    lines = [f"{head} {len(report.imported)} of {_failures(report.read)} read as dead letters"]
    if report.already_imported:
        lines.append(f"{len(report.already_imported)} handled by an earlier import")
    if report.already_dead:
        lines.append(f"{len(report.already_dead)} already dead letters (the adapter gave up on them)")
    if report.queued:
        lines.append(
            f"{len(report.queued)} skipped, still in django-q2's queue (django-q2 or the adapter "
            f"delivers them again): {_ids(report.queued, verbose)}"
        )
    if report.unreadable:
        lines.append(f"{len(report.unreadable)} cannot be read here (see below)")
    out.write("; ".join(lines) + ("; nothing was changed" if dry_run else ""))
    for task_id, why in list(report.unreadable.items())[: None if verbose else SHOWN]:
        out.write(f"  not imported: django-q2 task {task_id}: {why}")
    if len(report.unreadable) > SHOWN and not verbose:
        out.write(
            f"  ... and {len(report.unreadable) - SHOWN} more (`deadletters -v 2 import-django-q2` shows all)"
        )


def _failures(count: int) -> str:
    return f"{count} django-q2 failure{'' if count == 1 else 's'}"


def _ids(ids: list[str], verbose: bool) -> str:
    shown = ids if verbose else ids[:SHOWN]
    return ", ".join(shown) + (f" and {len(ids) - len(shown)} more" if len(ids) > len(shown) else "")
