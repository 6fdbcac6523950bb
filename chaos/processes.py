"""Worker and sidecar processes, and the supervisor that brings killed workers back.

A production worker runs under a process manager that restarts it; the
supervisor thread plays that part, so SIGKILLs and the poison job shrink the
pool only for a moment. It also keeps the exit record of every process: a
worker that exits without the harness (or the poison job) killing it is a
finding, reported by the invariant table.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Exit:
    """One process that ended: how, and whether the harness expected it."""

    name: str
    pid: int
    returncode: int
    killed_by_harness: bool
    #: Ended by stop() at the end of the run (SIGTERM: a graceful exit is code 0).
    stopped: bool = False


@dataclass
class Slot:
    """One place in the pool; its process is replaced when it dies."""

    name: str
    command: list[str]
    env: dict[str, str] | None = None  # the pool's when None (a worker behind a relay has its own URL)
    process: subprocess.Popen[bytes] | None = None
    killed: bool = False  # the harness sent SIGKILL to the current process
    starts: int = 0


@dataclass
class Pool:
    """Supervised processes sharing one environment and a log directory."""

    env: dict[str, str]
    log_dir: Path
    slots: list[Slot] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    restart_delay: float = 0.5

    def add(
        self, name: str, *args: str, env: dict[str, str] | None = None, prefix: list[str] | None = None
    ) -> Slot:
        """``prefix`` runs the process elsewhere (``ip netns exec NS``, which execs: the pid is Python's)."""
        slot = Slot(name, [*(prefix or []), sys.executable, *args], env)
        with self.lock:
            self.slots.append(slot)
            self._start(slot)
        return slot

    def _start(self, slot: Slot) -> None:
        slot.starts += 1
        log = (self.log_dir / f"{slot.name}.log").open("ab")
        slot.process = subprocess.Popen(  # noqa: S603
            slot.command, cwd=ROOT, env=slot.env or self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        slot.killed = False

    def supervise(self) -> None:
        """Thread body: restart dead processes until stop() is called."""
        while not self.stopping.wait(0.1):
            with self.lock:
                for slot in self.slots:
                    process = slot.process
                    if process is None or process.poll() is None:
                        continue
                    self.exits.append(Exit(slot.name, process.pid, process.returncode, slot.killed))
                    slot.process = None
                    threading.Timer(self.restart_delay, self._restart, [slot]).start()

    def _restart(self, slot: Slot) -> None:
        with self.lock:
            if not self.stopping.is_set() and slot.process is None and slot in self.slots:
                self._start(slot)

    def live_pids(self, prefix: str = "worker") -> list[int]:
        with self.lock:
            return [
                s.process.pid
                for s in self.slots
                if s.name.startswith(prefix) and s.process is not None and s.process.poll() is None
            ]

    def live_slots(self, prefix: str) -> list[tuple[str, int]]:
        """(slot name, pid) of each live process named ``prefix*``, not one just sent SIGKILL."""
        with self.lock:
            return [
                (s.name, s.process.pid)
                for s in self.slots
                if s.name.startswith(prefix)
                and s.process is not None
                and not s.killed
                and s.process.poll() is None
            ]

    def sigkill(self, pid: int) -> bool:
        """SIGKILL one live process; the supervisor restarts it."""
        with self.lock:
            for slot in self.slots:
                if slot.process is not None and slot.process.pid == pid and slot.process.poll() is None:
                    slot.killed = True
                    os.kill(pid, signal.SIGKILL)
                    return True
        return False

    def stop(self, prefix: str, timeout: float) -> None:
        """SIGTERM the processes named ``prefix*`` (graceful), SIGKILL what is left after ``timeout``."""
        with self.lock:
            chosen = [s for s in self.slots if s.name.startswith(prefix)]
            self.slots = [s for s in self.slots if s not in chosen]
        running = [s.process for s in chosen if s.process is not None]
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # in case a pause fault left it stopped
                process.terminate()
        deadline = time.monotonic() + timeout
        for slot, process in [(s, s.process) for s in chosen if s.process is not None]:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            with self.lock:
                self.exits.append(Exit(slot.name, process.pid, process.returncode, True, stopped=True))

    def shutdown(self, timeout: float) -> None:
        self.stop("", timeout)
        self.stopping.set()
