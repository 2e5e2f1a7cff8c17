"""Learners' system users and their passwords, created for one room and removed with it.

Each learner runs as their own system user (``labkit-learner07``), with a home of mode 0700: the
kernel of one learner is a process of that user and cannot read or write another's files, by the
kernel's own permission checks. The users are created with :func:`create_learner` and carry a
mark in their comment field (GECOS) naming the room that made them; :func:`remove_learner`
refuses to remove a user without that exact mark, so a room never removes an account it did not
create, whatever its name.

A user id is a key to files: a file a removed learner left in /tmp belongs to whoever gets that
id next. So each learner gets an id that owns nothing on the box (:func:`free_id`: no account,
no process, no file in the shared folders or at the top of /home), and removing a learner ends
every process of theirs in one sweep (:func:`kill_all_of`) and removes what they own in the shared
folders (:func:`remove_owned`) before the account goes.

Passwords are generated per learner and kept only as salted scrypt hashes in a root-only file that
the hub's authenticator reads (:mod:`labkit_room.auth`, which makes and checks them).
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from labkit_room import sandbox
from labkit_room.room import is_learner_name

HOME_ROOT = Path("/home")
LOGIN_DEFS = Path("/etc/login.defs")
MARK_PREFIX = "labkit hub room "


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


def _login_def(name: str, default: int) -> int:
    try:
        for line in LOGIN_DEFS.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == name and parts[1].isdigit():
                return int(parts[1])
    except OSError:
        pass
    return default


def owned_ids(folders=sandbox.SHARED_FOLDERS, home_root: Path = HOME_ROOT) -> set[int]:
    """Every uid and gid that owns a process, a file in the shared folders, a System V IPC object or
    POSIX message queue, or an entry at the top of `home_root`: ids a new account must not get."""
    ids: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                info = entry.stat()
            except OSError:
                continue
            ids.update((info.st_uid, info.st_gid))
    for folder in folders:
        for path in _walk(Path(folder)):
            try:
                info = path.lstat()
            except OSError:  # gone since its folder was listed
                continue
            ids.update((info.st_uid, info.st_gid))
    for _kind, _id, uid, cuid in sysv_ipc():  # an IPC object of an id outlives its user
        ids.update((uid, cuid))
    for path in _walk(MQUEUE):
        try:
            info = path.lstat()
        except OSError:
            continue
        ids.update((info.st_uid, info.st_gid))
    if home_root.is_dir():
        for path in home_root.iterdir():
            try:
                info = path.lstat()
            except OSError:
                continue
            ids.update((info.st_uid, info.st_gid))
    return ids


# System V IPC, which outlives every process (a segment stays until removed): kind, its /proc table,
# its id column, and the ctl call that removes one (IPC_RMID).
_SYSV_IPC = (("shm", "shmid"), ("sem", "semid"), ("msg", "msqid"))
_IPC_RMID = 0
# POSIX message queues, where the box mounts their file system (POSIX shared memory is /dev/shm).
MQUEUE = Path("/dev/mqueue")


def sysv_ipc(table_root: Path = Path("/proc/sysvipc")) -> list[tuple[str, int, int, int]]:
    """Every System V IPC object of this IPC namespace: (kind, id, owner uid, creator uid)."""
    found = []
    for kind, id_column in _SYSV_IPC:
        try:
            header, *rows = (table_root / kind).read_text().splitlines()
        except (OSError, ValueError):
            continue
        names = header.split()
        for row in rows:
            fields = dict(zip(names, row.split(), strict=False))
            try:
                found.append((kind, int(fields[id_column]), int(fields["uid"]), int(fields["cuid"])))
            except (KeyError, ValueError):
                continue
    return found


def remove_ipc(uids: set[int]) -> list[str]:
    """Remove every System V segment, semaphore set and message queue that `uids` own or created, and
    their POSIX message queues. Returns what was removed ("shm 32769", "mqueue /name")."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    calls = {"shm": lambda i: libc.shmctl(i, _IPC_RMID, None), "sem": lambda i: libc.semctl(i, 0, _IPC_RMID),
             "msg": lambda i: libc.msgctl(i, _IPC_RMID, None)}
    removed = []
    for kind, ipc_id, uid, cuid in sysv_ipc():
        if (uid in uids or cuid in uids) and calls[kind](ipc_id) == 0:
            removed.append(f"{kind} {ipc_id}")
    removed += [f"mqueue /{path.name}" for path in remove_owned(uids, folders=(str(MQUEUE),))]
    return removed


def free_id(taken: set[int]) -> int:
    """The lowest id from UID_MIN that is no user's, no group's and owns nothing (`taken`)."""
    users = {e.pw_uid for e in pwd.getpwall()}
    groups = {g.gr_gid for g in grp.getgrall()}
    low, high = max(_login_def("UID_MIN", 1000), _login_def("GID_MIN", 1000)), _login_def("UID_MAX", 60000)
    for candidate in range(low, high + 1):
        if candidate not in users and candidate not in groups and candidate not in taken:
            return candidate
    raise AccountError(f"no user id from {low} to {high} is free of accounts, processes and files")


def create_learner(name: str, room_id: str, uid: int, disk_bytes: int | None = None) -> Account:
    """A new system user `name` with id `uid`, a group of the same id, and a home of mode 0700,
    marked as this room's. With `disk_bytes` the home is a tmpfs of that size
    (:func:`labkit_room.sandbox.mount_home`); either way it holds the learner's private
    copies of the shared folders."""
    if not is_learner_name(name):
        raise AccountError(f"refusing to create {name!r}: not a learner name of this kit")
    if exists(name):
        raise AccountError(f"a user {name!r} already exists on this machine; a room creates its learners afresh "
                           "(python -m labkit hub stop removes the ones a room made)")
    home = HOME_ROOT / name
    if home.exists():
        raise AccountError(f"{home} already exists; a room gives each learner a fresh home")
    _run(["groupadd", "--gid", str(uid), name])
    _run(["useradd", "--uid", str(uid), "--gid", str(uid), "--no-create-home", "--home-dir", str(home),
          "--shell", "/bin/bash", "--comment", room_mark(room_id), name])
    if disk_bytes:
        sandbox.mount_home(home, disk_bytes, uid, uid)
    else:
        home.mkdir(mode=0o700)
        os.chown(home, uid, uid)
        sandbox.make_private_folders(home, uid, uid)
    os.chmod(home, 0o700)
    return Account(name, uid, uid, home)


def pids_of(uid: int) -> list[int]:
    """Processes whose real uid is `uid` (from /proc), zombies excepted: a zombie has ended and holds
    nothing but its entry, until its parent (or init, for an orphan) reads its status."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
                found.append(int(entry.name))
        except (OSError, ValueError, KeyError):
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


def kill_all_of(uid: int, timeout_s: float = 20) -> None:
    """SIGKILL every process of `uid` at once, until none is left: a process running as `uid` calls
    kill() on pid minus one, which signals every process that user may signal, with new processes held off while
    it does. A process that re-forks every millisecond is caught so, where reading a pid and then
    signalling it is not; it even slips past a scan of /proc (its pid is new each time), so the
    sweep runs whatever the scan says, and ends after two sweeps in a row find nothing left."""
    def sweep():  # in the child, once it is `uid` (subprocess sets the ids before it runs this)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:  # nothing of `uid` left to signal
            pass

    deadline = time.monotonic() + timeout_s
    quiet = 0
    while quiet < 2:
        subprocess.run(["true"], user=uid, group=uid, extra_groups=[], preexec_fn=sweep, capture_output=True)
        time.sleep(0.05)
        quiet = quiet + 1 if not pids_of(uid) else 0
        if time.monotonic() > deadline:
            raise AccountError(f"processes of uid {uid} still run after SIGKILL: {pids_of(uid)}")


def _walk(folder: Path):
    """Every entry under `folder`, top down, never following a link (an unreadable folder is skipped)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        yield Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path))


def remove_owned(uids: set[int], folders=sandbox.SHARED_FOLDERS) -> list[Path]:
    """Remove what `uids` own in the shared folders (a folder of theirs with all in it; links
    themselves, never what they point to). Returns what was removed."""
    removed = []
    for folder in folders:
        todo = [Path(folder)]
        while todo:
            try:
                entries = list(os.scandir(todo.pop()))
            except OSError:
                continue
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:  # gone since the folder was listed: shared folders change under us
                    continue
                path = Path(entry.path)
                if info.st_uid in uids:
                    if stat.S_ISDIR(info.st_mode):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
                    removed.append(path)
                elif stat.S_ISDIR(info.st_mode):
                    todo.append(path)
    return removed


def remove_learner(name: str, room_id: str) -> bool:
    """Remove user `name`, every process of theirs, what they own in the shared folders, their IPC
    objects and their home, if this room created it. Returns False if there is no such user; raises AccountError (and
    removes nothing) if the user is not this room's."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return False
    if not is_learner_name(name) or entry.pw_gecos != room_mark(room_id):
        raise AccountError(f"refusing to remove user {name!r}: it was not created by this room "
                           f"(its comment is {entry.pw_gecos!r}, not {room_mark(room_id)!r})")
    kill_all_of(entry.pw_uid)
    remove_owned({entry.pw_uid})
    remove_ipc({entry.pw_uid})
    home = Path(entry.pw_dir)
    if home == HOME_ROOT / name:
        sandbox.unmount_home(home)
    _run(["userdel", name])
    try:
        grp.getgrnam(name)
        _run(["groupdel", name])
    except KeyError:
        pass
    # Remove the home only where this room put it.
    if home.exists() and home == HOME_ROOT / name:
        shutil.rmtree(home)
    return True


def room_users(room_id: str) -> list[str]:
    """Every user on this machine that carries this room's mark."""
    return sorted(e.pw_name for e in pwd.getpwall() if e.pw_gecos == room_mark(room_id))
