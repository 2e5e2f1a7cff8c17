"""Which of the room's limits this box enforces and which it cannot: one line each, printed when the
room starts (``python -m labkit hub start``) and kept in its state folder.

A limit the box cannot enforce is said, never skipped in silence: a room on a box without
writable control groups still starts, held by rlimits alone, and the instructor reads at once
what that leaves open. Each probe asks the box itself (a child that tries), not its version
numbers.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from labkit_room import groups
from labkit_room.room import Limits

NOBODY = 65534  # an unprivileged uid for the probes: what a learner's process may do here


@dataclass(frozen=True)
class Line:
    what: str
    enforced: bool
    how: str

    def text(self) -> str:
        return f"  {'enforced    ' if self.enforced else 'NOT enforced'}  {self.what}: {self.how}"

    def to_json(self) -> dict:
        return {"what": self.what, "enforced": self.enforced, "how": self.how}


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def kernel_network_refusal(python: str, launcher: Path) -> str:
    """'' if an unprivileged process here gets the namespaces each kernel runs in (its own user,
    network and IPC namespace, its loopback alone: :mod:`labkit_room.kernel_launcher`), else why
    not. Asked of the very launcher the kernels start through, run by `python` as nobody."""
    try:
        done = subprocess.run([python, "-I", "-S", str(launcher), "--probe"], user=NOBODY, group=NOBODY,
                              extra_groups=[], capture_output=True, text=True, timeout=30, cwd="/")
    except (OSError, subprocess.SubprocessError) as err:
        return f"cannot ask as an unprivileged user ({err})"
    return "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["refused"])[-1]


def gpu_state() -> str:
    """'' where this box has no NVIDIA GPU, else nvidia-smi's list of them (MIG instances included),
    or the device files where nvidia-smi is missing."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    devices = sorted(str(p) for p in Path("/dev").glob("nvidia[0-9]*"))
    return f"NVIDIA device files {', '.join(devices)}" if devices else ""


def survey(limits: Limits, hierarchy: groups.Hierarchy, mount_refusal: str, network_refusal: str,
           gpus: str, pages: str, subdomains: bool) -> list[Line]:
    """The room's limits on this box, each enforced or not, with how."""
    has = set(hierarchy.controllers) if hierarchy.enforces else set()
    kind = hierarchy.describe()
    lines = []
    if "memory" in has:
        lines.append(Line("memory", True, f"{_gib(limits.memory_bytes)} per learner for all their processes and "
                          f"shared memory ({kind}), {_gib(limits.process_memory_bytes)} per process (RLIMIT_DATA: "
                          "a MemoryError first)"))
    else:
        lines.append(Line("memory", False, f"no group cap ({kind}): {_gib(limits.process_memory_bytes)} per process "
                          "only (RLIMIT_DATA), so a learner's processes and shared memory together may hold more"))
    if "pids" in has:
        lines.append(Line("processes", True, f"{limits.tasks} processes and threads per learner ({kind}; and "
                          "RLIMIT_NPROC)"))
    else:
        lines.append(Line("processes", True, f"{limits.tasks} processes and threads per learner (RLIMIT_NPROC, per "
                          "uid: each learner has their own)"))
    if "cpu" in has:
        lines.append(Line("CPU", True, f"an equal share per learner when the box is busy, however many processes "
                          f"they run ({kind})"))
    else:
        lines.append(Line("CPU", False, f"no CPU share ({kind}): a learner with many busy processes slows the others"))
    if not mount_refusal:
        lines.append(Line("disk", True, f"{_gib(limits.disk_bytes)} per learner: their home is a tmpfs of that size, "
                          "counted in their memory"))
        lines.append(Line("shared folders", True, "each learner's server has its own /tmp, /var/tmp, /dev/shm and "
                          "/run/lock (folders of their home); TMPDIR and torch's and Triton's caches in the home"))
    else:
        lines.append(Line("disk", False, f"no per-learner cap ({mount_refusal}): no file over "
                          f"{_gib(limits.disk_bytes)} (RLIMIT_FSIZE), but many files may fill the box's disk"))
        lines.append(Line("shared folders", False, f"/tmp, /var/tmp, /dev/shm are the box's ({mount_refusal}); "
                          "TMPDIR and torch's and Triton's caches are in each home, and the close removes what "
                          "learners left in the shared folders"))
    if not network_refusal:
        lines.append(Line("kernel sockets", True, "each kernel in a user, network and IPC namespace of its own "
                          "(tried here as an unprivileged user; a kernel that cannot get them runs nothing); its "
                          "subprocess pipe a unix socket in the learner's runtime folder"))
    else:
        lines.append(Line("kernel sockets", True, "kernel channels and the subprocess pipe are unix sockets in "
                          f"each learner's runtime folder (mode 0700); kernels share the box's network "
                          f"({network_refusal})"))
    if subdomains:
        lines.append(Line("pages", True, f"{pages}: each learner's server on an origin of its own"))
    elif not network_refusal:
        lines.append(Line("pages", True, f"{pages}, one origin: every page a learner's server sends but JupyterLab's "
                          "is sandboxed, no learner-writable folder is served as code, and no learner can change or "
                          "replace their server"))
    else:
        lines.append(Line("pages", False, f"{pages}, one origin: a learner's kernel could end their own server and "
                          "listen on its port in its place (no user namespaces here); for strangers, give the room a "
                          "name with a subdomain per learner (--public-url https://NAME --subdomains)"))
    lines.append(Line("server's parent", True, "each learner's server runs under a reaper that stays root and "
                      "non-dumpable: no process of the learner's may signal, trace or read it"))
    if "freezer" in has:
        lines.append(Line("close", True, f"every learner's group frozen, then killed whole ({kind}); then every "
                          "process of their uid in one sweep"))
    else:
        lines.append(Line("close", True, "every process of each learner's uid killed in one sweep (kill(-1) as that "
                          "user), until none is left"))
    if gpus:
        lines.append(Line("GPU memory", False, f"each kernel holds itself to {limits.gpu_memory_fraction:.3f} of the "
                          "GPU (set_per_process_memory_fraction), which a learner's code can lift: no MIG instance "
                          "per learner is set up, and NVIDIA MPS serves one user at a time"))
    else:
        lines.append(Line("GPU memory", True, "no NVIDIA GPU on this box: nothing to share"))
    return lines
