"""What a room on one server is: the one place its names, start notebook and per-learner limits
are written.

Both ways of running a room read this module: the one-box hub (:mod:`labkit_room.control`, a
JupyterHub on this machine) and the Kubernetes chart values for a room past one box
(:func:`z2jh_values`, shipped as ``room/deploy/z2jh-values.yaml``; a test checks that the
shipped file is this module's rendering). Change a limit here and both follow.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from labkit import __version__
from labkit.errors import LabkitInputError
from labkit.workshop.editions.secrecy import STUDENT_PATH
from labkit.workshop.editions.student import learner_name
from labkit_room.limits import GPU_SHARE_ENV, PROCESS_MEMORY_ENV

# What each learner opens: their own folder in their home (labkit.workshop.editions.student.build_learner_folder),
# JupyterLab on the first notebook of the student path, 00, under its learner's name.
LEARNER_FOLDER = "stale-padding-lab"
START_NOTEBOOK = learner_name(STUDENT_PATH[0])
DEFAULT_URL = f"/lab/tree/{START_NOTEBOOK}"

# Hub user names, which are also the system users' names on one box ("labkit-learner07"). The
# instructor runs the room (INSTRUCTOR_ROLE, not JupyterHub's admin) and has no server of their own.
LEARNER_PREFIX = "labkit-learner"
ADMIN_USER = "instructor"
# What the instructor may do on the hub: its admin page, the users and their servers' state, start
# and stop those servers, and read the services (the culler's timeout). Not JupyterHub's admin role:
# no access to a learner's server (a learner's notebook would run on the hub's origin in the
# instructor's browser, with the instructor's powers), no making anyone admin (admin:users), no
# tokens in another's name.
INSTRUCTOR_ROLE = {"name": "instructor",
                   "description": "runs the room: its admin page, the learners' servers started and stopped, "
                                  "never opened",
                   "scopes": ["admin-ui", "list:users", "read:users", "admin:servers", "list:services",
                              "read:services", "read:hub"],
                   "users": [ADMIN_USER]}
# Scopes that would let the instructor's browser open a learner's page, or grant a learner the hub.
INSTRUCTOR_NEVER = ("access:servers", "admin:users", "tokens", "admin:auth_state", "shares")
# What every learner's server runs with, on one box and on Kubernetes: the kit's server extensions
# (labkit_room.learner_server: every response but JupyterLab's page under a CSP sandbox;
# lab_server: a dropped websocket leaves no traceback), no terminal (a shell would run beside the
# server, on its network), no extension manager (the server's packages are the room's).
LEARNER_SERVER_EXTENSIONS = ("labkit.tools.lab_server", "labkit_room.learner_server")
def learner_server_args(*more_extensions: str, lab: bool = True) -> list[str]:
    """The arguments above, with the extensions (and `more_extensions`) enabled by name; the extension
    manager's only where JupyterLab is (`lab`)."""
    extensions = {name: True for name in (*LEARNER_SERVER_EXTENSIONS, *more_extensions)}
    return [f"--ServerApp.jpserver_extensions={extensions!r}", "--ServerApp.terminals_enabled=False",
            *(["--LabApp.extension_manager=readonly"] if lab else [])]
MAX_LEARNERS = 99
# The hub's scheduling priority (nice), and so its proxy's and its services': every learner's page,
# kernel messages and starts pass through them, so when the learners' processes keep every core
# busy (30 servers and kernels starting at once) the room's own work runs first, rather than one
# process's share beside 60. Each learner's server is put back to the box's default (0) as it starts
# (labkit_room.sandbox), and a learner cannot raise their own. Where root may not raise a priority
# (a container without CAP_SYS_NICE) the hub runs at 0, as everything else.
HUB_NICE = -10
# The image binder/ describes, as repo2docker builds it for the chart:
#   repo2docker --no-run --user-name jovyan --image-name labkit-room:<version> .
IMAGE_NAME = "labkit-room"
IMAGE_TAG = __version__
IMAGE_REPO_DIR = "/srv/labkit"  # repo2docker --target-repo-dir: outside the learners' home volume

# Defaults for a 90-minute workshop. A learner's server holds JupyterLab (~150 MB), a kernel with
# torch and the toy models and room for a second kernel: 3 GiB for all their processes together.
DEFAULT_MEMORY_GIB = 3.0
# Of a learner's memory, what one process may not take (RLIMIT_DATA is the rest): their server's
# own memory and a little of their files, so that one kernel's large allocation is a MemoryError
# the learner reads before their group's cap is reached and the kernel's OOM killer ends a process.
SERVER_ALLOWANCE_GIB = 0.5
# A learner's files: their home and their own /tmp, /var/tmp, /dev/shm, on a tmpfs of this size,
# counted in their memory (the notebooks, their outputs and torch's caches are a few MB): 1 GiB, or
# a quarter of their memory if less, and never over half of it, so that a full disk leaves their
# server and a kernel room to run.
DEFAULT_DISK_GIB = 1.0
# Processes and threads of one learner together: a server, two kernels with torch's threads and a
# few subprocesses fit many times over; a fork loop stops here.
DEFAULT_TASKS = 256
# The smallest limit a room may set, per torch build: what one kernel needs for notebooks 00 and
# 01 and the repro, measured under the spawner's own limit (room/labkit_room/data/kernel_memory.json,
# written by room/bench/kernel_memory.py), with room to spare. The CUDA build of torch alone holds
# more than 1 GiB of data segment once imported, where the CPU build holds a few hundred MiB.
MIN_MEMORY_GIB = {"cpu": 1.0, "cuda": 2.0}
# Idle servers are stopped after this long without activity; a coffee break keeps its servers.
DEFAULT_IDLE_TIMEOUT_S = 30 * 60
MIN_IDLE_TIMEOUT_S = 10  # the test culls a server this fast; a room wants minutes
# Of the GPU's memory the learners' kernels share this much between them: each CUDA context takes
# a few hundred MB outside the caching allocator that the share limits.
GPU_SHARED_PART = 0.9


def addresses(ip: str, port: int, public_url: str | None = None, subdomains: bool = False,
              tls_cert: str | None = None, tls_key: str | None = None) -> tuple[str, str]:
    """(where the hub's proxy listens, what the learners type). The proxy serves HTTPS itself with a
    certificate and key, else HTTP for a TLS front before it (or a room on loopback). With
    `subdomains` each learner's server gets an origin of its own under the public name
    (``https://labkit-learner01.<name>``), which needs a name, not an address."""
    from urllib.parse import urlsplit

    if bool(tls_cert) != bool(tls_key):
        raise LabkitInputError("--tls-cert and --tls-key go together: the certificate and its private key")
    for option, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
        if path and not Path(path).is_file():
            raise LabkitInputError(f"{option} {path}: no such file")
    bind_url = f"{'https' if tls_cert else 'http'}://{ip}:{port}"
    public = (public_url or bind_url).rstrip("/")
    parts = urlsplit(public)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise LabkitInputError(f"--public-url {public_url!r}: give the address learners type, e.g. "
                               "https://room.example.org")
    if subdomains and _is_address(parts.hostname):
        raise LabkitInputError(f"--subdomains needs a name in --public-url, not the address {parts.hostname}: "
                               "each learner gets <learner>.<name>, so the name's every subdomain must point to "
                               "this box (a wildcard DNS record)")
    return bind_url, public


def _is_address(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def start_url(lab: bool = True) -> str:
    """Where a learner lands: JupyterLab on notebook 00, or where JupyterLab's web app is not installed
    (the GPU box's carried wheels leave it out) the same notebook served as a file: still a page, so
    the login goes through the hub's OAuth as in a browser."""
    return DEFAULT_URL if lab else f"/files/{START_NOTEBOOK}"


def math_threads_env(threads: int) -> dict[str, str]:
    """The math libraries' threads in a kernel with `threads` of the box's cores.

    torch's threads (OpenMP, MKL) get the kernel's share: 30 kernels of a thread per core would
    fight over the cores anyway. numpy's OpenBLAS gets one thread: it reserves buffers per thread
    (room/labkit_room/data/kernel_memory.json: a kernel with the threads left alone holds far more), and
    the kit's numpy work is small."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1"}


def torch_build() -> str:
    """'cuda' where this environment's torch is a CUDA build, else 'cpu'. Read from the installed
    files, not by importing torch: the hub and its command stay quick and torch-free."""
    from importlib.util import find_spec

    spec = find_spec("torch")
    folders = list(spec.submodule_search_locations or []) if spec else []
    return "cuda" if any((Path(folder) / "lib" / "libtorch_cuda.so").exists() for folder in folders) else "cpu"


def min_memory_gib(build: str | None = None) -> float:
    """The smallest memory limit per learner a room may set with this (or `build`'s) torch."""
    return MIN_MEMORY_GIB[build or torch_build()]


def learner_names(count: int) -> list[str]:
    """``labkit-learner01`` ... for a room of `count` learners."""
    if not 1 <= count <= MAX_LEARNERS:
        raise LabkitInputError(f"a room has 1 to {MAX_LEARNERS} learners, got {count}")
    return [f"{LEARNER_PREFIX}{i:02d}" for i in range(1, count + 1)]


def is_learner_name(name: str) -> bool:
    rest = name[len(LEARNER_PREFIX):]
    return name.startswith(LEARNER_PREFIX) and len(rest) == 2 and rest.isdigit()


@dataclass(frozen=True)
class Limits:
    """Per-learner limits, the same on one box and on Kubernetes."""

    memory_bytes: int          # all of a learner's processes and shared memory (MEM_LIMIT, their group's cap)
    process_memory_bytes: int  # each process's data (RLIMIT_DATA), under memory_bytes
    gpu_memory_fraction: float  # each kernel's share of one GPU's memory
    idle_timeout_s: int        # servers idle this long are culled
    cpu_threads: int           # torch/OpenMP threads per kernel (the box's cores shared out)
    tasks: int                 # a learner's processes and threads together
    disk_bytes: int            # a learner's files (home and their own temporary folders)

    def env(self) -> dict[str, str]:
        """What a learner's server finds in its environment (the kit reads the share at import)."""
        return {GPU_SHARE_ENV: f"{self.gpu_memory_fraction:.4f}", PROCESS_MEMORY_ENV: str(self.process_memory_bytes),
                **math_threads_env(self.cpu_threads)}

    def to_json(self) -> dict:
        return asdict(self)


def _host_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def parse_memory(text: str, option: str = "--memory") -> int:
    """'3G', '512M', '2.5GiB' -> bytes; a clear error otherwise."""
    units = {"": 2**30, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    raw = text.strip().lower().removesuffix("ib").removesuffix("b")
    number, unit = (raw[:-1], raw[-1]) if raw and raw[-1] in units else (raw, "")
    try:
        value = float(number) * units[unit]
    except ValueError:
        value = float("nan")
    if not value > 0 or math.isinf(value):
        raise LabkitInputError(f"{option} {text!r}: give a size such as 3G or 512M")
    return int(value)


def limits_for(learners: int, *, memory: str | None = None, gpu_share: float | None = None,
               idle_timeout_s: int = DEFAULT_IDLE_TIMEOUT_S, host_memory: int | None = None,
               cores: int | None = None, build: str | None = None, disk: str | None = None,
               tasks: int = DEFAULT_TASKS) -> Limits:
    """The limits for a room of `learners` on this box (or the box described by `host_memory`,
    `cores`, `build`). Memory: `memory` if given, else 3 GiB or the box's memory shared out,
    whichever is smaller; each process gets that less :data:`SERVER_ALLOWANCE_GIB`, and a room that
    leaves a process under this torch build's minimum (:data:`MIN_MEMORY_GIB`) is refused with the
    numbers."""
    host = host_memory or _host_memory_bytes()
    cores = cores or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    fair = int(host * 0.85 / learners)
    chosen = parse_memory(memory) if memory else min(int(DEFAULT_MEMORY_GIB * 2**30), fair)
    per_process = chosen - int(SERVER_ALLOWANCE_GIB * 2**30)
    build = build or torch_build()
    floor = min_memory_gib(build)
    if per_process < floor * 2**30:
        given = f"--memory {memory}" if memory else (f"{learners} learners on a box with {host / 2**30:.0f} GiB "
                                                     "of memory")
        raise LabkitInputError(
            f"{given} leaves each learner {chosen / 2**30:.2f} GiB, {max(per_process, 0) / 2**30:.2f} GiB per "
            f"process once their server's {SERVER_ALLOWANCE_GIB:g} GiB is set aside; with the {build} build of "
            f"torch a kernel needs at least {floor:g} GiB (room/labkit_room/data/kernel_memory.json): a larger "
            "--memory, fewer learners, or a bigger box")
    disk_bytes = parse_memory(disk, "--disk") if disk else min(int(DEFAULT_DISK_GIB * 2**30), chosen // 4)
    if disk_bytes > chosen // 2:
        raise LabkitInputError(f"--disk {disk}: a learner's files count in their memory ({chosen / 2**30:.2f} GiB), "
                               "and may take half of it at most; give less disk, or more --memory")
    if not 16 <= tasks <= 100_000:
        raise LabkitInputError(f"--processes {tasks}: between 16 and 100000 processes and threads per learner")
    share = gpu_share if gpu_share is not None else round(GPU_SHARED_PART / learners, 4)
    if not 0 < share <= 1:
        raise LabkitInputError(f"--gpu-share {share}: a share of the GPU's memory is a number in (0, 1]")
    if idle_timeout_s < MIN_IDLE_TIMEOUT_S:
        raise LabkitInputError(f"--idle-timeout: {idle_timeout_s} s, at least {MIN_IDLE_TIMEOUT_S} seconds")
    return Limits(memory_bytes=chosen, process_memory_bytes=per_process, gpu_memory_fraction=share,
                  idle_timeout_s=int(idle_timeout_s), cpu_threads=max(1, cores // learners), tasks=int(tasks),
                  disk_bytes=disk_bytes)


# -- past one box: Zero to JupyterHub on Kubernetes -----------------------------------------------

# One GPU per node, time-sliced this many ways (room/deploy/nvidia-time-slicing.yaml).
Z2JH_LEARNERS_PER_GPU = 30
# Who logs in past one box: the room's own authenticator, the very file room/labkit_room/auth.py
# mounted into the hub's configuration folder (the chart's jupyterhub_config.py puts that folder on
# sys.path), checking a Secret of password hashes that `python -m labkit hub logins` writes. The
# chart's default is DummyAuthenticator: any name, any password, the instructor's included.
# The Zero to JupyterHub chart release the values are written for (JupyterHub 5.4): every key they set
# is one its schema documents (tests/test_hub_values.py holds the list).
Z2JH_CHART_VERSION = "4.3.3"
Z2JH_CONFIG_DIR = "/usr/local/etc/jupyterhub"
Z2JH_AUTH_MODULE = "labkit_room_auth"
LOGINS_SECRET = "labkit-room-logins"
LOGINS_DIR = "/etc/labkit-room"
LOGINS_FILE = "passwords.json"


def z2jh_values(learners_per_gpu: int = Z2JH_LEARNERS_PER_GPU, learners: int = Z2JH_LEARNERS_PER_GPU) -> dict:
    """The Zero to JupyterHub chart's values for the same room: the room's authenticator with the
    `learners` and the instructor as the only users, the instructor's role (no access to a learner's
    server) and nobody admin, the learners' servers as the one-box room runs them (no user
    configuration, every page but JupyterLab's sandboxed, no terminal), a NetworkPolicy that keeps
    each learner's pod from the others', the image binder/ describes, one
    time-sliced GPU per node, the per-learner limits of a box of `learners_per_gpu` learners, the
    same start notebook and idle culling, and each learner's folder built fresh at start."""
    limits = limits_for(learners_per_gpu, host_memory=learners_per_gpu * int(DEFAULT_MEMORY_GIB * 2**30) * 2,
                        cores=learners_per_gpu, build="cuda")  # a GPU node's image holds CUDA torch
    gib = limits.memory_bytes / 2**30
    folder = f"/home/jovyan/{LEARNER_FOLDER}"
    build_folder = (f"test -d {folder} || "
                    f"python -m labkit student-edition --src {IMAGE_REPO_DIR}/notebooks --out {folder}")
    auth_source = (Path(__file__).with_name("auth.py")).read_text()
    return {
        "hub": {
            "config": {
                "JupyterHub": {"authenticator_class": f"{Z2JH_AUTH_MODULE}.RoomAuthenticator"},
                # Nobody is JupyterHub's admin: the instructor's role below.
                "Authenticator": {"admin_users": [], "allowed_users": [*learner_names(learners), ADMIN_USER]},
                "RoomAuthenticator": {"table_file": f"{LOGINS_DIR}/{LOGINS_FILE}"},
                # No configuration, extension or kernel spec of the learner's; the room's server arguments.
                "KubeSpawner": {"disable_user_config": True, "args": learner_server_args(), "notebook_dir": folder},
            },
            "loadRoles": {INSTRUCTOR_ROLE["name"]: {k: v for k, v in INSTRUCTOR_ROLE.items() if k != "name"}},
            "extraFiles": {"labkit-room-auth": {"mountPath": f"{Z2JH_CONFIG_DIR}/{Z2JH_AUTH_MODULE}.py",
                                                "stringData": auth_source}},
            "extraVolumes": [{"name": LOGINS_SECRET, "secret": {"secretName": LOGINS_SECRET}}],
            "extraVolumeMounts": [{"name": LOGINS_SECRET, "mountPath": LOGINS_DIR, "readOnly": True}],
        },
        "singleuser": {
            "image": {"name": IMAGE_NAME, "tag": IMAGE_TAG},
            "defaultUrl": DEFAULT_URL,
            "memory": {"limit": f"{gib:g}G", "guarantee": f"{gib:g}G"},
            "cpu": {"limit": 1.0, "guarantee": 0.5},
            "extraResource": {"limits": {"nvidia.com/gpu": "1"}},
            "extraEnv": {k: v for k, v in limits.env().items() if k == GPU_SHARE_ENV},
            "lifecycleHooks": {"postStart": {"exec": {"command": ["sh", "-c", build_folder]}}},
            # A learner's pod reaches the hub and the internet (notebook 06 fetches vLLM's releases),
            # never another pod or the cloud's metadata server; only the hub and proxy reach it.
            "networkPolicy": {"enabled": True, "egressAllowRules": {
                "cloudMetadataServer": False, "dnsPortsCloudMetadataServer": False,
                "dnsPortsKubeSystemNamespace": True, "dnsPortsPrivateIPs": False, "nonPrivateIPs": True,
                "privateIPs": False}},
        },
        "cull": {"enabled": True, "timeout": limits.idle_timeout_s, "every": 300},
        "scheduling": {"userScheduler": {"enabled": True}},
    }


def time_slicing_config(learners_per_gpu: int = Z2JH_LEARNERS_PER_GPU) -> dict:
    """NVIDIA's device plugin configuration (a ConfigMap) that advertises each GPU as
    `learners_per_gpu` replicas of ``nvidia.com/gpu``: one per learner's server."""
    plugin = {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": False, "failRequestsGreaterThanOne": True,
                                                           "resources": [{"name": "nvidia.com/gpu",
                                                                          "replicas": learners_per_gpu}]}}}
    import yaml

    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "labkit-time-slicing", "namespace": "gpu-operator"},
            "data": {"any": yaml.safe_dump(plugin, sort_keys=False)}}
