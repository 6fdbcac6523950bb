"""The job state machine: every statement that writes job and dead-letter rows, and the code running them.

statements.py holds the statements, in state order (with a statement -> transition table), and
sql.py their shared fragments and locking reads; functions.sql the PL/pgSQL the claims call.
claim.py is a worker's claim and the fenced writes on a claimed job (claimed.py); record.py,
failures.py write what its attempts became, as decisions.py decides; enqueue.py, insert.py
and unique.py make jobs; recovery.py ends attempts from outside (lost leases,
cancels); retention.py prunes. Writers not yet in statements.py: the inserts (insert.py, built
per job definition), bring-forward (retention.py) and the ORM writes of unique.py and retention.py.
"""
