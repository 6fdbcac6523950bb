"""Limits: how many jobs of a task or queue run at once, and how fast they start.

- ``declare``: where limits are declared (``@job``, ``JOBRETRY["QUEUE_LIMITS"]``),
  the lane a job gets, and the system checks E050-E051 (layer 2, beside conf/);
- ``status``: every declared limit now, running / limit and held, and how it
  shows in `jobstatus`, the metrics and the dashboard (layer 5).

The claim that enforces them is the state machine's (jobs/), and the pure
values are policy/limits.py and policy/slots.py.
"""
