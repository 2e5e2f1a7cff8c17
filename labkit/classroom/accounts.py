"""Learners' system users and their passwords, created for one room and removed with it.

Each learner runs as their own system user (``labkit-learner07``), with a home of mode 0700: the
kernel of one learner is a process of that user and cannot read or write another's files, by the
kernel's own permission checks. The users are created with :func:`create_learner` and carry a
mark in their comment field (GECOS) naming the room that made them; :func:`remove_learner`
refuses to remove a user without that exact mark, so a room never removes an account it did not
create, whatever its name.

Passwords are generated per learner (:func:`new_password`) and kept only as salted scrypt hashes
in a root-only file that the hub's authenticator reads (:mod:`labkit.classroom.auth`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.classroom.room import is_learner_name

HOME_ROOT = Path("/home")
MARK_PREFIX = "labkit hub room "
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


class AccountError(RuntimeError):
    """A user cannot be created or removed as asked (one line, for the instructor)."""


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: Path


def room_mark(room_id: str) -> str:
    return MARK_PREFIX + room_id


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AccountError(f"{' '.join(cmd)} failed: {(done.stderr or done.stdout).strip()}")


def exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def create_learner(name: str, room_id: str) -> Account:
    """A new system user `name` with its own group and a home of mode 0700, marked as this room's."""
    if not is_learner_name(name):
        raise AccountError(f"refusing to create {name!r}: not a learner name of this kit")
    if exists(name):
        raise AccountError(f"a user {name!r} already exists on this machine; a room creates its learners afresh "
                           "(python -m labkit hub stop removes the ones a room made)")
    home = HOME_ROOT / name
    if home.exists():
        raise AccountError(f"{home} already exists; a room gives each learner a fresh home")
    _run(["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash", "--user-group",
          "--comment", room_mark(room_id), name])
    os.chmod(home, 0o700)
    entry = pwd.getpwnam(name)
    return Account(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def pids_of(uid: int) -> list[int]:
    """Processes whose real uid is `uid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("Uid:"):
                    if int(line.split()[1]) == uid:
                        found.append(int(entry.name))
                    break
        except (OSError, ValueError):
            continue
    return found


def signal_until_gone(alive, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, the pids ``alive()`` returns, waiting up to `grace_s` after each signal
    for ``alive()`` to come back empty (it is asked again each time: the pids still running)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in alive():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive():
            return


def end_processes(uid: int, grace_s: float = 5.0) -> int:
    """SIGTERM, then SIGKILL, every process of `uid`, each by its pid; returns how many there were."""
    count = len(pids_of(uid))
    signal_until_gone(lambda: pids_of(uid), grace_s)
    return count


def remove_learner(name: str, room_id: str) -> bool:
    """Remove user `name`, its processes and its home, if this room created it. Returns False if there
    is no such user; raises AccountError (and removes nothing) if the user is not this room's."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return False
    if not is_learner_name(name) or entry.pw_gecos != room_mark(room_id):
        raise AccountError(f"refusing to remove user {name!r}: it was not created by this room "
                           f"(its comment is {entry.pw_gecos!r}, not {room_mark(room_id)!r})")
    end_processes(entry.pw_uid)
    home = Path(entry.pw_dir)
    _run(["userdel", "--remove", name])
    # userdel leaves a home it could not empty; remove it only where this room put it.
    if home.exists() and home == HOME_ROOT / name:
        shutil.rmtree(home)
    return True


def room_users(room_id: str) -> list[str]:
    """Every user on this machine that carries this room's mark."""
    return sorted(e.pw_name for e in pwd.getpwall() if e.pw_gecos == room_mark(room_id))


# -- passwords ------------------------------------------------------------------------------------

def new_password() -> str:
    """A password for one learner: 12 characters a person can type from a slip of paper."""
    alphabet = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i
    return "-".join("".join(secrets.choice(alphabet) for _ in range(4)) for _ in range(3))


def hash_password(password: str, salt: bytes | None = None) -> dict:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)
    return {"salt": salt.hex(), "scrypt": digest.hex()}


def check_password(password: str, entry: dict) -> bool:
    digest = hashlib.scrypt(password.encode(), salt=bytes.fromhex(entry["salt"]), **_SCRYPT)
    return hmac.compare_digest(digest.hex(), entry["scrypt"])
