"""Every database write of job and dead-letter state, and the reads operators rely on beside it.

Each transition of a job or a dead letter lives in this package and nowhere
else: enqueue, the claim and each attempt's outcome, retries and burials,
recovery, cancel, requeue and discard (also of dead letters from other
systems), retention. Beside them, as bounded index walks over the same
tables: what operators read (status, deaths), and what each worker reports
from its heartbeat (its row in the workers table, metric counters, status
samples).
"""
