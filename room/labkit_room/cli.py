"""``python -m labkit hub start | stop | values | bench | kernel-memory``: the instructor's commands
for a room on one server.

Parsing only here (it imports no JupyterHub, so ``python -m labkit hub --help`` works without
JupyterHub installed); :mod:`labkit_room.control` does the work, and ``bench`` and ``kernel-memory``
are the own commands of room/bench/hub_bench.py and room/bench/kernel_memory.py: instruments that
run from a checkout, never installed.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from labkit.errors import LabkitInputError

# The room's folder of the checkout (room/): the Kubernetes files and the instruments beside the package.
ROOM = Path(__file__).resolve().parents[1]
DEPLOY = ROOM / "deploy"
BENCH = ROOM / "bench"
VALUES_FILE = DEPLOY / "z2jh-values.yaml"
TIME_SLICING_FILE = DEPLOY / "nvidia-time-slicing.yaml"
# The measures behind the room's figures, as root: hub verb -> (its module, with its own main(argv); what it measures).
MEASURES = {
    "bench": ("hub_bench", "how many learners one box holds: N learners run notebooks 00 and 01 at once"),
    "kernel-memory": ("kernel_memory", "the smallest memory limit one learner's kernel needs"),
}


def add_arguments(hub) -> None:
    from labkit_room import room

    hub.description = ("A JupyterHub for a room on this server: one system user, one JupyterLab and one fresh "
                       "student edition per learner, opened on notebook 00. docs/INSTRUCTOR_GUIDE.md, 'One shared "
                       "server', says more.")
    verbs = hub.add_subparsers(dest="hub_command", required=True)
    start = verbs.add_parser("start", help="create the learners, start the hub, print the logins; Ctrl-C closes it")
    start.add_argument("--learners", default="30", help=f"learners in the room, 1 to {room.MAX_LEARNERS} (default 30)")
    start.add_argument("--port", default="8000", help="the hub's public port (default 8000)")
    start.add_argument("--ip", default="127.0.0.1",
                       help="the address learners connect to (default 127.0.0.1: reach it through an SSH tunnel, or "
                            "give the box's address behind a TLS-terminating proxy)")
    start.add_argument("--public-url", default=None,
                       help="the address learners type, where a TLS front forwards to --ip:--port (e.g. "
                            "https://room.example.org; default: http://IP:PORT)")
    start.add_argument("--subdomains", action="store_true",
                       help="give each learner's server an origin of its own, <learner>.<name of --public-url>: "
                            "needs a wildcard DNS name and certificate (the guide says why strangers need it)")
    start.add_argument("--tls-cert", default=None, help="the certificate the proxy serves HTTPS with (with --tls-key)")
    start.add_argument("--tls-key", default=None, help="the certificate's private key (root-only file)")
    start.add_argument("--memory", default=None,
                       help=f"memory per learner, all their processes together, e.g. 3G (default: "
                            f"{room.DEFAULT_MEMORY_GIB:g} GiB, or the box's memory shared out if less); each process "
                            f"gets {room.SERVER_ALLOWANCE_GIB:g} GiB less")
    start.add_argument("--disk", default=None,
                       help=f"each learner's files, counted in their memory (default {room.DEFAULT_DISK_GIB:g}G)")
    start.add_argument("--processes", default=str(room.DEFAULT_TASKS),
                       help="processes and threads per learner (default %(default)s)")
    start.add_argument("--gpu-share", default=None,
                       help=f"each kernel's share of the GPU's memory, in (0, 1] (default {room.GPU_SHARED_PART} / "
                            "learners)")
    start.add_argument("--idle-timeout", default=str(room.DEFAULT_IDLE_TIMEOUT_S // 60),
                       help="minutes without activity before a learner's server is stopped (default %(default)s)")
    start.add_argument("--proxy", choices=("auto", "node", "python"), default="auto",
                       help="configurable-http-proxy: 'node' (JupyterHub's default), 'python' (its Python port, "
                            "for a box without Node); auto: node if installed")
    start.add_argument("--state", default=None, help="the room's root-only state folder (default build/hub)")
    start.add_argument("--warm", action="store_true",
                       help="once the hub is open, start every learner's server and a kernel on notebook 00 with "
                            "the kit imported, so first outputs need no start (room/labkit_room/warm.py)")
    start.add_argument("--session-start", default=None, metavar="HH:MM",
                       help="today's local time the session starts: idle servers are culled from then on, not "
                            "before (a room warmed early keeps its servers until the learners arrive)")
    stop = verbs.add_parser("stop", help="close the room: stop every server, remove the learners and their homes")
    stop.add_argument("--state", default=None, help="the room's state folder (default build/hub)")
    logins = verbs.add_parser("logins", help="a room's logins for Kubernetes: the password hashes for its Secret "
                              "and the credentials to hand out")
    logins.add_argument("--learners", default="30", help=f"learners, 1 to {room.MAX_LEARNERS} (default 30)")
    logins.add_argument("--out", required=True, help="a new folder for passwords.json (hashes) and credentials.txt")
    values = verbs.add_parser("values", help="the Zero to JupyterHub (Kubernetes) values for the same room")
    values.add_argument("--write", action="store_true",
                        help="write them to room/deploy/ (z2jh-values.yaml, "
                             "nvidia-time-slicing.yaml)")
    for name, (_, summary) in MEASURES.items():  # each parses its own arguments (hub bench --help)
        verbs.add_parser(name, help=summary, add_help=False).set_defaults(passed_on=[])


def _number(option: str, text: str, kind=int):
    try:
        return kind(text)
    except ValueError:
        raise LabkitInputError(f"{option} must be a number, got {text!r}") from None


def session_start(text: str | None, now: float | None = None) -> float | None:
    """--session-start HH:MM, today in local time, as a Unix time (None: not given); one line if it is
    not a time of day or has passed."""
    import time

    if text is None:
        return None
    parts = text.split(":")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or int(parts[0]) > 23 or int(parts[1]) > 59:
        raise LabkitInputError(f"--session-start {text!r} is not a time of day: give HH:MM, e.g. 09:00")
    now = time.time() if now is None else now
    today = time.localtime(now)
    at = time.mktime((today.tm_year, today.tm_mon, today.tm_mday, int(parts[0]), int(parts[1]), 0, 0, 0, -1))
    if at <= now:
        raise LabkitInputError(f"--session-start {text} has passed (it is {time.strftime('%H:%M', today)} here): give "
                               "a later time today, or leave it out to cull from the room's start")
    return at


def run(args) -> int:
    from labkit_room import control

    if args.hub_command in MEASURES:
        module, _ = MEASURES[args.hub_command]
        if not (BENCH / f"{module}.py").is_file():
            raise LabkitInputError(f"hub {args.hub_command} runs from a checkout of the kit: its instruments "
                                   f"(room/bench/) are not installed, and {BENCH} has none")
        sys.path.insert(0, str(BENCH))  # the instruments import one another as modules of that folder
        return importlib.import_module(module).main(args.passed_on)
    try:
        if args.hub_command == "start":
            state = Path(args.state) if args.state else control.DEFAULT_STATE
            control.start(_number("--learners", args.learners), port=_number("--port", args.port), ip=args.ip,
                          memory=args.memory,
                          gpu_share=None if args.gpu_share is None else _number("--gpu-share", args.gpu_share, float),
                          idle_timeout_s=int(_number("--idle-timeout", args.idle_timeout, float) * 60),
                          proxy=args.proxy, state_dir=state, disk=args.disk,
                          tasks=_number("--processes", args.processes), public_url=args.public_url,
                          subdomains=args.subdomains, tls_cert=args.tls_cert, tls_key=args.tls_key,
                          warm=args.warm, session_start=session_start(args.session_start))
            return 0
        if args.hub_command == "stop":
            print(control.stop(Path(args.state) if args.state else control.DEFAULT_STATE))
            return 0
        if args.hub_command == "logins":
            print(control.write_logins(_number("--learners", args.learners), Path(args.out)))
            return 0
        if args.write and not (ROOM / "pyproject.toml").is_file():
            raise LabkitInputError("hub values --write writes room/deploy/ in a checkout of the kit, and this room "
                                   "is installed without one: leave out --write to print them")
        files = {VALUES_FILE: render_values(), TIME_SLICING_FILE: render_time_slicing()}
        for path, text in files.items():
            if args.write:
                DEPLOY.mkdir(exist_ok=True)
                path.write_text(text)
                print(f"wrote {path}")
            else:
                print(f"# --- {path.name}\n{text}", end="")
        return 0
    except (control.HubError, RuntimeError) as err:
        raise LabkitInputError(str(err)) from err


VALUES_HEADER = """\
# Zero to JupyterHub (https://z2jh.jupyter.org) values for a room past one server, rendered from
# room/labkit_room/room.py by `python -m labkit hub values --write` (tests/test_hub_values.py checks that
# this file is that rendering): the same start notebook, per-learner limits and idle culling as the
# one-box hub (`python -m labkit hub start`).
#
# Written for the chart's release {chart} (JupyterHub 5.4): install that release; every key set here
# is one it documents.
#
# The one-box room's defences: nobody is JupyterHub's admin (the instructor's role shows the admin
# page and starts and stops servers, and never opens a learner's, makes anyone admin or takes a token
# in a learner's name); each learner's server reads no configuration of theirs (disable_user_config),
# sends every page but JupyterLab's under a CSP sandbox (the kit's server extension, in the image)
# and has no terminal; a NetworkPolicy keeps each learner's pod from the others'. For strangers,
# give each learner an origin of their own as well: a wildcard name, and hub.config.JupyterHub.
# subdomain_host set to it (docs/INSTRUCTOR_GUIDE.md, "Pages and origins").
#
# Who logs in: the learners listed under allowed_users and the instructor, each with the
# password the room generated, checked by the room's own authenticator (room/labkit_room/auth.py,
# mounted below; never the chart's default DummyAuthenticator, which takes any password). Before
# `helm upgrade`, make the logins and their Secret, and hand out credentials.txt:
#   python -m labkit hub logins --learners {learners} --out room-logins
#   kubectl create secret generic {secret} --from-file=room-logins/{logins_file}
#
# The image is the one binder/ describes, built by repo2docker with the repository outside the
# learners' home volume:
#   repo2docker --no-run --target-repo-dir /srv/labkit --image-name {image} .
# The server in the image is repo2docker's own jupyterhub-singleuser: check that its major version is
# the chart's JupyterHub's (docker run --rm {image} jupyterhub-singleuser --version) before the room.
# One GPU per node, shared by time-slicing: install NVIDIA's device plugin with
# room/deploy/nvidia-time-slicing.yaml, which advertises each GPU as {replicas}
# `nvidia.com/gpu` replicas, so {replicas} learners' servers (one replica each) share a node's GPU;
# each kernel holds itself to its share of the GPU's memory (LABKIT_GPU_MEMORY_FRACTION).
# Time-slicing shares the GPU's time, not its memory: the share is what keeps one learner from taking
# it all.
#   helm upgrade --install room jupyterhub/jupyterhub --version {chart} \\
#     --values room/deploy/z2jh-values.yaml
"""


def _literal_dumper():
    """A YAML dumper that writes multi-line strings as | blocks (a mounted file, a ConfigMap's YAML): readable."""
    import yaml

    class Literal(yaml.SafeDumper):
        pass

    Literal.add_representer(str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v,
                                                                 style="|" if "\n" in v else None))
    return Literal


def render_values() -> str:
    import yaml

    from labkit_room import room

    values = room.z2jh_values()
    header = VALUES_HEADER.format(image=f"{room.IMAGE_NAME}:{room.IMAGE_TAG}", replicas=room.Z2JH_LEARNERS_PER_GPU,
                                  learners=room.Z2JH_LEARNERS_PER_GPU, secret=room.LOGINS_SECRET,
                                  logins_file=room.LOGINS_FILE, chart=room.Z2JH_CHART_VERSION)
    return header + yaml.dump(values, Dumper=_literal_dumper(), sort_keys=False, default_flow_style=False)


TIME_SLICING_HEADER = """\
# NVIDIA's device plugin (GPU operator) configuration for room/deploy/z2jh-values.yaml:
# each GPU is advertised as {replicas} replicas of nvidia.com/gpu, one per learner's server, sharing its
# time.
# Rendered from room/labkit_room/room.py by `python -m labkit hub values --write`. Apply it, then point the
# operator at it:
#   kubectl apply -f room/deploy/nvidia-time-slicing.yaml
#   kubectl patch clusterpolicies.nvidia.com/cluster-policy -n gpu-operator --type merge \\
#     -p '{{"spec": {{"devicePlugin": {{"config": {{"name": "labkit-time-slicing", "default": "any"}}}}}}}}'
"""


def render_time_slicing() -> str:
    import yaml

    from labkit_room import room

    return (TIME_SLICING_HEADER.format(replicas=room.Z2JH_LEARNERS_PER_GPU)
            + yaml.dump(room.time_slicing_config(), Dumper=_literal_dumper(), sort_keys=False,
                        default_flow_style=False))
