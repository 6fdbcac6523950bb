"""Run the chaos harness: workers under a supervisor, faults on a schedule, invariants at the end.

    python -m chaos --size ci       # make chaos-ci: about a minute
    python -m chaos --size soak     # make chaos: 10,000 jobs, 4 workers, every fault many times
    python -m chaos --size flows    # make chaos-flows: 200 flows of 5 steps among SIGKILLs (chaos/flows.py)

Without DATABASE_URL a private PostgreSQL is started (and can be restarted
as a fault); with it, a scratch database on that server is used and the
restart fault is skipped. Exits 1 when an invariant is violated, 2 when the
run itself could not finish (a deadline passed).
"""

# ruff: noqa: S311 - seeded randomness schedules faults, not secrets

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import django

from chaos import netns
from chaos.processes import Pool
from chaos.relay import Relay
from chaos.sizes import SIZES, Size

if TYPE_CHECKING:  # these need Django set up
    from chaos.flows import FlowFeeder
    from chaos.partition import Link
    from chaos.workload import Feeder


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="ci")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--logs", type=Path, help="keep worker logs here (default: a temporary folder)")
    parser.add_argument(
        "--netns",
        action="store_true",
        help="workers in network namespaces, cut by the kernel (root and ip; chaos/netns.py)",
    )
    return parser.parse_args(argv)


def schedule(size: Size, rng: random.Random, can_restart: bool, kernel_cuts: bool = False) -> list[str]:
    """The fault events in a seeded random order; the restart is never first nor last.

    With ``kernel_cuts`` (--netns) a cut cannot reset connections nor add latency: those are left out.
    """
    events = (
        ["sigkill"] * size.kills
        + ["sigstop"] * size.pauses
        + ["cancel_pause"] * (size.pauses if size.cancel_pauses is None else size.cancel_pauses)
        + ["terminate_backend"] * size.terminations
        + ["lock_table"] * size.locks
        + ["poison"] * size.poison
        + ["retry_storm"] * size.storms
        + ["partition"] * size.partitions
        + ["partition_reset"] * (0 if kernel_cuts else size.partition_resets)
        + ["flapping"] * size.flaps
        + ["latency_loss"] * (0 if kernel_cuts else size.slowdowns)
        + ["hostile_rows", "stubborn_child"]
    )
    rng.shuffle(events)
    if can_restart:
        for i in range(size.restarts):
            events.insert(len(events) * (i + 1) // (size.restarts + 1), "pg_restart")
    return events


def start_processes(
    pool: Pool, size: Size, url: str, seed: int, network: netns.Network | None
) -> tuple[dict[str, Link], list[Relay]]:
    """The workers, the operators and the pruner, under the supervisor; the workers' links, the relays.

    Each worker reaches the database through a relay of its own, which partition
    faults cut; with ``network``, from a namespace of its own through one relay
    in pass mode on the host, and the faults cut its namespace off instead.
    """
    manage = str(Path(__file__).resolve().parents[1] / "manage.py")
    if network is None:
        relays = [Relay.to(url, seed=seed + i).start() for i in range(size.workers)]
        links: list[Link] = list(relays)
    else:
        relays = [Relay.to(url, bind=netns.HOST_ADDRESS).start()] * size.workers
        links = [network.link(i) for i in range(size.workers)]
    for i in range(size.workers):
        # Not the "stubborn" queue: the stubborn_child fault's own worker's (chaos/stubborn.py).
        pool.add(
            f"worker-{i}",
            manage,
            *("runworker", "-v", "1", "--concurrency", str(size.concurrency), "--queue", "default"),
            env={**pool.env, "DATABASE_URL": relays[i].url_for(url)},
            prefix=None if network is None else network.prefix(i),
        )
    for name in ("operator-a", "operator-b"):
        pool.add(name, "-m", "chaos.sidecars", "operator", name)
    pool.add("pruner", "-m", "chaos.sidecars", "pruner", size.prune_older_than)
    threading.Thread(target=pool.supervise, name="chaos-supervisor", daemon=True).start()
    return {f"worker-{i}": link for i, link in enumerate(links)}, list(dict.fromkeys(relays))


def start_feeders(size: Size, seed: int, gate: threading.Lock, deadline: float) -> tuple[Feeder, FlowFeeder]:
    """The jobs' feeder and the flows' (chaos/flows.py; nothing to feed in most sizes), started.

    The jobs fed are what the size's total leaves after the storms, the poison and the hostile rows.
    """
    from chaos import flows, workload

    fed = size.jobs - size.storms * size.storm_jobs - size.poison - len(workload.HOSTILE)
    feeders = (
        workload.Feeder(fed, size.fault_seconds, seed, gate, deadline),
        flows.FlowFeeder(size.flows, size.fault_seconds, seed, gate, deadline),
    )
    for feeder in feeders:
        feeder.start()
    return feeders


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    size = SIZES[args.size]
    network = None
    if args.netns:
        if reason := netns.unavailable():
            print(f"chaos --netns: {reason}; `make chaos-partition` needs neither", file=sys.stderr)
            return 2
        network = netns.Network(size.workers)
        try:
            network.up()
        except OSError as exc:
            print(f"chaos --netns: could not build the namespaces: {exc}", file=sys.stderr)
            return 2
    from chaos.server import open_database

    db = open_database()
    try:
        return _run(args, size, db.url, db.version, db.restart, network=network)
    finally:
        db.close()
        if network is not None:
            network.down()


def _run(
    args: argparse.Namespace,
    size: Size,
    url: str,
    version: str,
    restart: Callable[[], None] | None,
    *,
    network: netns.Network | None,
) -> int:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "chaos.settings"
    django.setup()
    from django.core.management import call_command

    from chaos import partition, report, schema, workload
    from chaos.faults import Fault, Injector
    from chaos.settings import LEASE_SECONDS

    call_command("migrate", verbosity=0)
    schema.install()
    log_dir = args.logs or Path(tempfile.mkdtemp(prefix="jobretry-chaos-logs-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"chaos: size {args.size}, seed {args.seed}, {version}; logs in {log_dir}", flush=True)
    if restart is None:
        print("chaos: DATABASE_URL is someone else's server: the pg_restart fault is skipped", flush=True)

    rng = random.Random(args.seed)
    events = schedule(size, rng, restart is not None, kernel_cuts=network is not None)
    pool = Pool({**os.environ, "PYTHONUNBUFFERED": "1"}, log_dir)
    links, relays = start_processes(pool, size, url, args.seed, network)

    started = time.monotonic()
    deadline = started + size.fault_seconds + size.drain_seconds + 120
    gate = threading.Lock()
    faults: list[Fault] = []
    injector = Injector(pool, url, LEASE_SECONDS, rng, gate, restart, faults)
    partitioner = partition.Partitioner(pool, links, url, rng, faults)
    feeder, flow_feeder = start_feeders(size, args.seed, gate, deadline)
    actions: dict[str, Callable[[], None]] = {
        "sigkill": injector.sigkill,
        "sigstop": injector.pause,
        "cancel_pause": injector.cancel_during_pause,
        "terminate_backend": injector.terminate_sessions,
        "lock_table": lambda: injector.lock_table(size.lock_seconds),
        "pg_restart": injector.restart,
        "poison": lambda: workload.poison(f"poison-{len(faults)}-{rng.random():.6f}", deadline),
        "retry_storm": lambda: workload.retry_storm(f"storm-{rng.random():.6f}", size.storm_jobs, deadline),
        "hostile_rows": lambda: workload.insert_hostile(deadline, workload.HOSTILE),
        "stubborn_child": injector.stubborn_child,
        "partition": lambda: partitioner.cut(size.partition_seconds),
        "partition_reset": lambda: partitioner.cut(size.partition_seconds, reset=True),
        "flapping": lambda: partitioner.flap(size.flap_cycles, phase=1.5),
        "latency_loss": lambda: partitioner.slow(size.partition_seconds),
    }
    interval = size.fault_seconds / (len(events) + 1)
    for i, event in enumerate(events):
        time.sleep(max(0.0, started + (i + 1) * interval - time.monotonic()))
        print(f"chaos: {time.monotonic() - started:6.1f}s {event} at {partition.clock()}", flush=True)
        actions[event]()
    for each in (feeder, flow_feeder):
        each.join(max(deadline - time.monotonic(), 1))
    fault_phase = time.monotonic() - started
    drained = report.drain(started + fault_phase + size.drain_seconds)
    drain_time = time.monotonic() - started - fault_phase
    for prefix in ("operator", "pruner", "worker"):
        pool.stop(prefix, timeout=20)
    pool.shutdown(timeout=5)
    for relay in relays:
        relay.close()
    report.save_faults(faults)

    slack = timedelta(seconds=LEASE_SECONDS + 2)
    checks, figures = report.evaluate(pool, (feeder, flow_feeder), drained, slack, log_dir)
    if partitioner.episodes:
        host = "127.0.0.1" if network is None else netns.HOST_ADDRESS
        checks.append(partition.measure(partitioner.episodes, log_dir, host))
    figures.update(
        {
            "size": args.size,
            "database": version,
            "workers x concurrency": f"{size.workers} x {size.concurrency}",
            "fault phase (s)": f"{fault_phase:.0f}",
            "drain after the last fault (s)": f"{drain_time:.0f}",
            "faults injected": report.count_kinds(faults),
        }
    )
    report.print_table(checks, figures)
    if partitioner.episodes:
        partition.print_episodes(partitioner.episodes)
    if not drained:
        return 2
    return 0 if all(check.ok for check in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
