"""Holds: pauses of a queue or task, and each task's circuit breaker, enforced in the claim.

- ``sql``: the claim's filter and the statements of pauses, breakers and snoozes (layer 3);
- ``pauses``: pause and resume, the names a pause may hold, and the heartbeat's
  ``Holds`` duty (layer 3);
- ``breakers``: count failures, open, probe, close (layer 3);
- ``status``: what holds jobs back now, the operators' read model (layer 3);
- ``admin``: the Pauses and Circuit breakers pages; ``panel``: the dashboard's
  Held panel and the "are you sure?" page; ``cli``: `pause`, `resume`,
  `jobstatus`' Held section and the metrics (layer 5).

The models stay in models/holds.py; the pure breaker values in policy/circuit.py.
"""
