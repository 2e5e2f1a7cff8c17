"""A control group per learner: all of a learner's processes, and the shared memory they write,
held to one memory cap, one process count and an equal share of the CPU, and frozen and killed
together when the room closes.

Why groups and not rlimits alone: an rlimit holds one process (RLIMIT_DATA does not even count
shared mappings), so a learner with three processes or a file in ``/dev/shm`` holds three times
their memory; a group counts every page the learner's processes charge, whoever maps them, and
its process count and CPU share hold however many processes the learner starts. The rlimits
stay underneath (:mod:`labkit_room.sandbox`): a single allocation past the per-process limit
is a MemoryError the learner can read, before the group's cap answers with the kernel's OOM killer.

Which groups, by what the box has (:func:`detect`):

    systemd     a host whose PID 1 is systemd: a transient scope per learner's server
                (``systemd-run --scope``, as SystemdSpawner and The Littlest JupyterHub use
                systemd), with MemoryMax, TasksMax and CPUWeight; systemd owns the cgroup tree
                there, so the room writes none of it itself
    v2          the unified hierarchy mounted at /sys/fs/cgroup: ``labkit-<room>/<learner>`` with
                memory.max, memory.swap.max, pids.max, cpu.weight; cgroup.freeze and cgroup.kill
    v1          one hierarchy per controller (memory, pids, cpu, freezer): ``<hub's own group>/
                labkit-<room>/<learner>`` in each, with memory.limit_in_bytes (and memsw),
                pids.max, cpu.shares, freezer.state
    none        no writable hierarchy (not root, or a container that keeps them): the room falls
                back to rlimits and says so at start

The writer takes the hierarchy's root folder and the mount table as arguments, so its tests run
on a fake hierarchy in a temporary folder (tests/test_room_groups.py) as well as on the box's own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
MOUNTS = Path("/proc/self/mounts")
OWN_GROUPS = Path("/proc/self/cgroup")
# What a learner's group holds, in the names of either version.
CONTROLLERS = ("memory", "pids", "cpu", "freezer")
# An equal CPU share per learner: v2's default weight, v1's default shares. Equal weights among
# sibling groups give each learner the same part of the CPU when the box is busy, however many
# processes each runs.
CPU_WEIGHT_V2 = 100
CPU_SHARES_V1 = 1024


class GroupError(RuntimeError):
    """A group cannot be made, joined or emptied as asked (one line)."""


@dataclass(frozen=True)
class GroupLimits:
    memory_bytes: int  # all of a learner's processes and the shared memory they write
    tasks: int         # processes and threads together (what pids.max and TasksMax count)


def _write(path: Path, text: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(text)
    except OSError as err:
        raise GroupError(f"cannot write {text!r} to {path}: {err.strerror or err}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _pids_in(procs_file: Path) -> list[int]:
    return [int(x) for x in _read(procs_file).split() if x.isdigit()]


def _wait_until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@dataclass
class Hierarchy:
    """The box's control groups, of one kind (``version``), and where each controller lives."""

    version: str                                   # "systemd", "v2", "v1" or "none"
    controllers: tuple[str, ...] = ()              # of CONTROLLERS, those a learner's group gets
    mounts: dict[str, Path] = field(default_factory=dict)  # v1: controller -> its folder for groups
    root: Path = CGROUP_ROOT                       # v2: the unified hierarchy's root
    why_not: str = ""                              # "none": why no group can be made here
    fake: bool = False                             # a stand-in hierarchy in a folder (tests)

    @property
    def enforces(self) -> bool:
        return self.version != "none"

    def describe(self) -> str:
        if not self.enforces:
            return f"no control groups ({self.why_not})"
        kind = {"v1": "cgroup v1", "v2": "cgroup v2", "systemd": "systemd scopes (cgroup)"}[self.version]
        return f"{kind}: {', '.join(self.controllers)}"

    # -- where a learner's group lives ----------------------------------------------------------
    @staticmethod
    def room_name(room_id: str) -> str:
        return f"labkit-{room_id}"

    def unit(self, room_id: str, learner: str) -> str:
        """systemd: the scope unit of a learner's server."""
        return f"{self.room_name(room_id)}-{learner}.scope"

    def folders(self, room_id: str, learner: str | None = None) -> dict[str, Path]:
        """controller -> the learner's group folder (or the room's, without `learner`)."""
        parts = [self.room_name(room_id)] + ([learner] if learner else [])
        if self.version == "v2":
            return {"unified": self.root.joinpath(*parts)}
        if self.version == "v1":
            return {c: self.mounts[c].joinpath(*parts) for c in self.controllers}
        if self.version == "systemd" and learner:
            path = _systemd_cgroup(self.unit(room_id, learner))
            return {"unified": path} if path else {}
        return {}

    def to_json(self) -> dict:
        return {"version": self.version, "controllers": list(self.controllers),
                "mounts": {c: str(p) for c, p in self.mounts.items()}, "root": str(self.root),
                "why_not": self.why_not, "fake": self.fake}

    @classmethod
    def from_json(cls, data: dict) -> Hierarchy:
        return cls(data["version"], tuple(data["controllers"]), {c: Path(p) for c, p in data["mounts"].items()},
                   Path(data["root"]), data["why_not"], data["fake"])

    # -- make, join, read ------------------------------------------------------------------------
    def prepare(self, room_id: str, learners: int = 1) -> None:
        """The room's own group, under which each learner's goes (v2: with the controllers passed
        down to it, enabled at the root first where the box left them off). Its CPU weight is its
        learners' together: beside the box's other work the room counts as that many processes,
        not as one."""
        if self.version == "v2":
            wanted = [c for c in self.controllers if c != "freezer"]  # v2 freezes without a controller
            enabled = _read(self.root / "cgroup.subtree_control").split()
            missing = [c for c in wanted if c not in enabled]
            if missing:
                _write(self.root / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))
            room = self.root / self.room_name(room_id)
            room.mkdir(exist_ok=True)
            _write(room / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
            if "cpu" in self.controllers:
                _write(room / "cpu.weight", str(min(10_000, CPU_WEIGHT_V2 * learners)))
        elif self.version == "v1":
            for controller, group in self.folders(room_id).items():
                group.mkdir(parents=True, exist_ok=True)
                if controller == "cpu":
                    _write(group / "cpu.shares", str(CPU_SHARES_V1 * learners))

    def create(self, room_id: str, learner: str, limits: GroupLimits) -> None:
        """The learner's group with its limits (systemd: made when the server starts, in its scope)."""
        if self.version == "v2":
            group = self.root / self.room_name(room_id) / learner
            group.mkdir(exist_ok=True)
            if "memory" in self.controllers:
                _write(group / "memory.max", str(limits.memory_bytes))
                if (group / "memory.swap.max").exists():
                    _write(group / "memory.swap.max", "0")
            if "pids" in self.controllers:
                _write(group / "pids.max", str(limits.tasks))
            if "cpu" in self.controllers:
                _write(group / "cpu.weight", str(CPU_WEIGHT_V2))
        elif self.version == "v1":
            for controller, group in self.folders(room_id, learner).items():
                group.mkdir(parents=True, exist_ok=True)
                if controller == "memory":
                    _write(group / "memory.limit_in_bytes", str(limits.memory_bytes))
                    if (group / "memory.memsw.limit_in_bytes").exists():  # no swap past the cap either
                        _write(group / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
                elif controller == "pids":
                    _write(group / "pids.max", str(limits.tasks))
                elif controller == "cpu":
                    _write(group / "cpu.shares", str(CPU_SHARES_V1))

    def join(self, room_id: str, learner: str, pid: int = 0) -> None:
        """Move `pid` (0: the calling process) into the learner's group; its children follow."""
        if self.version in ("v1", "v2"):
            for group in self.folders(room_id, learner).values():
                _write(group / "cgroup.procs", str(pid or os.getpid()))

    def pids(self, room_id: str, learner: str) -> list[int]:
        """Every process in the learner's group (any controller's list: they hold the same)."""
        found: set[int] = set()
        for group in self.folders(room_id, learner).values():
            found.update(_pids_in(group / "cgroup.procs"))
        return sorted(found)

    def usage(self, room_id: str, learner: str) -> dict:
        """What the group counts now: memory in bytes, the processes its cap has killed, tasks (for
        the room's checks and bench)."""
        folders = self.folders(room_id, learner)
        out = {}
        if self.version == "v1":
            if "memory" in folders:
                out["memory_bytes"] = int(_read(folders["memory"] / "memory.usage_in_bytes") or 0)
                control = dict(line.split() for line in _read(folders["memory"] / "memory.oom_control").splitlines()
                               if len(line.split()) == 2)
                out["oom_kills"] = int(control.get("oom_kill", 0))
            if "pids" in folders:
                out["tasks"] = int(_read(folders["pids"] / "pids.current") or 0)
        elif "unified" in folders:
            group = folders["unified"]
            out["memory_bytes"] = int(_read(group / "memory.current") or 0)
            events = dict(line.split() for line in _read(group / "memory.events").splitlines() if " " in line)
            out["oom_kills"] = int(events.get("oom_kill", 0))
            out["tasks"] = int(_read(group / "pids.current") or 0)
        return out

    # -- freeze and end ----------------------------------------------------------------------------
    def freeze(self, room_id: str, learner: str, frozen: bool = True, timeout_s: float = 10) -> bool:
        """Freeze (or thaw) every process of the group at once: a frozen process cannot fork, so a
        process that re-forks faster than it can be signalled is caught whole. True once frozen."""
        folders = self.folders(room_id, learner)
        if self.version == "v1" and "freezer" in folders:
            state = folders["freezer"] / "freezer.state"
            _write(state, "FROZEN" if frozen else "THAWED")
            return _wait_until(lambda: _read(state).strip() == ("FROZEN" if frozen else "THAWED"), timeout_s)
        if "unified" in folders and (folders["unified"] / "cgroup.freeze").exists():
            group = folders["unified"]
            _write(group / "cgroup.freeze", "1" if frozen else "0")
            want = f"frozen {1 if frozen else 0}"
            return _wait_until(lambda: want in _read(group / "cgroup.events"), timeout_s)
        if self.version == "systemd":
            verb = "freeze" if frozen else "thaw"
            return subprocess.run(["systemctl", verb, self.unit(room_id, learner)], capture_output=True).returncode == 0
        return False

    def kill(self, room_id: str, learner: str, timeout_s: float = 20) -> list[int]:
        """End every process of the learner's group, re-forking ones included; returns the pids
        that were in it. cgroup.kill where the kernel has it; else freeze, SIGKILL each, thaw."""
        folders = self.folders(room_id, learner)
        if self.version in ("v1", "v2") and not any(group.exists() for group in folders.values()):
            return []  # never made (a room that stopped while it started)
        before = self.pids(room_id, learner)
        kill_file = folders.get("unified", Path("/nonexistent")) / "cgroup.kill"
        if self.version == "systemd":
            subprocess.run(["systemctl", "kill", "--signal=SIGKILL", self.unit(room_id, learner)],
                           capture_output=True)
        elif kill_file.exists():
            _write(kill_file, "1")
        else:
            frozen = self.freeze(room_id, learner, True)
            for pid in self.pids(room_id, learner):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if frozen:
                self.freeze(room_id, learner, False)
        if not _wait_until(lambda: not self.pids(room_id, learner), timeout_s):
            raise GroupError(f"{learner}'s group still holds {self.pids(room_id, learner)} after SIGKILL")
        return before

    def remove(self, room_id: str, learner: str | None = None) -> None:
        """Remove the learner's (empty) group, or with no `learner` the room's and what is left in it."""
        if self.version == "systemd":
            if learner:
                subprocess.run(["systemctl", "stop", self.unit(room_id, learner)], capture_output=True)
            return
        for group in self.folders(room_id, learner).values():
            if not group.exists():
                continue
            for child in [p for p in group.iterdir() if p.is_dir()]:
                self._rmdir(child)
            self._rmdir(group)

    def _rmdir(self, group: Path) -> None:
        """A group goes with rmdir (the files in it are the kernel's); a stand-in's with its files."""
        if self.fake:
            shutil.rmtree(group, ignore_errors=True)
            return
        try:
            os.rmdir(group)
        except OSError as err:
            raise GroupError(f"cannot remove {group}: {err.strerror or err} (processes left in it?)") from None


# -- which hierarchy this box has ------------------------------------------------------------------

def _mount_table(mounts_text: str) -> list[tuple[Path, str, set[str]]]:
    """(mount point, fs type, options) of each line of a /proc/self/mounts text."""
    table = []
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            table.append((Path(parts[1]), parts[2], set(parts[3].split(","))))
    return table


def _own_group(controller: str, own_text: str) -> str:
    """The hub's own group path for a v1 controller, from a /proc/self/cgroup text ('/' if none)."""
    for line in own_text.splitlines():
        _, names, path = (line.split(":", 2) + ["", ""])[:3]
        if controller in names.split(","):
            return path or "/"
    return "/"


def _kernel_at_least(major: int, minor: int, release: str | None = None) -> bool:
    numbers = (release or os.uname().release).split("-")[0].split(".")
    try:
        return (int(numbers[0]), int(numbers[1])) >= (major, minor)
    except (ValueError, IndexError):
        return False


def _systemd_runs() -> bool:
    return Path("/run/systemd/system").is_dir() and shutil.which("systemd-run") is not None


def _systemd_cgroup(unit: str) -> Path | None:
    done = subprocess.run(["systemctl", "show", "--property=ControlGroup", "--value", unit],
                          capture_output=True, text=True)
    path = done.stdout.strip()
    return CGROUP_ROOT / path.lstrip("/") if done.returncode == 0 and path else None


def detect(root: Path = CGROUP_ROOT, mounts_text: str | None = None, own_text: str | None = None,
           systemd: bool | None = None, euid: int | None = None) -> Hierarchy:
    """The control groups this box lets the room make (the arguments stand in for the box in tests)."""
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        return Hierarchy("none", why_not="not root")
    if systemd if systemd is not None else _systemd_runs():
        return Hierarchy("systemd", controllers=("memory", "pids", "cpu", "freezer"))
    mounts_text = _read(MOUNTS) if mounts_text is None else mounts_text
    own_text = _read(OWN_GROUPS) if own_text is None else own_text
    table = _mount_table(mounts_text)
    root = Path(root)
    fake = root != CGROUP_ROOT
    if any(point == root and kind == "cgroup2" for point, kind, _ in table):
        if not os.access(root, os.W_OK):
            return Hierarchy("none", why_not=f"{root} is read-only here")
        available = _read(root / "cgroup.controllers").split()
        have = [c for c in CONTROLLERS if c in available]
        if _kernel_at_least(5, 2):  # cgroup.freeze: no controller to enable, the kernel's own
            have.append("freezer")
        if not have:
            return Hierarchy("none", why_not=f"cgroup v2 at {root} offers none of memory, pids, cpu")
        return Hierarchy("v2", controllers=tuple(have), root=root, fake=fake)
    found: dict[str, Path] = {}
    for point, kind, options in table:
        if kind != "cgroup" or not point.is_relative_to(root):
            continue
        for controller in CONTROLLERS:
            if controller in options and controller not in found:
                base = point / _own_group(controller, own_text).lstrip("/")
                if os.access(base if base.is_dir() else point, os.W_OK):
                    found[controller] = base if base.is_dir() else point
    if found:
        return Hierarchy("v1", controllers=tuple(c for c in CONTROLLERS if c in found), mounts=found, fake=fake)
    return Hierarchy("none", why_not="no writable cgroup hierarchy is mounted")


# -- systemd: the learner's server in a transient scope ---------------------------------------------

def systemd_prefix(hierarchy: Hierarchy, room_id: str, learner: str, limits: GroupLimits) -> list[str]:
    """The words before a learner's server command on a systemd host: systemd-run puts the server's
    reaper (and so every process it starts) in a scope of its own, with the learner's limits; the
    reaper, root, starts the server as the learner (room/labkit_room/reaper.py)."""
    return ["systemd-run", "--scope", "--quiet", "--collect", f"--unit={hierarchy.unit(room_id, learner)}",
            f"--slice={hierarchy.room_name(room_id)}.slice",
            f"--property=MemoryMax={limits.memory_bytes}", "--property=MemorySwapMax=0",
            f"--property=TasksMax={limits.tasks}", f"--property=CPUWeight={CPU_WEIGHT_V2}", "--"]
