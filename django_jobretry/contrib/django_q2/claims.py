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

The directory (:func:`settled`) is private to the cluster's user. Claims
hold task arguments (with Redis, the whole task), and a planted claim
would record a lost attempt for any queued task. The default
directory has a predictable name in the shared temporary directory
(:func:`directory`), so another local user can create it first, or it can
be opened up later. It is used only when it is a real directory (not a
symbolic link), owned by this user and closed to everyone else
(:func:`problem`); nothing in a refused one is written or read.

Refusing it must not stop the cluster either. So the claims then go to a
fallback next to it whose name is an HMAC of the cluster's identity under
``SECRET_KEY`` (:func:`fallbacks`): every process of the cluster, forked or
spawned, computes the same name, and no other user can know it before it
exists. Each fallback is held to the same rule, so one taken by someone who
saw its name is skipped for the next. The first usable one is created 0700
and a warning names both directories and why the default was refused.
Only when every one is refused do tasks run unclaimed (an error is logged).
The temporary directory's sticky bit keeps others from renaming ours away.

Files, not the database: the success path must not pay a database write.
The directory is local to the host, as django-q2's workers are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from django.core.signing import BadSignature

logger = logging.getLogger("django_jobretry")

SUFFIX = ".claim"

# The directory: private to the cluster's user, or a fallback only it can name (see the docstring).

#: Fallback directories tried, in order, after the default one.
FALLBACKS = 4
#: The HMAC's salt: names of fallbacks are not derived from SECRET_KEY for anything else. The module
#: this lived in once; a fixed value (another would move every cluster's fallback directory).
SALT = "django_jobretry.contrib.django_q2.claim_directory"


class UnsafeClaimDirectory(OSError):
    """A claim directory is not private to this user; the message says which and why."""

    def __init__(self, message: str, why: str = "") -> None:
        super().__init__(message)
        #: What is wrong with the directory (:func:`problem`'s answer).
        self.why = why or message


def directory() -> Path:
    """Claims of this cluster (name) on this database, for this user, in the system's temporary directory."""
    from django.db import connections
    from django_q.conf import Conf

    database = connections[Conf.ORM or "default"].settings_dict
    identity = f"{Conf.CLUSTER_NAME}|{database.get('HOST')}|{database.get('PORT')}|{database.get('NAME')}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"jobretry-django-q2-{os.geteuid()}-{digest}"


def fallbacks(default: Path) -> list[Path]:
    """The directories tried after ``default``, in order: names no one without SECRET_KEY can predict."""
    from django.utils.crypto import salted_hmac

    names = (
        salted_hmac(SALT, f"{default.name}|{n}", algorithm="sha256").hexdigest()[:24]
        for n in range(FALLBACKS)
    )
    return [default.with_name(f"{default.name}-{name}") for name in names]


def problem(path: Path) -> str | None:
    """Why ``path`` must not hold claims; None when it is missing or private (ours, 0700-like)."""
    try:
        found = os.lstat(path)  # the entry itself: a symbolic link is not followed
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(found.st_mode):
        return f"{path} is a symbolic link, not a directory"
    if not stat.S_ISDIR(found.st_mode):
        return f"{path} is not a directory"
    if found.st_uid != os.geteuid():
        return f"{path} belongs to uid {found.st_uid}, not to this user (uid {os.geteuid()})"
    if found.st_mode & 0o077:
        return f"{path} is open to other users (mode {stat.S_IMODE(found.st_mode):o}, expected 700)"
    return None


def private(path: Path) -> Path:
    """``path``, created 0700 when missing; UnsafeClaimDirectory when it is not private to us."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    why = problem(path)
    if why is not None:
        raise UnsafeClaimDirectory(
            f"the django-q2 claim directory {why}: claims hold task arguments, so none is written or read "
            "there and the task runs unclaimed",
            why,
        )
    return path


def usable() -> tuple[Path | None, str | None]:
    """(the directory claims go to, why the default one is refused), creating nothing.

    The path is None when every candidate is refused; the reason is None when
    the default is usable. What the system check reports.
    """
    default = directory()
    refused = problem(default)
    if refused is None:
        return default, None
    return next((path for path in fallbacks(default) if problem(path) is None), None), refused


#: The directory this process settled on, by pid (a forked worker settles for itself).
_settled: dict[int, Path] = {}


def settled() -> Path:
    """The claim directory of this process, made private when missing; UnsafeClaimDirectory when none is.

    The default one if it is private to this user, else the first private
    fallback, with a warning naming both. Checked again at each call (an
    ``lstat``), so a directory removed and taken over meanwhile is left for
    the next candidate.
    """
    pid = os.getpid()
    known = _settled.get(pid)
    if known is not None and problem(known) is None:
        return known
    default = directory()
    reasons: list[str] = []
    for path in [default, *fallbacks(default)]:
        try:
            _settled[pid] = private(path)
        except UnsafeClaimDirectory as exc:
            reasons.append(exc.why)
            continue
        if reasons:
            logger.warning(
                "the django-q2 claim directory %s: claims are kept in %s instead",
                reasons[0],
                path,
                extra={"outcome": "claim_dir_fallback", "refused": str(default), "used": str(path)},
            )
        return path
    raise UnsafeClaimDirectory(
        f"the django-q2 claim directory {reasons[0]}, and so is every fallback ({'; '.join(reasons[1:])}): "
        "claims hold task arguments, so none is written or read and tasks run unclaimed. Remove them; "
        "the next worker creates one again, private"
    )


# The claims themselves: written at pre_execute, released when the task ends, recovered at post_spawn.


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
