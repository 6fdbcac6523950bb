"""The sizes of a run: `make chaos-ci` (about a minute), `make chaos` (the soak, 8 to 9 minutes),
`make chaos-partition` (partition faults only, about two minutes), and `make chaos-flows`
(200 flows among SIGKILLs, about three minutes; "flows-ci" is its short test, chaos/flows.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Size:
    """How much work and how many faults of each kind, and the run's hard deadlines."""

    jobs: int  # in total: fed jobs, storm jobs, poison jobs and hostile rows
    workers: int
    concurrency: int
    fault_seconds: float  # the feeder spreads its jobs over this, the faults too
    kills: int
    pauses: int
    terminations: int
    restarts: int
    locks: int
    lock_seconds: float
    poison: int
    storms: int
    storm_jobs: int
    drain_seconds: float  # after the fault phase, every job must be finished within this
    # Partition faults through the workers' relays (chaos/partition.py).
    partitions: int = 0  # one worker blackholed for partition_seconds, then healed
    partition_resets: int = 0  # the same, its connections reset at the heal
    flaps: int = 0  # one worker's link down and up flap_cycles times
    slowdowns: int = 0  # every link slow and stalling for partition_seconds
    partition_seconds: float = 12.0  # longer than the lease and than the time a worker has to notice
    flap_cycles: int = 4
    # Flows of five steps and two callbacks (chaos/flows.py), fed over the fault phase beside the jobs.
    flows: int = 0
    #: "cancel during a pause" faults; None: one per pause. A cancelled flow step blocks its flow for
    #: good (no operator requeues it), so the flows sizes have none.
    cancel_pauses: int | None = None
    #: The pruner's ``prunejobs --older-than``. Retention deletes a finished flow with its steps and
    #: edges, which the flows checks read at the end, so the flows sizes keep them past the run.
    prune_older_than: str = "2s"


SIZES = {
    "ci": Size(
        jobs=300,
        workers=2,
        concurrency=4,
        fault_seconds=45,
        kills=3,
        pauses=2,
        terminations=4,
        restarts=1,
        locks=1,
        lock_seconds=4,
        poison=1,
        storms=1,
        storm_jobs=30,
        drain_seconds=90,
    ),
    "soak": Size(
        jobs=10_000,
        workers=4,
        concurrency=4,
        fault_seconds=480,
        kills=20,
        pauses=10,
        terminations=30,
        restarts=1,
        locks=2,
        lock_seconds=5,
        poison=3,
        storms=3,
        storm_jobs=150,
        drain_seconds=240,
        partitions=3,
        partition_resets=2,
        flaps=3,
        slowdowns=2,
    ),
    # Every partition fault, with SIGKILLs and killed sessions between them, and nothing else.
    "partition": Size(
        jobs=250,
        workers=2,
        concurrency=4,
        fault_seconds=55,
        kills=1,
        pauses=0,
        terminations=1,
        restarts=0,
        locks=0,
        lock_seconds=0,
        poison=0,
        storms=0,
        storm_jobs=0,
        drain_seconds=60,
        partitions=1,
        partition_resets=1,
        flaps=1,
        slowdowns=1,
    ),
    # Flows among SIGKILLs at random (issue 38): a few pauses past the lease for the fence, killed
    # sessions and a restart; no cancels, poison nor storms, so every flow must complete.
    "flows": Size(
        jobs=60,
        workers=2,
        concurrency=4,
        fault_seconds=90,
        kills=15,
        pauses=3,
        terminations=4,
        restarts=1,
        locks=0,
        lock_seconds=0,
        poison=0,
        storms=0,
        storm_jobs=0,
        drain_seconds=120,
        flows=200,
        cancel_pauses=0,
        prune_older_than="1h",
    ),
    "flows-ci": Size(
        jobs=30,
        workers=2,
        concurrency=4,
        fault_seconds=30,
        kills=5,
        pauses=1,
        terminations=2,
        restarts=1,
        locks=0,
        lock_seconds=0,
        poison=0,
        storms=0,
        storm_jobs=0,
        drain_seconds=90,
        flows=40,
        cancel_pauses=0,
        prune_older_than="1h",
    ),
}
