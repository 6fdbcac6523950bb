"""The dead-letter admin on a large table: the first page's plan, and how long each page takes.

    make bench BENCH_DEADLETTER_ARGS="--repeat 9"    # embedded PostgreSQL, throwaway
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/deadletters.py

Creates a scratch database next to DATABASE_URL's (the role needs CREATEDB),
migrates it, and fills the dead-letter table with 1,000,000 rows using
``INSERT ... SELECT generate_series`` (several queues, tasks and reasons,
``dead_at`` spread over 90 days, a one-entry attempt history), then runs
``VACUUM ANALYZE`` so the table looks like one that has been there a while.
It also writes a week of status samples, one a minute, as running workers
leave them for the dashboard's charts, and times the statement a worker's
heartbeat runs to take one. With ``--succeeded N`` the jobs table also gets N
succeeded jobs, finished over the last 7 days, for the dashboard's
"succeeded in the last hour" walk (issue 11: the dashboard on 10^6 jobs).

Then, as a superuser logged in through ``django.test.Client`` (DEBUG off, one
database connection kept across requests, as the test client does):

* the statements the changelist's first page runs are captured with
  ``CaptureQueriesContext``, and each one that reads the dead-letter table is
  run again under ``EXPLAIN (ANALYZE, BUFFERS)``; the page's own SELECT is
  printed in full. Exits 1 unless that plan is an index scan of
  ``jobretry_dead_newest`` with no sequential scan and no sort;
* each page (list unfiltered, filtered, paged, searched; a detail page; the
  dashboard) is requested once to warm up, then ``--repeat`` times; the table
  gives the median, fastest and slowest whole request, the database time of
  the median run, and how many statements it sent.

The scratch database is dropped at the end, also after an error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = "bench.settings"
NEWEST_INDEX = "jobretry_dead_newest"
#: What Django logs for a transaction's start and end, which no execute() sends.
TRANSACTION_CONTROL = frozenset({"BEGIN", "COMMIT", "ROLLBACK"})
#: Slower than this, the page's statements are listed after the table.
SLOW_MS = 300.0

#: queue, share of the rows, policy, max_attempts, tasks (equally likely within the queue).
QUEUES: tuple[tuple[str, float, str, int, tuple[str, ...]], ...] = (
    (
        "default",
        0.55,
        "default",
        20,
        ("shop.jobs.sync_inventory", "shop.jobs.charge_card", "shop.jobs.rebuild_search_index"),
    ),
    ("emails", 0.25, "emails", 8, ("shop.jobs.send_receipt", "shop.jobs.send_newsletter")),
    ("webhooks", 0.149, "default", 20, ("integrations.jobs.deliver_webhook",)),
    ("reports", 0.05, "default", 20, ("reports.jobs.monthly_export", "reports.jobs.daily_digest")),
    ("billing", 0.001, "default", 20, ("billing.jobs.reconcile_ledger",)),
)
#: reason, share, how the last attempt ended, error kind, error class, message.
REASONS: tuple[tuple[str, float, str, str, str, str], ...] = (
    (
        "exhausted",
        0.60,
        "error",
        "retryable",
        "requests.exceptions.ConnectionError",
        "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v2/items",
    ),
    (
        "fatal",
        0.25,
        "fatal",
        "fatal",
        "example_project.shop.errors.InvalidAddress",
        "invalid e-mail address: 'customer@'",
    ),
    ("deadline", 0.10, "error", "retryable", "TimeoutError", "The read operation timed out"),
    ("lease_expired", 0.05, "lease_expired", "retryable", "", "lease expired: the worker stopped renewing"),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="dead letters (default %(default)s)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="timed requests per page, after one warm-up (default %(default)s)",
    )
    parser.add_argument(
        "--succeeded",
        type=int,
        default=0,
        help="also fill the jobs table with this many succeeded jobs (default %(default)s)",
    )
    parser.add_argument(
        "--database",
        help="name of the scratch database to create and drop (default jobretry_bench_dead_<pid>); "
        "it must not exist",
    )
    args = parser.parse_args(argv)
    if args.rows < 10_000 or args.repeat < 1 or args.succeeded < 0:
        parser.error("--rows must be >= 10000, --repeat >= 1 and --succeeded >= 0")
    return args


def setup_django() -> None:
    if not os.environ.get("DATABASE_URL"):
        sys.exit("bench/deadletters.py: DATABASE_URL is not set; run `make bench` or set it")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()


# -- the scratch database ----------------------------------------------------------------------


def execute(sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


def use_database(name: str) -> None:
    """Point the default connection at ``name`` (closing it first), as Django's test runner does."""
    from django.conf import settings
    from django.db import connection

    connection.close()
    settings.DATABASES["default"]["NAME"] = name
    connection.settings_dict["NAME"] = name


@contextmanager
def scratch_database(name: str) -> Iterator[None]:
    """Create ``name`` from the server of DATABASE_URL, use it, and drop it whatever happens."""
    from django.db import connection

    quoted = connection.ops.quote_name(name)
    original = connection.settings_dict["NAME"]
    execute(f"CREATE DATABASE {quoted}")
    try:
        use_database(name)
        yield
    finally:
        use_database(original)
        # FORCE (PostgreSQL 13+): a connection left open by an error must not keep it alive.
        execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")
        print(f"dropped the scratch database {name}", file=sys.stderr)


# -- the rows ----------------------------------------------------------------------------------


def ranges(shares: Sequence[float]) -> list[tuple[float, float]]:
    """Cumulative [lo, hi) intervals of [0, 1) for the shares; the last one ends at 1."""
    bounds, low = [], 0.0
    for index, share in enumerate(shares):
        high = 1.0 if index == len(shares) - 1 else low + share
        bounds.append((low, high))
        low = high
    return bounds


def fill(rows: int) -> None:
    """``rows`` dead letters, oldest first (ids follow dead_at, as they do in a live table)."""
    from django_jobretry.models import DeadLetter

    tasks: list[tuple[Any, ...]] = []
    queue_bounds = ranges([queue[1] for queue in QUEUES])
    for (queue, _share, policy, max_attempts, names), (low, high) in zip(QUEUES, queue_bounds, strict=True):
        step = (high - low) / len(names)
        tasks += [
            (
                queue,
                name,
                policy,
                max_attempts,
                low + i * step,
                high if i == len(names) - 1 else low + (i + 1) * step,
            )
            for i, name in enumerate(names)
        ]
    reasons = [
        (reason, ended, kind, error_class, message, low, high)
        for (reason, _share, ended, kind, error_class, message), (low, high) in zip(
            REASONS, ranges([reason[1] for reason in REASONS]), strict=True
        )
    ]
    task_values = ", ".join("(%s, %s, %s, %s::int, %s::float8, %s::float8)" for _ in tasks)
    reason_values = ", ".join("(%s, %s, %s, %s, %s, %s::float8, %s::float8)" for _ in reasons)
    sql = f"""
        WITH mix (queue_name, task_name, policy_name, max_attempts, lo, hi) AS (VALUES {task_values}),
             why (reason, ended, kind, error_class, message, lo, hi) AS (VALUES {reason_values}),
             s AS (
                 SELECT i, random() AS q, random() AS r,
                        now() - interval '90 days' + i * (interval '90 days' / %s)
                            - random() * interval '5 seconds' AS dead_at
                 FROM generate_series(1, %s) AS i
             ),
             d AS (
                 SELECT s.i, s.dead_at, mix.*, why.reason, why.ended, why.kind, why.error_class,
                        why.message,
                        CASE why.reason WHEN 'exhausted' THEN mix.max_attempts
                                        WHEN 'fatal' THEN 1 + s.i %% 2
                                        ELSE 1 + s.i %% (mix.max_attempts - 1) END AS attempts
                 FROM s JOIN mix ON s.q >= mix.lo AND s.q < mix.hi
                        JOIN why ON s.r >= why.lo AND s.r < why.hi
             )
        INSERT INTO {DeadLetter._meta.db_table} (
            job_id, task_name, queue_name, policy_name, priority, args, kwargs, reason, attempts,
            max_attempts, errors, last_error_class, last_error, unique_key, requeue_count,
            requeue_history, enqueued_at, first_attempt_at, dead_at)
        SELECT 4000000 + 3 * i, task_name, queue_name, policy_name, 0, jsonb_build_array(i),
               jsonb_build_object('order_id', 900000 + i), reason, attempts, max_attempts,
               jsonb_build_array(jsonb_build_object(
                   'attempt', attempts, 'at', dead_at, 'ended', ended, 'kind', kind,
                   'error_class', error_class, 'message', message,
                   'traceback', CASE WHEN error_class = '' THEN '' ELSE
                       'Traceback (most recent call last):' || chr(10)
                       || '  File "/srv/app/' || replace(task_name, '.', '/') || '.py", line '
                       || (40 + i %% 60) || ', in run' || chr(10)
                       || error_class || ': ' || message END,
                   'worker', 'worker-' || (i %% 4) || ':' || (1200 + i %% 37))),
               error_class, message, NULL, CASE WHEN i %% 50 = 0 THEN 1 ELSE 0 END, '[]',
               dead_at - attempts * interval '3 minutes' - interval '2 seconds',
               dead_at - attempts * interval '3 minutes', dead_at
        FROM d
    """  # noqa: S608 - the table name is the model's; every value is a parameter
    params: list[Any] = [value for row in tasks for value in row]
    params += [value for row in reasons for value in row]
    execute("SELECT setseed(0.42)")
    execute(sql, [*params, rows, rows])


def fill_succeeded(rows: int, ago: timedelta = timedelta(0)) -> None:
    """``rows`` succeeded jobs, finished evenly over the 7 days before ``ago`` (1 in 168 per hour).

    With ``ago`` past a retention period, every row is one ``prunejobs`` deletes (bench/large_tables.py).
    """
    from django_jobretry.models import Job

    if rows == 0:  # the spacing below divides by rows, even over no rows at all
        return
    execute(
        f"""
        INSERT INTO {Job._meta.db_table} (
            task_name, queue_name, policy_name, status, args, kwargs, priority, run_at, attempts,
            max_attempts, lease_owner, errors, requeue_count, requeue_history, enqueued_at, started_at,
            finished_at)
        SELECT 'shop.jobs.send_receipt', CASE WHEN i %% 3 = 0 THEN 'emails' ELSE 'default' END, 'default',
               'succeeded', jsonb_build_array(i), '{{}}', 0, f - interval '2 seconds', 1, 20,
               'worker-' || (i %% 4), '[]', 0, '[]', f - interval '3 seconds', f - interval '1 second', f
        FROM (SELECT i, now() - %s::interval - (%s - i) * (interval '7 days' / %s) AS f
              FROM generate_series(1, %s) AS i) AS g
        """,  # noqa: S608 - the table name is the model's; every value is a parameter
        [ago, rows, rows, rows],
    )


def fill_samples() -> int:
    """A week of status samples (SAMPLES_KEPT), one a minute, as running workers leave them."""
    from django_jobretry.console import trends

    minutes = int(trends.SAMPLES_KEPT.total_seconds() // 60)
    execute(
        f"""
        INSERT INTO {trends.SAMPLES} (taken_at, count_limit, ready, retrying, running, dead)
        SELECT date_trunc('minute', now()) - g * interval '1 minute', 10000, 40 + g %% 17,
               (g * 7) %% 300, g %% 9, 10001
        FROM generate_series(1, %s) AS g
        """,  # noqa: S608 - the table name is the model's
        [minutes],
    )
    return minutes


def time_sample() -> float:
    """One status sample as a worker's heartbeat takes it, on the filled tables: seconds."""
    from django_jobretry.console import trends

    started = time.perf_counter()
    taken = trends.take_sample()
    seconds = time.perf_counter() - started
    if taken.taken_at is None:
        sys.exit("bench/deadletters.py: the current minute was already sampled")
    return seconds


# -- requests ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    label: str
    url: str


@dataclass(frozen=True)
class Statement:
    sql: str  # as Django logged it (CaptureQueriesContext): the text sent, values inlined
    seconds: float  # the execute() round trip, timed by an execute wrapper


@dataclass(frozen=True)
class Run:
    seconds: float
    statements: list[Statement]
    listed: int

    @property
    def sql_seconds(self) -> float:
        return sum(statement.seconds for statement in self.statements)


def request(client: Any, url: str) -> Run:
    """GET ``url``; the whole request's time, and each statement's text and time."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # connection.queries rounds times to the millisecond; time each execute() here instead.
    times: list[float] = []

    def timed(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            times.append(time.perf_counter() - started)

    with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(timed):
        started = time.perf_counter()
        response = client.get(url)
        seconds = time.perf_counter() - started
    if response.status_code != 200:
        sys.exit(f"bench/deadletters.py: GET {url} answered {response.status_code}")
    # BEGIN, COMMIT and ROLLBACK are logged too (the dashboard's reads run in transactions of
    # their own) but never pass through execute(): they keep the time Django logged for them.
    sent = iter(times)
    statements = [
        Statement(query["sql"], float(query["time"]))
        if query["sql"] in TRANSACTION_CONTROL
        else Statement(query["sql"], next(sent))
        for query in captured.captured_queries
    ]
    if next(sent, None) is not None:
        sys.exit("bench/deadletters.py: more statements timed than Django logged")
    return Run(seconds, statements, response.content.count(b'name="_selected_action"'))


def admin_pages(newest_id: int, newest_at: datetime) -> list[Page]:
    from django.urls import reverse

    changelist = reverse("admin:django_jobretry_deadletter_changelist")
    month = newest_at - timedelta(days=30)  # a whole month, not one that began yesterday
    return [
        Page("list, first page", changelist),
        Page("list, page 2", f"{changelist}?p=2"),
        Page("list, page 200 (offset 9,950)", f"{changelist}?p=200"),
        Page("list, reason = fatal (25 %)", f"{changelist}?reason__exact=fatal"),
        Page("list, reason = lease_expired (5 %)", f"{changelist}?reason__exact=lease_expired"),
        Page("list, queue = emails (25 %)", f"{changelist}?queue_name=emails"),
        Page("list, queue = billing (0.1 %)", f"{changelist}?queue_name=billing"),
        Page("list, queue with no dead letters", f"{changelist}?queue_name=nightly"),
        Page(
            "list, last month (date hierarchy by day)",
            f"{changelist}?dead_at__year={month.year}&dead_at__month={month.month}",
        ),
        Page("list, search 'timed out' (10 % match)", f"{changelist}?q=timed+out"),
        Page("list, search matching nothing", f"{changelist}?q=no+such+error"),
        Page(
            "detail page",
            reverse("admin:django_jobretry_deadletter_change", args=[newest_id]),
        ),
        Page("dashboard", reverse("admin:django_jobretry_deadletter_dashboard")),
    ]


# -- plans -------------------------------------------------------------------------------------


def explainable(sql: str) -> bool:
    """A read: EXPLAIN ANALYZE would run a write, and a loaded machine can make a ROLLBACK slow."""
    return sql.lstrip().upper().startswith("SELECT")


def explain(sql: str) -> str:
    rows = execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
    return "\n".join(row[0] for row in rows)


def purpose(sql: str, table: str) -> str:
    """What an admin statement is for, from how its text starts."""
    text = " ".join(sql.split())
    column = f'"{table}"."'
    starts = (
        ("SELECT COUNT(*)", "count, capped"),
        (f'SELECT MIN({column}dead_at") AS "first", MAX(', "date hierarchy: first and last dead_at"),
        (f'SELECT MIN({column}dead_at")', "date hierarchy: one bucket probe"),
        (f'SELECT {column}queue_name" AS "queue_name" FROM', "queue_name filter choices (newest rows)"),
        (f'SELECT {column}task_name" AS "task_name" FROM', "task_name filter choices (newest rows)"),
        (f'SELECT {column}id", ', "the page's rows"),
        (f'SELECT {column}queue_name" AS "queue_name", {column}reason"', "dashboard: per queue and reason"),
        ("SELECT DATE_TRUNC(", "dashboard: chart buckets"),
    )
    return next((label for start, label in starts if text.startswith(start)), text[:60])


def plan_nodes(plan: str) -> str:
    """The plan's scans, sorts, aggregates, rows filtered out and execution time, on one line."""
    keep = []
    for line in plan.splitlines():
        node = line.strip().removeprefix("->").strip()
        if "(cost=" in node and re.match(
            r"(Parallel )?(Index Only Scan|Index Scan|Seq Scan|Bitmap \w+ Scan)|((Incremental )?Sort|Limit"
            r"|Partial HashAggregate|HashAggregate|GroupAggregate|Finalize GroupAggregate)\b",
            node,
        ):
            keep.append(node.split("  (")[0])
        elif node.startswith(("Rows Removed by Filter", "Execution Time")):
            keep.append(node)
    return "; ".join(keep)


def verdict(plan: str, table: str) -> int:
    if f"Seq Scan on {table}" in plan:
        print(f"PROBLEM: the first page reads {table} sequentially.")
        return 1
    if re.search(r"^\s*(->\s*)?(Incremental )?Sort\b", plan, re.MULTILINE):
        print("PROBLEM: the first page sorts rows instead of reading them in index order.")
        return 1
    if f"Index Scan using {NEWEST_INDEX}" not in plan:
        print(f"PROBLEM: the first page does not read {NEWEST_INDEX} as an ordered index scan.")
        return 1
    print(
        f"OK: an ordered Index Scan of {NEWEST_INDEX}, stopped by the LIMIT; "
        f"no sequential scan of {table}, no sort."
    )
    return 0


# -- report ------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def shares(table: str, column: str) -> str:
    rows = execute(f"SELECT {column}, count(*) FROM {table} GROUP BY 1 ORDER BY 2 DESC")  # noqa: S608
    total = sum(n for _, n in rows)
    return ", ".join(f"{value} {100 * n / total:.1f} %" for value, n in rows)


def prepare(rows: int, notes: list[str], succeeded: int = 0) -> tuple[int, datetime]:
    """Migrate, fill, VACUUM ANALYZE; the newest dead letter's id and dead_at."""
    from django.core.management import call_command

    from django_jobretry.models import DeadLetter

    table = DeadLetter._meta.db_table
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    fill(rows)
    filled = time.perf_counter() - started
    fill_succeeded(succeeded)
    samples = fill_samples()
    started = time.perf_counter()
    execute("VACUUM ANALYZE")
    vacuumed = time.perf_counter() - started
    table_size, index_size = execute(
        "SELECT pg_size_pretty(pg_table_size(%s)), pg_size_pretty(pg_relation_size(%s))",
        [table, NEWEST_INDEX],
    )[0]
    newest = DeadLetter.objects.order_by("-dead_at", "-id").values_list("id", "dead_at")[0]
    notes += [
        f"{rows:,} dead letters filled in {filled:.1f} s, VACUUM ANALYZE {vacuumed:.1f} s; "
        f"table {table_size} (with TOAST), index {NEWEST_INDEX} {index_size}",
        f"queues: {shares(table, 'queue_name')}",
        f"reasons: {shares(table, 'reason')}",
        f"jobs table: {succeeded:,} succeeded jobs; {samples:,} status samples (a week, one a minute); "
        f"a worker's status sample on these tables took {ms(time_sample())} ms",
    ]
    print("\n".join(notes[-4:]), file=sys.stderr, flush=True)
    return newest


def time_pages(client: Any, pages: list[Page], repeat: int) -> list[tuple[Page, list[Run]]]:
    """One warm-up request per page (caches, template compilation), then ``repeat`` timed ones."""
    timed = []
    for page in pages:
        request(client, page.url)
        runs = [request(client, page.url) for _ in range(repeat)]
        timed.append((page, runs))
        median = statistics.median(run.seconds for run in runs)
        print(f"  {page.label}: median {ms(median)} ms", file=sys.stderr, flush=True)
    return timed


def explain_first_page(client: Any, url: str) -> int:
    """Each dead-letter statement of the first page under EXPLAIN; the page's SELECT in full."""
    from django_jobretry.models import DeadLetter

    table = DeadLetter._meta.db_table
    first = request(client, url)
    print(
        f"\nStatements of the changelist's first page ({len(first.statements)}); "
        "those reading the dead-letter table run again under EXPLAIN (ANALYZE, BUFFERS):\n"
    )
    print("| ms in the request | statement | plan |")
    print("| ---: | --- | --- |")
    page_sql = None
    for statement in first.statements:
        sql, took = statement.sql, statement.seconds * 1000
        if table not in sql:
            print(f"| {took:.2f} | `{' '.join(sql.split())[:60]}...` | |")
            continue
        what = purpose(sql, table)
        if what == "the page's rows":
            page_sql = sql
        print(f"| {took:.2f} | {what} | {plan_nodes(explain(sql))} |")
    if page_sql is None:
        print("PROBLEM: no statement selecting the page's rows was captured.")
        return 1
    print("\nThe page's SELECT, as sent:\n")
    print(page_sql)
    print("\nEXPLAIN (ANALYZE, BUFFERS):\n")
    plan = explain(page_sql)
    print(plan)
    print()
    return verdict(plan, table)


def slow_statements(timed: list[tuple[Page, list[Run]]]) -> list[str]:
    """For each page slower than SLOW_MS: its slowest statements, each run again under EXPLAIN."""
    from django_jobretry.models import DeadLetter

    table = DeadLetter._meta.db_table
    lines = []
    for page, runs in timed:
        if statistics.median(run.seconds for run in runs) * 1000 <= SLOW_MS:
            continue
        run = median_run(runs)
        lines.append(f"\nSlower than {SLOW_MS:.0f} ms: {page.label} ({page.url}); its slowest statements:\n")
        for statement in sorted(run.statements, key=lambda statement: -statement.seconds)[:4]:
            if statement.seconds * 1000 < 10:
                break
            lines.append(f"- {ms(statement.seconds)} ms, {purpose(statement.sql, table)}:")
            lines.append(f"  `{' '.join(statement.sql.split())[:400]}`")
            if explainable(statement.sql):
                lines.append(f"  plan: {plan_nodes(explain(statement.sql))}")
    return lines


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda run: run.seconds)[len(runs) // 2]


def print_report(notes: list[str], timed: list[tuple[Page, list[Run]]], slow: list[str]) -> None:
    print()
    for note in notes:
        print(f"- {note}")
    print()
    print("| page | median ms | fastest, slowest ms | database ms (median run) | statements | rows listed |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for page, runs in timed:
        middle = median_run(runs)
        median = statistics.median(run.seconds for run in runs)
        spread = f"{ms(min(run.seconds for run in runs))}, {ms(max(run.seconds for run in runs))}"
        listed = str(middle.listed) if page.label.startswith("list") else ""
        print(
            f"| {page.label} | {ms(median)} | {spread} | {ms(middle.sql_seconds)} "
            f"| {len(middle.statements)} | {listed} |"
        )
    for line in slow:
        print(line)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    setup_django()
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings

    from bench.run import environment, load

    # SIGTERM as an exception, like Ctrl-C, so the scratch database is still dropped.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    notes = [*environment(), f"load average (1/5/15 min) at start: {load()}"]
    print("\n".join(notes), file=sys.stderr, flush=True)
    with scratch_database(args.database or f"jobretry_bench_dead_{os.getpid()}"):
        newest_id, newest_at = prepare(args.rows, notes, args.succeeded)
        client = Client()
        client.force_login(get_user_model().objects.create_superuser("bench", "bench@example.com", None))
        listed = admin_pages(newest_id, newest_at)
        # As deployed: DEBUG off. The test client keeps the one connection across requests.
        with override_settings(DEBUG=False, ALLOWED_HOSTS=["testserver"]):
            timed = time_pages(client, listed, args.repeat)
            notes.append(f"load average (1/5/15 min) at end: {load()}")
            status = explain_first_page(client, listed[0].url)
            slow = slow_statements(timed)
    print_report(notes, timed, slow)
    return status


if __name__ == "__main__":
    sys.exit(main())
