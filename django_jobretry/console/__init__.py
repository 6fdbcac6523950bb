"""What operators read and workers report: status, the workers table, counters, trends.

Layer 3, beside the services: the read models of the admin, ``jobstatus`` and
the metrics, and the rows the heartbeat's duties write (worker/heartbeat.py).
None of it changes a job's state; the state machine's writers may add a
count or a death row in the statement that does.
"""
