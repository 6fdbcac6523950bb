"""The namespace variant (`make chaos-netns`): each worker on a host of its own, cut off by the kernel.

Where the relay (chaos/relay.py) fakes a partition in user space, here the
worker's own TCP stack meets it: retransmissions, keepalives and
``tcp_user_timeout`` run as on a real network. Needs root and ``ip``
(iproute2) only: no iptables, nft or netem. The run builds, and removes
at its end, this network of its own, in 10.231.0.0/16:

    host (the harness, PostgreSQL, a relay in pass mode on 10.231.0.1)
      | veth jrc-h 10.231.0.1  <->  jrc-r0 10.231.0.2
    namespace jobretry-chaos-r (a router: forwards between the workers and the host)
      | veth jrc-a<i> 10.231.<i+1>.1  <->  jrc-b<i> 10.231.<i+1>.2
    namespace jobretry-chaos-w<i> (worker i, default route via the router)

A cut is two ``ip rule ... blackhole`` rules in the router for worker i's
address, from and to: every packet of that worker is silently discarded
in both directions (no ICMP, no reset), so established connections hang
and new ones get no answer. The heal deletes the rules, and TCP's
retransmissions deliver what was in flight. Traffic only ever goes to
addresses inside this network; the relay on the host forwards to the
database. Latency and loss need netem, which this variant does not use.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass

SUBNET = ipaddress.ip_network("10.231.0.0/16")
HOST_ADDRESS = "10.231.0.1"
ROUTER = "jobretry-chaos-r"


def unavailable() -> str | None:
    """Why this machine cannot run the variant, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and veth pairs)"
    if shutil.which("ip") is None:
        return "needs the ip command (iproute2)"
    used = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=False).stdout  # noqa: S607
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True, check=False).stdout  # noqa: S607
    if "10.231." in used or "10.231." in routes:
        return f"needs {SUBNET} unused, and this machine already has addresses or routes in it"
    return None


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)  # noqa: S603, S607
    if result.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {result.stderr.strip()}")


def worker_address(index: int) -> str:
    return f"10.231.{index + 1}.2"


@dataclass
class Network:
    """The router namespace and one namespace per worker; up() builds them, down() removes them."""

    workers: int

    def namespace(self, index: int) -> str:
        return f"jobretry-chaos-w{index}"

    def prefix(self, index: int) -> list[str]:
        """The command prefix that runs a process on worker ``index``'s host."""
        return ["ip", "netns", "exec", self.namespace(index)]

    def up(self) -> None:
        try:
            self._build()
        except OSError:
            self.down()
            raise

    def _build(self) -> None:
        _ip("netns", "add", ROUTER)
        _ip("-n", ROUTER, "link", "set", "lo", "up")
        _ip("link", "add", "jrc-h", "type", "veth", "peer", "name", "jrc-r0", "netns", ROUTER)
        _ip("addr", "add", f"{HOST_ADDRESS}/30", "dev", "jrc-h")
        _ip("link", "set", "jrc-h", "up")
        _ip("-n", ROUTER, "addr", "add", "10.231.0.2/30", "dev", "jrc-r0")
        _ip("-n", ROUTER, "link", "set", "jrc-r0", "up")
        _ip("route", "add", str(SUBNET), "via", "10.231.0.2", "dev", "jrc-h")
        subprocess.run(  # noqa: S603
            ["ip", "netns", "exec", ROUTER, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"],  # noqa: S607
            check=True,
        )
        for i in range(self.workers):
            ns, router_side, worker_side = self.namespace(i), f"jrc-a{i}", f"jrc-b{i}"
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            veth = ("type", "veth", "peer", "name", worker_side, "netns", ns)
            _ip("-n", ROUTER, "link", "add", router_side, *veth)
            _ip("-n", ROUTER, "addr", "add", f"10.231.{i + 1}.1/30", "dev", router_side)
            _ip("-n", ROUTER, "link", "set", router_side, "up")
            _ip("-n", ns, "addr", "add", f"{worker_address(i)}/30", "dev", worker_side)
            _ip("-n", ns, "link", "set", worker_side, "up")
            _ip("-n", ns, "route", "add", "default", "via", f"10.231.{i + 1}.1")

    def down(self) -> None:
        """Remove whatever exists of it (a veth goes with its namespace); never raises."""
        for ns in [*(self.namespace(i) for i in range(self.workers)), ROUTER]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)  # noqa: S603, S607
        subprocess.run(["ip", "link", "del", "jrc-h"], capture_output=True, check=False)  # noqa: S607

    def link(self, index: int) -> Cut:
        return Cut(worker_address(index), 100 + 2 * index)


@dataclass
class Cut:
    """One worker's link, as the partition faults use a relay: blackhole() and heal()."""

    address: str
    priority: int

    def _rules(self, action: str) -> None:
        _ip("-n", ROUTER, "rule", action, "from", self.address, "blackhole", "priority", str(self.priority))
        _ip("-n", ROUTER, "rule", action, "to", self.address, "blackhole", "priority", str(self.priority + 1))

    def blackhole(self) -> None:
        self._rules("add")

    def heal(self, *, reset: bool = False) -> None:
        """Delete the rules; a kernel cut cannot reset the worker's connections, so ``reset`` is refused."""
        if reset:
            raise ValueError("the namespace variant heals without resetting connections")
        self._rules("del")

    def shape(self, delay: float = 0.0, jitter: float = 0.0, loss: float = 0.0, stall: float = 0.0) -> None:
        """Latency and loss would need netem; the schedule of this variant has none."""
        if delay or jitter or loss or stall:
            raise ValueError("the namespace variant has no latency or loss (no netem)")
