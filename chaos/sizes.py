"""The two sizes of a run: `make chaos-ci` (about a minute) and `make chaos` (the soak, 8 to 9 minutes)."""

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
    ),
}
