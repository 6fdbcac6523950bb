"""Partition faults through the workers' relays (chaos/relay.py), and how fast workers notice and recover.

Every worker of a run reaches PostgreSQL through a relay of its own, so a
fault can cut one worker off without root: its sockets stay open and
nothing crosses (the worker gets no error, only silence). Kinds:

- ``partition``: one worker blackholed for a while, then healed; what was
  held is delivered, as TCP's retransmissions would after a short cut;
- ``partition_reset``: the same, but the heal resets every connection the
  worker had (its TCP gave up meanwhile, or a middlebox forgot the flows);
- ``flapping``: one worker's link goes down and up several times, each
  phase a second or two;
- ``latency_loss``: every worker's link gets latency and loss-like stalls.

For each episode the run measures the *time to notice* (the first warning
in the worker's log after the cut that names the database alias and the
host: what an operator would see) and the *time to recover*: from the heal
to the first statement of one of the worker's sessions (named
``chaos-<pid>``) that started after the heal and has finished, watched live
in ``pg_stat_activity``, so an idle worker's poll counts as much as a claim.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import psycopg

from chaos.faults import Fault, now
from chaos.invariants import Check
from chaos.processes import Pool

#: The issue's acceptance: a cut worker warns within this, and works again this soon after the heal.
NOTICE_SECONDS = RECOVER_SECONDS = 10.0
#: Kinds that cut one worker off long enough to require a warning. Flapping phases are shorter
#: than a worker's patience, and a warning during one may well be about a fault before it.
CUTS = ("partition", "partition_reset")


def is_partition_warning(line: str, host: str, alias: str = "default") -> bool:
    """A worker's log line warning about the database, naming its alias and the host it cannot reach.

    ``host`` is the one in the worker's DATABASE_URL: its relay's 127.0.0.1, or the host's
    address in the namespace variant.
    """
    return " WARNING " in line and re.search(rf"\b{re.escape(alias)}\b", line) is not None and host in line


class Link(Protocol):
    """A worker's way to the database that faults can cut: a Relay, or chaos/netns.py's Cut."""

    def blackhole(self) -> None: ...
    def heal(self, *, reset: bool = False) -> None: ...
    def shape(
        self, delay: float = 0.0, jitter: float = 0.0, loss: float = 0.0, stall: float = 0.0
    ) -> None: ...


@dataclass
class Episode:
    """One partition fault and what the run measured of it (seconds; None: never)."""

    fault: Fault
    slot: str | None  # the worker's slot (its log file), None: every worker
    noticed: float | None = None
    recovered: float | None = None


@dataclass
class Partitioner:
    """Cuts, flaps and slows the workers' links; every episode is logged as a Fault too."""

    pool: Pool
    links: dict[str, Link]  # by worker slot name
    url: str  # the database, directly: the harness's own view
    rng: random.Random
    log: list[Fault]
    episodes: list[Episode] = field(default_factory=list)

    def _target(self) -> tuple[str, int] | None:
        live = self.pool.live_slots("worker")
        return self.rng.choice(live) if live else None

    def cut(self, seconds: float, *, reset: bool = False) -> None:
        """Blackhole one worker for ``seconds``, then heal (delivering what was held, or resetting)."""
        target = self._target()
        if target is None:
            return
        name, pid = target
        relay = self.links[name]
        started = now()
        relay.blackhole()
        time.sleep(seconds)
        relay.heal(reset=reset)
        healed = now()
        kind = "partition_reset" if reset else "partition"
        fault = Fault(kind, pid, started, healed, f"{name} {seconds:g}s")
        self._record(fault, name, self._resumed(pid, healed))

    def flap(self, cycles: int, phase: float) -> None:
        """Down and up ``cycles`` times, each phase 0.5 to 1.5 times ``phase`` seconds."""
        target = self._target()
        if target is None:
            return
        name, pid = target
        relay = self.links[name]
        started = now()
        for _ in range(cycles):
            relay.blackhole()
            time.sleep(phase * self.rng.uniform(0.5, 1.5))
            relay.heal()
            healed = now()
            time.sleep(phase * self.rng.uniform(0.5, 1.5))
        fault = Fault("flapping", pid, started, healed, f"{name} {cycles}x ~{phase:g}s")
        self._record(fault, name, self._resumed(pid, healed))

    def slow(self, seconds: float) -> None:
        """Every link: 20-60 ms one way, and one chunk in 20 stalled 0.5 s (a retransmission)."""
        started = now()
        for relay in self.links.values():
            relay.shape(delay=0.02, jitter=0.04, loss=0.05, stall=0.5)
        time.sleep(seconds)
        for relay in self.links.values():
            relay.shape()
        self._record(Fault("latency_loss", None, started, now(), f"{seconds:g}s"), None, None)

    def _record(self, fault: Fault, slot: str | None, recovered: float | None) -> None:
        self.log.append(fault)
        self.episodes.append(Episode(fault, slot, recovered=recovered))

    def _resumed(self, pid: int, healed: datetime) -> float | None:
        """Seconds from ``healed`` to a finished statement of ``pid`` started since; None: not in time."""
        deadline = time.monotonic() + RECOVER_SECONDS + 5
        with psycopg.connect(self.url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute(RESUMED, [f"chaos-{pid}", healed]).fetchone()
                if row is not None and row[0] is not None:
                    started: datetime = row[0]
                    return max((started - healed).total_seconds(), 0.0)
                time.sleep(0.05)
        return None


#: The first finished statement of the worker's sessions that started after the heal.
RESUMED = """
SELECT min(query_start) FROM pg_stat_activity
WHERE application_name = %s AND state = 'idle' AND query_start >= %s
"""


def log_times(path: Path) -> list[tuple[datetime, str]]:
    """(time, line) of each timestamped line of a worker log (local time, as logging writes it)."""
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").astimezone(UTC)
        except ValueError:
            continue
        lines.append((at, line))
    return lines


def measure(episodes: list[Episode], log_dir: Path, host: str) -> Check:
    """Fill in each episode's time to notice; the check: every cut noticed, every cut worker back in time."""
    check = Check(f"partitioned workers warn < {NOTICE_SECONDS:g} s, resume < {RECOVER_SECONDS:g} s", 0)
    late = timedelta(seconds=NOTICE_SECONDS)  # a warning this long after the heal is about something else
    for episode in episodes:
        fault = episode.fault
        if episode.slot is None or fault.target_pid is None:
            continue
        check.checked += 1
        what = f"{fault.kind} of {episode.slot} (pid {fault.target_pid}) at {fault.started_at:%H:%M:%S}"
        if fault.kind in CUTS:
            warnings = [
                at
                for at, line in log_times(log_dir / f"{episode.slot}.log")
                if fault.started_at <= at < fault.ended_at + late and is_partition_warning(line, host)
            ]
            if warnings:
                episode.noticed = (min(warnings) - fault.started_at).total_seconds()
            if episode.noticed is None or episode.noticed >= NOTICE_SECONDS:
                check.violations.append(f"{what}: noticed after {_seconds(episode.noticed)}")
        if episode.recovered is None or episode.recovered >= RECOVER_SECONDS:
            check.violations.append(f"{what}: resumed after {_seconds(episode.recovered)}")
    return check


def clock() -> str:
    """The wall clock as the worker logs show it (local time, milliseconds): to find a fault in them."""
    return datetime.now().astimezone().strftime("%H:%M:%S.%f")[:12]


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def print_episodes(episodes: list[Episode]) -> None:
    print("| partition fault | target | window (s) | time to notice | time to recover |")
    print("| --- | --- | ---: | ---: | ---: |")
    for e in episodes:
        window = (e.fault.ended_at - e.fault.started_at).total_seconds()
        target = e.fault.detail.split(" ")[0] if e.slot else "every worker"
        notice = _seconds(e.noticed) if e.fault.kind in CUTS else "-"
        recover = _seconds(e.recovered) if e.slot else "-"
        print(f"| {e.fault.kind} | {target} | {window:.1f} | {notice} | {recover} |")
    print(flush=True)
