"""What operators read and workers report: status, the workers table, counters, samples, deaths.

Still layer 3 (services): the read models of the admin, ``jobstatus`` and
the metrics, and the rows the heartbeat's duties write (worker/heartbeat.py).
None of it changes a job's state; the writers beside it (services/) may
add a count or a death row in the statement that does.
"""
