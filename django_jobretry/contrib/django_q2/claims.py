"""Killed workers: a claim file per running task, picked up by the replacement worker.

django-q2 records nothing when a worker process dies mid-task (SIGKILL, out
of memory, a guard kill past the timeout): the queue row comes back after
``retry`` seconds with the same payload, so the lost attempt would not count
and a task that kills its worker would loop forever.

So a worker notes the task it starts in a small file named after its pid
(``pre_execute``) and removes it when the task ends, whatever the outcome
(``post_execute_in_worker``). Every worker django-q2 starts, at cluster start
or to replace a dead one, fires ``post_spawn``: it then looks for claims of
pids that no longer run, takes each with an atomic rename (two new workers
cannot both take one), and records the lost attempt like a failure
(``ended: "worker_exit"``, retryable) through the monitor's code path: a
retry after the policy's delay, or the dead letter. The same fence applies:
a row whose lock has passed (django-q2 delivered it again) is left alone.

With the Redis broker nothing comes back: the task was popped from its
list and exists only in the worker. So there the claim carries the whole
package as django-q2 signed it (and the timeout the worker popped), the
recovery checks the signature, and the lost attempt is recorded from the
package: a retry re-sends it after the delay, or it is buried. The file is
the only copy of the task's arguments outside the worker, in a directory
only the cluster's user can read, as they are in Redis.

That directory is private to the cluster's user; which one it is, and what
happens when another user took it first, is :mod:`.claim_directory`.

Files, not the database: the success path must not pay a database write.
The directory is local to the host, as django-q2's workers are.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from django.core.signing import BadSignature

from django_jobretry.contrib.django_q2.claim_directory import UnsafeClaimDirectory, private, settled

logger = logging.getLogger("django_jobretry")

SUFFIX = ".claim"


#: The claim file each process wrote last, by pid, for its release.
_claimed: dict[int, Path] = {}


def _write(path: Path, text: str) -> None:
    """Write then rename, so a reader never sees half a claim; the directory is made when missing."""
    partial = path.with_suffix(".partial")
    try:
        partial.write_text(text)
    except FileNotFoundError:  # a cleaner emptied the temporary directory
        private(path.parent)
        partial.write_text(text)
    os.replace(partial, path)
    _claimed[os.getpid()] = path


def claim(task: dict[str, Any], policy: str, started: str, popped: dict[str, Any] | None = None) -> None:
    """Note the task this worker starts; never fails the task."""
    if task.get("sync"):
        return  # runs in the caller, which sees its exception
    record: dict[str, Any] = {
        "ack_id": task.get("ack_id"),
        "id": task.get("id"),
        "func": str(task.get("func")),
        "cluster": task.get("cluster"),
        "policy": policy,
        "started": started,
    }
    try:
        if record["ack_id"] is None:  # Redis: this is the last copy of the task
            from django_q.signing import SignedPackage

            record.update(package=SignedPackage.dumps(task), popped=popped or {})
        _write(settled() / f"{os.getpid()}{SUFFIX}", json.dumps(record))
    except UnsafeClaimDirectory as exc:
        logger.error("%s", exc, extra={"outcome": "claim_dir_unsafe"})  # the task runs unclaimed
    except Exception:  # a full disk, an argument pickle refuses: the task runs unclaimed
        logger.warning("could not write a claim file for a django-q2 task", extra={"outcome": "claim_error"})


def release() -> None:
    """The task ended: its claim goes, from the directory it was written to."""
    path = _claimed.pop(os.getpid(), None)
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def recover_lost(**kwargs: Any) -> None:
    """``post_spawn``: record the attempts of workers that died mid-task."""
    from django_jobretry.contrib.django_q2.monitor import record_failure

    try:
        found = list(settled().glob(f"*{SUFFIX}"))
    except UnsafeClaimDirectory as exc:  # claims there may be planted: none is read
        logger.error("%s", exc, extra={"outcome": "claim_dir_unsafe"})
        return
    except OSError:
        return
    for path in found:
        try:
            pid = int(path.name.removesuffix(SUFFIX))
        except ValueError:
            continue
        if pid == os.getpid() or alive(pid):
            continue
        taken = path.with_name(f"{path.name}.taken-{os.getpid()}")
        try:
            os.rename(path, taken)
            record = json.loads(taken.read_text())
        except (OSError, ValueError):
            continue  # another new worker took it first, or it is unreadable
        failure = {
            "kind": "retryable",
            "ended": "worker_exit",
            "requested_delay": None,
            "error_class": "",
            "message": f"django-q2 worker {pid} died during the task",
            "traceback": "",
        }
        try:
            task, state = _lost(record)
            state.update(policy=record["policy"], failure=failure)
            record_failure(task, state)
        except BadSignature:
            logger.warning(
                "a django-q2 claim file is not signed with this SECRET_KEY; dropped",
                extra={"outcome": "claim_unsigned"},
            )
        except Exception:
            logger.exception("could not record a lost django-q2 attempt", extra={"outcome": "record_error"})
            if record.get("package") is not None:  # Redis: the only copy; the next new worker tries again
                with contextlib.suppress(OSError):
                    os.rename(taken, path)
        taken.unlink(missing_ok=True)


def _lost(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task and the worker-side state a claim stands for, as the monitor would get them."""
    if record.get("package") is None:  # ORM: the queue row is the task; the monitor reads it there
        task = {"func": record["func"], "id": record["id"], "cluster": record["cluster"]}
        return task, {"ack_id": record["ack_id"], "first_attempt_at": record["started"]}
    from django_q.signing import SignedPackage

    from django_jobretry.contrib.django_q2 import KEY

    task = SignedPackage.loads(record["package"])  # BadSignature: not a claim django-q2 signed
    state = {**dict(task.get(KEY) or {}), **record.get("popped", {}), "ack_id": None}
    state.setdefault("first_attempt_at", record["started"])
    return task, state
