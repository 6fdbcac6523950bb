"""The job state machine: every statement that writes job and dead-letter rows, and the code running them.

statements.py holds every such statement, in state order under a statement -> transition table;
no other module writes those rows (tests/unit/test_row_writers.py). sql.py holds the fragments and
locking reads several statements share, functions.sql the PL/pgSQL the claims call. claim.py is a
worker's claim; claimed.py the claimed job, its outcomes and the fenced writes on it (succeed,
release, heartbeat, bury). record.py records outcomes: failures.py writes a failed attempt back
(a retry or a burial; and revive, the burial's inverse) as decisions.py decides, events.py
announces it, history.py shapes the entries kept. enqueue.py (with insert.py's statements) makes
jobs; recovery.py ends attempts from outside (lost leases, cancels); retention.py prunes, and brings
jobs forward for tests. tracing.py adds OpenTelemetry spans; isolation.py keeps one bad row of a
set from stopping the others.
"""
