"""What every management command of ours shares: its base class, exit codes and value validators.

**A database it cannot reach** (PostgreSQL down, a wrong port or password, a
database that does not exist) ends a command with one line naming it (alias,
host, port, name) and the driver's reason, never forty lines of Django
internals: every command subclasses :class:`DatabaseCommand`. The test is the
connection itself, not the error's text: the error passed through an alias
whose connection (in the command's thread) was never opened or has been
lost. Any other database error is a bug, and keeps its traceback.

**A database that does not answer** (a partition) is bounded by the connect
options our processes get (conf/databases.py). The command says it is
waiting when its first round trip has no answer after :data:`NOTICE_SECONDS`,
and fails with the same one line once ``connect_timeout`` runs out.

**Ctrl-C** still raises a KeyboardInterrupt, so a command does what it does
with one: ``deadletters`` reports the batches it finished, a prompt counts as
"no", psycopg cancels the statement and ``atomic`` rolls back. All of these
talk to the database on the way out, and in a partition nothing answers. So
the first stop signal also starts a clock: a command not gone
:data:`GRACE_SECONDS` later, or at a second signal, is ended there, with its
one line and its exit code.

**Values** are checked by the argparse ``type=`` validators below, so every
command rejects a bad one with the same message naming what is allowed,
before anything touches the database; each command declares its own options.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from django.db import DatabaseError, InterfaceError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from django_jobretry.conf.database_engine import holding_aliases
from django_jobretry.deadletters.search import MAX_GROUPS
from django_jobretry.display import printable
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models.fingerprints import check_fingerprint
from django_jobretry.models.instants import is_text
from django_jobretry.models.job import ACTOR_MAX_LENGTH
from django_jobretry.validation import check_queue_name

#: The exit code: `deadletters`' "failed" (docs/commands.md), for every command.
EXIT_UNREACHABLE = 4
#: The shell's exit code for a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 128 + signal.SIGINT
#: How long a stopped command may take to finish what a KeyboardInterrupt makes it do.
GRACE_SECONDS = 2.0
#: How long the first round trip may take before the command says it is waiting.
NOTICE_SECONDS = 2.0

# --- values: argparse ``type=`` validators ------------------------------------------------------

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
#: The longest duration any option takes: a century, like the retention settings. Every command
#: adds it to or takes it from now (a cutoff, --since, --run-after), and within a century of
#: now that is a time Python, Django and PostgreSQL all hold; 99999999d would not be.
MAX_DURATION_DAYS = 36_500


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def page_size(text: str) -> int:
    value = integer(text)
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 1000")
    return value


def queue_name(text: str) -> str:
    try:
        return check_queue_name(text)
    except InvalidJob as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def text_value(text: str) -> str:
    """A name compared with stored text (--task, --error-class): one PostgreSQL takes, as argv may not be."""
    if not is_text(text):  # argv that is not UTF-8 holds lone surrogates; a NUL may come from a script
        raise argparse.ArgumentTypeError(f"{text!r} is not text PostgreSQL can take: not UTF-8, or a NUL")
    return text


def duration(text: str) -> timedelta:
    """The one parser of every duration option; argparse names the option in its error."""
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30d, 12h, 15m or 90s")
    number, unit = float(match.group(1)), match.group(2)
    # Checked on the number: a longer one would not even make a timedelta (OverflowError).
    if number * _UNIT_SECONDS[unit] > MAX_DURATION_DAYS * _UNIT_SECONDS["d"]:
        raise argparse.ArgumentTypeError(
            f"{text!r} is out of range: a duration is from 0s to {MAX_DURATION_DAYS}d (100 years)"
        )
    return timedelta(**{_UNITS[unit]: number})


_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*/\s*([sm])$")


def rate(text: str) -> float:
    """'10/s' or '30/m' -> items per second."""
    match = _RATE.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate like 10/s or 30/m")
    per_second = float(match.group(1)) / (60 if match.group(2) == "m" else 1)
    if per_second <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive rate")
    return per_second


def cursor(text: str) -> tuple[datetime, int]:
    """A cursor printed by `deadletters list`: '<dead_at ISO 8601>,<id>'."""
    stamp, _, pk = text.strip().rpartition(",")
    try:
        dead_at, last_id = datetime.fromisoformat(stamp), int(pk)
    except ValueError:
        dead_at, last_id = None, 0
    if dead_at is None or timezone.is_naive(dead_at) or last_id < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a cursor printed by `deadletters list`")
    return dead_at, last_id


def since(text: str) -> datetime:
    """A duration back from now (30d, 12h) or a date or time (2025-01-31, 2025-01-31T08:00+01:00)."""
    if _DURATION.match(text.strip()):  # a duration out of range says so, not "neither ... nor"
        return timezone.now() - duration(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a duration like 30d, 12h, 15m or 90s nor a date or time like "
            "2025-01-31 or 2025-01-31T08:00+01:00"
        ) from None
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def fingerprint(text: str) -> str:
    """``--fingerprint``: a failure group, 16 hex digits."""
    try:
        return check_fingerprint(text.strip().lower())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("fingerprint ")) from None


def group_count(text: str) -> int:
    """``groups --limit``: 1 to 500."""
    value = integer(text)
    if not 1 <= value <= MAX_GROUPS:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_GROUPS}")
    return value


def recent(text: str) -> timedelta | datetime:
    """``--since`` of `deadletters`: a duration (kept as one: measured on the database clock) or a time."""
    return duration(text) if _DURATION.match(text.strip()) else since(text)


def cancel_actor(text: str) -> str:
    """Who cancels: a name the cancel can record whole (jobs/recovery.py would cut it)."""
    if len(text) > ACTOR_MAX_LENGTH:
        raise argparse.ArgumentTypeError(
            f"is {len(text)} characters long; at most {ACTOR_MAX_LENGTH} characters are recorded"
        )
    return text


# --- a database that does not answer: say so -------------------------------------------------


def address(alias: str) -> str:
    """``host:port`` of DATABASES[alias], as libpq fills in what is not set."""
    settings = connections.settings[alias]
    return f"{settings.get('HOST') or 'localhost'}:{settings.get('PORT') or 5432}"


def notice(aliases: Sequence[str], seconds: float = NOTICE_SECONDS) -> str:
    """The line: which database the command waits for, and how to stop waiting."""
    where = ", ".join(f"{alias!r} at {address(alias)}" for alias in aliases)
    return f"waiting for the database {where}: no answer after {seconds:g}s yet (Ctrl-C stops) ..."


@contextlib.contextmanager
def announced_when_slow(
    aliases: Sequence[str], say: Callable[[str], object], seconds: float = NOTICE_SECONDS
) -> Iterator[None]:
    """Say :func:`notice` once if no query through ``aliases`` (in this thread) answered within ``seconds``.

    The watch is Django's ``execute_wrapper`` on this thread's connections:
    the connection is opened for the first query, so its first answer ends
    both waits. After that the wrapper only passes queries through.
    """
    if not aliases:
        yield
        return
    timer = threading.Timer(seconds, lambda: say(notice(aliases, seconds)))
    timer.daemon = True

    def first_answer(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        timer.cancel()
        return result

    with contextlib.ExitStack() as stack:
        for alias in aliases:
            stack.enter_context(connections[alias].execute_wrapper(first_answer))
        timer.start()
        try:
            yield
        finally:
            timer.cancel()


# --- a stop signal: out within GRACE_SECONDS -------------------------------------------------


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGINT, or SIGTERM for a starting worker): a KeyboardInterrupt that knows which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signal.Signals(signum)


@contextlib.contextmanager
def stop_signals_raise(
    signums: Sequence[signal.Signals],
    line: Callable[[signal.Signals], str],
    code: int,
    grace: float = GRACE_SECONDS,
) -> Iterator[None]:
    """While inside, each of ``signums`` raises :class:`Stopped`, and ends the process ``grace`` s later.

    Ended, the process leaves ``line(signal)`` on stderr and exits with
    ``code``; a second signal ends it at once. Main thread only (the only
    one Python gives signals to); the old handlers come back on the way out.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    first: list[signal.Signals] = []

    def end() -> None:
        # Straight to the file descriptor: the main thread may be stuck inside a write.
        with contextlib.suppress(OSError):
            os.write(2, f"{line(first[0])}\n".encode())
        os._exit(code)

    def stop(signum: int, frame: FrameType | None) -> None:
        if first:
            end()
        first.append(signal.Signals(signum))
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # the signal may interrupt a write
            sys.stdout.flush()
        clock = threading.Timer(grace, end)
        clock.daemon = True
        clock.start()
        raise Stopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# --- a database it cannot reach: one line ------------------------------------------------------


def _cut_off(wrapper: BaseDatabaseWrapper) -> bool:
    """Whether an error passed through this alias and left it without a connection (psycopg's ``closed``)."""
    raw = wrapper.connection
    return wrapper.errors_occurred and (raw is None or bool(getattr(raw, "closed", False)))


def _where(wrapper: BaseDatabaseWrapper) -> str:
    """Alias, host, port and database name; never the user or password."""
    settings = wrapper.settings_dict
    host = settings.get("HOST") or "localhost"
    port = settings.get("PORT") or "default port"
    return f"database {wrapper.alias!r} (host {host}, port {port}, name {settings.get('NAME')!r})"


class LostConnection(CommandError):
    """The database was reached, then the connection was cut (a restart, a terminated backend)."""


def unreachable(error: DatabaseError | InterfaceError) -> CommandError | None:
    """The one-line error for ``error`` when it came from a database this process cannot reach, else None."""
    cut_off = [wrapper for wrapper in connections.all(initialized_only=True) if _cut_off(wrapper)]
    if not cut_off:
        return None
    wrapper = cut_off[0]
    lines = str(error).strip().splitlines() or [type(error).__name__]
    never = wrapper.connection is None
    kind = CommandError if never else LostConnection
    verb = "could not reach" if never else "lost the connection to"
    return kind(
        f"{verb} {_where(wrapper)}: {printable(lines[0], one_line=True)}", returncode=EXIT_UNREACHABLE
    )


def runs_our_command(argv: Sequence[str]) -> bool:
    """Whether this process is `manage.py COMMAND` (or django-admin) for one of our commands.

    Also true in the process pool's children, which multiprocessing starts
    with their parent's ``sys.argv``.
    """
    ours = {path.stem for path in Path(__file__).with_name("commands").glob("[!_]*.py")}
    return len(argv) > 1 and argv[1] in ours


class DatabaseCommand(BaseCommand):
    """A command of ours: a database it cannot reach ends it with one clean error and exit code 4.

    Run from the command line, it says when its database keeps it waiting,
    and its ``stop_signals`` end it within a couple of seconds, whatever the
    database does: one line on stderr, exit code ``stopped_code``.
    """

    #: False for a command that never queries (showpolicies): nothing to wait for.
    uses_database = True
    stop_signals: tuple[signal.Signals, ...] = (signal.SIGINT,)
    stopped_code = EXIT_INTERRUPTED

    def run_from_argv(self, argv: list[str]) -> None:
        try:
            with stop_signals_raise(self.stop_signals, self.stopped_line, self.stopped_code):
                super().run_from_argv(argv)
        except Stopped as stop:
            signal.signal(stop.signum, signal.SIG_IGN)  # the one line, whatever is pressed meanwhile
            self.stderr.write(self.stopped_line(stop.signum), lambda text: text)
            sys.exit(self.stopped_code)

    def stopped_line(self, signum: signal.Signals) -> str:
        """The one line a command stopped by ``signum`` leaves."""
        return f"stopped by {signum.name}" + (" (Ctrl-C)" if signum == signal.SIGINT else "")

    def execute(self, *args: Any, **options: Any) -> str | None:
        stderr = OutputWrapper(options["stderr"]) if options.get("stderr") else self.stderr
        aliases = holding_aliases() if self.uses_database else []
        try:
            with announced_when_slow(aliases, lambda line: stderr.write(line, lambda text: text)):
                return super().execute(*args, **options)
        except (DatabaseError, InterfaceError) as error:
            clean = unreachable(error)
            if clean is None:
                raise
            raise clean from error
