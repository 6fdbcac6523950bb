"""Where a django-q2 cluster keeps its killed-worker claims (:mod:`.claims`): only its user can use it.

Claims hold task arguments (with Redis, the whole task), and a planted
claim would record a lost attempt for any queued task. The default
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
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import tempfile
from pathlib import Path

logger = logging.getLogger("django_jobretry")

#: Fallback directories tried, in order, after the default one.
FALLBACKS = 4
#: The HMAC's salt: names of fallbacks are not derived from SECRET_KEY for anything else.
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
