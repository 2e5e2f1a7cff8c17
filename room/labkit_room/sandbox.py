"""What the room does to a learner's server before it runs, as root, in the child the spawner
forks: its control group, private temporary folders, its rlimits; then the spawner becomes the
learner. Every process the learner starts later descends from that server and inherits all three.

    group            the learner's control group (:mod:`labkit_room.groups`): one memory cap
                     for all their processes and the shared memory they write, one process count,
                     an equal CPU share
    private folders  a mount namespace of the server's own, in which /tmp, /var/tmp, /dev/shm and
                     /run/lock are folders of the learner's home: nothing a learner writes there is
                     seen by another, and no learner can plant a file where another's programs look
                     (torch's /tmp/torchinductor_<name>, say); the home itself is a tmpfs of the
                     room's disk size (:func:`mount_home`), so those folders count against it too
    OOM order        each kernel raises its own oom_score_adj (anyone may raise theirs; lowering the
                     server's instead needs a capability a container may withhold): when the group's
                     cap ends a process, it ends a kernel or what a kernel started, not first the
                     server that holds the learner's session
    rlimits          RLIMIT_DATA (per process, under the group's cap: a large allocation is a
                     MemoryError the learner can read before the group's OOM killer answers),
                     RLIMIT_NPROC (per uid, which is per learner here: the process count where no
                     group can be made), RLIMIT_FSIZE (a file can never outgrow the disk size),
                     RLIMIT_CORE 0 (no core files of a kernel filling a home)

Each holds where the box allows it and the room says which at start (:func:`capabilities`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import subprocess
from dataclasses import dataclass
from pathlib import Path

from labkit_room import groups, learner_paths

# The shared folders of a Linux box a learner can write to, each replaced by one of their own.
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
# Where their own copies live, under the home (a dot folder: JupyterLab's file browser hides it).
PRIVATE_ROOT = ".room"

# A kernel's place in the OOM killer's order, against its server's default 0 (labkit_room.kernel).
KERNEL_OOM_SCORE_ADJ = 500

_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18


def private_folder(home: Path, shared: str) -> Path:
    """The learner's own copy of a shared folder: ~/.room/tmp for /tmp, ~/.room/var-tmp for /var/tmp."""
    return Path(home) / PRIVATE_ROOT / shared.strip("/").replace("/", "-")


@dataclass(frozen=True)
class Plan:
    """What :func:`enter` applies to one learner's server (kept in the room's file, as JSON)."""

    room_id: str
    learner: str
    home: str
    hierarchy: dict       # groups.Hierarchy.to_json()
    process_bytes: int    # RLIMIT_DATA
    tasks: int            # RLIMIT_NPROC
    file_bytes: int       # RLIMIT_FSIZE
    private_folders: bool  # a mount namespace with the learner's own shared folders
    uid: int = -1          # the learner's: every private folder must be theirs

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _bind(libc, source: Path, target: str) -> None:
    _check(libc.mount(str(source).encode(), target.encode(), None, _MS_BIND, None), f"bind {source} on {target}")


def hidden_by_private_folders(path: Path) -> str | None:
    """The shared folder `path` lies under (a server with private folders sees its own copy there,
    not `path`), or None."""
    resolved = Path(path).resolve()
    return next((shared for shared in SHARED_FOLDERS if resolved.is_relative_to(Path(shared).resolve())), None)


def private_folder_names() -> list[str]:
    """The private folders' paths relative to the home (.room/tmp, .room/var-tmp, ...)."""
    return [str(private_folder(Path("."), shared)) for shared in SHARED_FOLDERS]


def open_private_folders(home: Path, uid: int) -> dict[str, int]:
    """A descriptor of each private folder of the learner `uid` whose shared folder exists here, each
    opened below `home` by descriptor, never through a link, and checked to be a folder of theirs
    (:mod:`labkit_room.learner_paths`). Raises LearnerPathError (one line) on the first that is
    a link, not a folder, or someone else's: a learner who swaps ~/.room/tmp for a link to another
    learner's folder gets no server, not the other's files."""
    fds: dict[str, int] = {}
    try:
        for shared in SHARED_FOLDERS:
            if os.path.isdir(shared):
                fds[shared] = learner_paths.open_folder(home, private_folder(Path("."), shared), uid)
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    return fds


def enter_private_folders(home: Path, uid: int) -> None:
    """This process (and what it starts) gets a mount namespace of its own, in which each shared
    folder that exists is the learner's private copy under `home`. Root only. The copies are opened
    (by descriptor, checked: :func:`open_private_folders`) before the first bind, so a home that
    lies under a shared folder still binds whole."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Nothing mounted here propagates back to the box, nor the box's later mounts in.
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
    copies = open_private_folders(home, uid)  # in this namespace: a bind's source must be of it
    try:
        for shared, fd in copies.items():
            _bind(libc, Path(f"/proc/self/fd/{fd}"), shared)
    finally:
        for fd in copies.values():
            os.close(fd)


def enter(plan: Plan) -> None:
    """Apply `plan` to the calling process (the spawner's preexec, as root, before it becomes the
    learner). A step the box refuses is skipped: :func:`capabilities` said so at the room's start."""
    # The box's default priority: the hub's higher one (room.HUB_NICE) is the room's, not the learner's.
    os.setpriority(os.PRIO_PROCESS, 0, 0)
    hierarchy = groups.Hierarchy.from_json(plan.hierarchy)
    if hierarchy.version in ("v1", "v2"):
        hierarchy.join(plan.room_id, plan.learner)
    if plan.private_folders:
        enter_private_folders(Path(plan.home), plan.uid)
    resource.setrlimit(resource.RLIMIT_DATA, (plan.process_bytes, plan.process_bytes))
    resource.setrlimit(resource.RLIMIT_NPROC, (plan.tasks, plan.tasks))
    resource.setrlimit(resource.RLIMIT_FSIZE, (plan.file_bytes, plan.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# -- the learner's home: a tmpfs of the room's disk size ----------------------------------------------

def mount_home(home: Path, size_bytes: int, uid: int, gid: int) -> None:
    """Mount a tmpfs of `size_bytes` on `home`, owned by the learner, mode 0700, with their private
    copies of the shared folders in it. Its pages count in the memory group of whoever writes them:
    a learner's files are part of their memory, and their disk can never outgrow `size_bytes`."""
    home.mkdir(mode=0o700, exist_ok=False)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0700,uid={uid},gid={gid},"
                           "nosuid,nodev", "tmpfs", str(home)], capture_output=True, text=True)
    if done.returncode != 0:
        home.rmdir()
        raise OSError(f"mount tmpfs on {home}: {(done.stderr or done.stdout).strip()}")
    make_private_folders(home, uid, gid)


def make_private_folders(home: Path, uid: int, gid: int) -> None:
    """The learner's private folders, made by descriptor below `home` (never through a link)."""
    for relative in private_folder_names():
        os.close(learner_paths.open_folder(home, relative, uid, create=True))


def unmount_home(home: Path) -> bool:
    """Unmount a learner's tmpfs home (its files go with it); True if one was mounted there."""
    if not os.path.ismount(home):
        return False
    done = subprocess.run(["umount", str(home)], capture_output=True, text=True)
    if done.returncode != 0:  # a process of the learner still holds it: detach it now, freed when it ends
        subprocess.run(["umount", "--lazy", str(home)], capture_output=True, text=True)
    return True


# -- what this box allows -------------------------------------------------------------------------------

def can_mount() -> str:
    """'' if root may make mount namespaces and tmpfs mounts here, else why not (tried in a child,
    whose namespace goes with it)."""
    if os.geteuid() != 0:
        return "not root"
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="labkit-mount-probe-") as target:
        probe = ("import ctypes, ctypes.util, os, sys\n"
                 "libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)\n"
                 "def check(r, what):\n"
                 "    if r != 0: sys.exit(what + ': ' + os.strerror(ctypes.get_errno()))\n"
                 f"check(libc.unshare({_CLONE_NEWNS}), 'unshare')\n"
                 f"check(libc.mount(b'none', b'/', None, {_MS_REC | _MS_PRIVATE}, None), 'private /')\n"
                 f"check(libc.mount(b'tmpfs', {target.encode()!r}, b'tmpfs', 0, b'size=1m'), 'tmpfs')\n")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    return "" if done.returncode == 0 else f"mounts refused here ({(done.stderr.strip().splitlines() or ['?'])[-1]})"
