"""``python -m labkit setup``: the set-up's questions; the Makefile and ``binder/postBuild`` ask them,
and each prints its answer and exits.

    python -m labkit setup pip-source [--torch cpu|cuda] [--wheelhouse DIR]   the pip options for installing the pins
    python -m labkit setup wheelhouse DIR [--torch cpu|cuda] [--record]       download the pinned wheels into DIR
    python -m labkit setup lab-overrides              JupyterLab's defaults for this Python (labkit.tools.lab)
    python -m labkit setup server-config EDITION      a server started elsewhere (Binder) opens EDITION, trusted
    python -m labkit setup binder-env [--check]       binder/environment.yml: the lab's third-party pins
    python -m labkit setup install EXTRAS [--torch ..] [--wheelhouse DIR] [--installer auto|pip] [--room]
                                                      the kit with EXTRAS at the pins (make's set-up), and
                                                      with --room the room (room/) beside it

The Makefile asks ``pip-source`` before the venv holds any package, so this module imports nothing but
the standard library and the kit's paths, errors and :mod:`labkit.tools.lab` (which import nothing
else); scripts/check_make_vars.py checks TORCH and WHEELHOUSE with :func:`torch_problem` and
:func:`wheelhouse_problem`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from labkit import paths, records
from labkit.errors import LabkitInputError
from labkit.tools import lab

# -- the set-up: where pip takes the pinned packages from ------------------------------------------

# PyPI's torch for Linux is the CUDA build (several GB of NVIDIA libraries); PyTorch's CPU index
# holds `2.13.0+cpu`, which satisfies the pin `torch==2.13.0` and sorts above PyPI's `2.13.0`.
# macOS and Windows wheels on PyPI are CPU builds already.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_CHOICES = ("cpu", "cuda")
PINS = paths.REPO / "requirements" / "ci.txt"
# What `make wheelhouse` downloads: the kit's dependencies with every extra `make test` installs and
# the room's (room/, its own distribution), the build backend pip needs to install the kit itself from
# the clone, pip and uv (the installer).
WHEELHOUSE_EXTRAS = "lab,test,browser"
# The room, beside the kit in the checkout: `make test` installs it (editable, with its hub extra) for its
# hub and room tests.
ROOM = paths.REPO / "room"


def build_requires() -> list[str]:
    """pyproject.toml's [build-system] requires (the kit is installed editable, so pip builds it)."""
    import tomllib

    return list(tomllib.loads((paths.REPO / "pyproject.toml").read_text())["build-system"]["requires"])


def torch_pin() -> str:
    for line in PINS.read_text().splitlines():
        match = re.match(r"\s*torch\s*==\s*([^\s;#]+)", line)
        if match:
            return match.group(1)
    raise SystemExit(f"{PINS} pins no torch")


def cpu_torch_without_index(pin: str | None = None) -> str | None:
    """The version of torch pip would install at the pin with no index at all (from the find-links
    of pip's configuration: a wheelhouse, a folder of wheels on disk), or None. Asks pip itself
    (``--dry-run``; it reads the wheel's metadata, it copies nothing)."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index", "--no-deps",
           "--quiet", "--disable-pip-version-check", "--report", "-", f"torch=={pin or torch_pin()}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        report = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    versions = [item["metadata"]["version"] for item in report.get("install", [])
                if item.get("metadata", {}).get("name", "").lower() == "torch"]
    return versions[0] if versions else None


def installed_torch() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def index_unreachable(url: str, timeout: float = 10.0) -> str | None:
    """Why `url` cannot be reached (no name, no route, no answer within `timeout`), or None.
    An answer of any kind, an HTTP error or a certificate pip may accept included, counts as reached."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as err:
        if isinstance(err.reason, ssl.SSLError):
            return None
        return str(err.reason)
    except (OSError, ValueError) as err:  # a timeout, a reset
        return str(err) or type(err).__name__


def torch_problem(torch: str) -> str | None:
    """What is wrong with TORCH=`torch`, in one line, or None (scripts/check_make_vars.py asks too)."""
    if torch in TORCH_CHOICES:
        return None
    return (f"TORCH={torch!r} is not a torch build the set-up knows; choose one of {', '.join(TORCH_CHOICES)} "
            "(cpu, the default: the CPU build on Linux; cuda: PyPI's torch)")


def wheelhouse_problem(wheelhouse: str) -> str | None:
    """What is wrong with WHEELHOUSE=`wheelhouse` (a folder to install from), in one line, or None."""
    folder = Path(wheelhouse).expanduser()
    if folder.is_dir() and any(folder.glob("*.whl")):
        return None
    what = "no wheels there" if folder.is_dir() else ("a file, not a folder" if folder.exists() else "no such folder")
    return (f"WHEELHOUSE={wheelhouse!r}: {what}; choose a folder of wheels that `make wheelhouse` filled "
            "(on a machine with a network, same platform and Python), or leave WHEELHOUSE empty to install "
            "from the indexes")


def pip_source_args(torch: str = "cpu", wheelhouse: str | None = None, *, platform: str = sys.platform,
                    for_download: bool = False, available=cpu_torch_without_index, installed=installed_torch,
                    unreachable=index_unreachable) -> list[str]:
    """The pip options that choose where the pinned packages come from.

    * ``wheelhouse``: that folder alone, no index (``make lab WHEELHOUSE=DIR``, a room offline);
    * ``torch="cuda"``, and any platform but Linux: pip's own configuration (PyPI);
    * ``torch="cpu"`` on Linux: PyTorch's CPU index as an extra index -- unless pip can already
      take the pinned CPU build without an index (a wheelhouse or a folder of wheels named in
      pip's configuration) or, for an install (not `for_download`), torch is already installed at
      the pin. Then no extra index: pip would
      otherwise ask it about every package, and where it cannot be reached retry each one
      (about 8 s a package, measured; see README). Where it is needed but cannot be reached, stop
      and say what to do instead.
    """
    if wheelhouse:
        problem = wheelhouse_problem(wheelhouse)
        if problem:
            raise SystemExit(problem)
        return ["--no-index", "--find-links", str(Path(wheelhouse).expanduser().resolve())]
    problem = torch_problem(torch)
    if problem:
        raise SystemExit(problem)
    if torch == "cuda" or not platform.startswith("linux"):
        return []
    pin = torch_pin()
    have = None if for_download else installed()
    if have is not None and (have == pin or have.startswith(pin + "+")):
        return []
    local = available(pin)
    if local is not None and local.endswith("+cpu"):
        return []
    why = unreachable(TORCH_CPU_INDEX)
    if why is not None:
        raise SystemExit(
            f"The CPU build of torch comes from {TORCH_CPU_INDEX}, which cannot be reached from here ({why}).\n"
            "  pip would retry it for every package. Instead, with the same make target (lab, test, ...):\n"
            "    make lab TORCH=cuda             PyPI's torch (on Linux the CUDA build, several GB), or\n"
            "    make lab WHEELHOUSE=DIR         wheels that `make wheelhouse` downloaded elsewhere.")
    return ["--extra-index-url", TORCH_CPU_INDEX]


# -- the set-up: installing the pins ------------------------------------------------------------------

INSTALLERS = ("auto", "pip")


def installer_problem(installer: str) -> str | None:
    if installer in INSTALLERS:
        return None
    return (f"INSTALLER={installer!r} is not an installer; choose auto (uv where it installs, else pip) or pip "
            "(pip alone)")


def pip_config() -> list[tuple[str, str]]:
    """pip's own configuration as `pip config list` gives it, PIP_* variables first (they win over the
    files): (option, value) pairs, the option without its section ("find-links", "cert")."""
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        section, _, option = key.strip().rpartition(".")
        found.append((section != ":env:", option, value.strip().strip("'\"")))
    return [(option, value) for _, option, value in sorted(found, key=lambda item: item[0])]


def pip_config_find_links() -> list[str]:
    """The folders of wheels pip's own configuration names (find-links), which uv does not read."""
    found: list[str] = []
    for option, value in pip_config():
        if option == "find-links":
            found += [item for item in value.split() if item not in found and Path(item).is_dir()]
    return found


def uv_env() -> dict[str, str]:
    """The environment uv installs in: this one, and where pip is configured with a certificate bundle
    of its own (cert, PIP_CERT: a network whose TLS a local authority signs) and SSL_CERT_FILE is not
    set, that bundle as SSL_CERT_FILE. uv reads no pip configuration: without it uv trusts its own
    roots alone, fails on every request there, and pip installs instead after all."""
    env = dict(os.environ)
    if not env.get("SSL_CERT_FILE"):
        cert = next((value for option, value in pip_config() if option == "cert" and Path(value).is_file()), None)
        if cert:
            env["SSL_CERT_FILE"] = cert
    return env


def uv_source_args(source: list[str]) -> list[str]:
    """`pip_source_args`'s answer for uv: the same index or wheelhouse, pip's configured folders of wheels
    (where pip may take the CPU torch from disk), and every index's versions weighed together (uv
    otherwise takes a package from the first index that has it, and PyTorch's CPU index carries old
    copies of numpy and others)."""
    args = list(source)
    if "--no-index" not in args:
        for folder in pip_config_find_links():
            args += ["--find-links", folder]
    return args + ["--index-strategy", "unsafe-best-match"]


def _get_uv(source: list[str], log) -> str | None:
    """uv, pinned in requirements/ci.txt, installed into this venv by pip from where the pins come from;
    None where it cannot be (no network and no uv in the wheelhouse, a platform without its wheel)."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "--root-user-action=ignore", *source, "-c", str(PINS), "uv"],
                          capture_output=True, text=True, cwd=paths.REPO)
    uv = Path(sys.executable).parent / ("uv.exe" if sys.platform == "win32" else "uv")
    if done.returncode != 0 or not uv.is_file():
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no uv after the install"]
        log(f"   uv is not available here ({last[0][:160]}): pip installs instead")
        return None
    return str(uv)


# What a learner's first minutes import: the lab's server and kernel, the kit, torch and Triton, the
# notebooks' plotting and widgets. Their bytecode is written while the set-up waits; the rest of the
# environment's is compiled in the background.
LAB_IMPORTS = ("labkit", "labkit.workshop.tour", "torch", "numpy", "matplotlib.pyplot", "ipywidgets",
               "ipykernel.kernelapp", "jupyterlab.labapp", "jupyter_server.serverapp", "jupyter_resource_usage",
               "nbformat", "tqdm", "hypothesis", "triton.language")


def compile_bytecode(background: bool, log=print) -> None:
    """Write the environment's bytecode. Without it every process that imports torch compiles its
    modules again where PYTHONDONTWRITEBYTECODE is set (several seconds a kernel). Like pip's own
    pass, files that are not Python 3 source (templates, py2 leftovers) are skipped. `background`:
    first what the lab imports (LAB_IMPORTS, imported once with bytecode writing on: about half
    the time of compiling everything on 2 cores), then everything else at the lowest priority, in a
    process of its own that outlives the set-up (its log: .venv/compile.log)."""
    everything = [sys.executable, "-m", "compileall", "-qq", "-j", "0", str(Path(sys.prefix) / "lib")]
    if not background:
        subprocess.run(everything, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    try:\n        importlib.import_module(name)\n" \
           "    except Exception:\n        pass\n"
    subprocess.run([sys.executable, "-c", code, *LAB_IMPORTS], env=env, cwd=paths.REPO,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(Path(sys.prefix) / "compile.log", "w") as out:
        subprocess.Popen(["nice", "-n", "19", *everything] if shutil.which("nice") else everything,
                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log("   the lab's own imports compiled; the rest of the environment compiles in the background")


def install(extras: str, torch: str = "cpu", wheelhouse: str | None = None, installer: str = "auto",
            log=print, background_compile: bool = False, room: bool = False) -> int:
    """Install the kit (editable) with `extras` at the pins into this Python, and with `room` the room's
    distribution beside it (room/, editable), then compile its bytecode on every core. With installer
    "auto", uv installs (parallel downloads, no bytecode pass of its own; pip's resolver and serial
    downloads were most of a first `make lab`); where uv cannot be had or fails, pip does, from the same
    source. Returns the exit status."""
    problem = installer_problem(installer) or torch_problem(torch) or (wheelhouse and wheelhouse_problem(wheelhouse))
    if problem:
        raise LabkitInputError(problem)
    source = pip_source_args(torch, wheelhouse or None)
    log(f"   packages from: {' '.join(source) or 'the configured indexes'} (TORCH={torch}"
        f"{f' WHEELHOUSE={wheelhouse}' if wheelhouse else ''}); the kit with [{extras}]"
        f"{' and the room' if room else ''}")
    target = ["-c", str(PINS), "-e", f".[{extras}]", *(["-e", f"{ROOM}[hub]"] if room else [])]
    uv = _get_uv(source, log) if installer == "auto" else None
    code = 1
    if uv is not None:
        log("   installing with uv")
        # pip too, at its newest, as the pip path upgrades it: `make wheelhouse` and the tests use it.
        code = subprocess.run([uv, "pip", "install", "--python", sys.executable, *uv_source_args(source), "pip",
                               *target], cwd=paths.REPO, env=uv_env()).returncode
        if code != 0:
            log("   uv could not install the pins (above): pip installs them instead")
    if code != 0:
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
        quiet = ["install", "-q", "--root-user-action=ignore", *source]
        code = subprocess.run([*pip, *quiet, "--upgrade", "pip"], cwd=paths.REPO).returncode or subprocess.run(
            [*pip, *quiet, "--no-compile", *target], cwd=paths.REPO).returncode
    close_venv_lock()
    if code == 0:
        compile_bytecode(background_compile, log)
    return code


def close_venv_lock(venv: Path | None = None) -> None:
    """uv leaves its lock file in the venv writable by everyone (.venv/.lock, mode 0666): on a box that
    serves a room, every learner could write into the kit's checkout. Its owner alone writes it."""
    lock = Path(venv or sys.prefix) / ".lock"
    if lock.is_file() and not lock.is_symlink():
        lock.chmod(lock.stat().st_mode & 0o755)


# -- the set-up: a wheelhouse for a room without a good network ------------------------------------

def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def make_wheelhouse(dest: Path, torch: str = "cpu") -> dict:
    """``pip download`` every pinned package ``make lab`` installs (for this machine's platform and
    Python) into `dest`, printing what it fetches from the network and a summary; returns the summary."""
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    source = pip_source_args(torch, for_download=True)
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--progress-bar", "off",
           "-d", str(dest), *source, "-c", str(PINS), f".[{WHEELHOUSE_EXTRAS}]", f"{ROOM}[hub]", *build_requires(),
           "pip", "uv"]
    print(f"== wheelhouse: pip download into {dest} (TORCH={torch}; "
          f"{' '.join(source) or 'the indexes of pip configuration'})", flush=True)
    started = time.monotonic()
    fetched: dict[str, list[str]] = {"network": [], "disk": [], "there": []}
    saved = 0
    proc = subprocess.Popen(cmd, cwd=paths.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-40:]
        if m := re.match(r"\s*Downloading (\S+\.whl) \(([^)]+)\)", line):
            fetched["network"].append(m.group(1))
            print(f"   downloading {m.group(1)} ({m.group(2)})", flush=True)
        elif m := re.match(r"\s*Processing (/\S+\.whl)", line):
            fetched["disk"].append(Path(m.group(1)).name)
        elif m := re.match(r"\s*File was already downloaded (\S+)", line):
            fetched["there"].append(Path(m.group(1)).name)
        if line.startswith("Saved ") or "File was already downloaded" in line:
            saved += 1
            if saved % 25 == 0:
                print(f"   {saved} wheels so far ({time.monotonic() - started:.0f} s)", flush=True)
    if proc.wait() != 0:
        print("\n".join(tail), file=sys.stderr)
        raise SystemExit(f"pip download failed (exit {proc.returncode}); its last lines are above")
    wheels = sorted(dest.glob("*.whl"))
    size = {w.name: w.stat().st_size for w in wheels}
    summary = {"wheels": len(wheels), "bytes": sum(size.values()), "seconds": round(time.monotonic() - started, 1),
               **{k: sum(size.get(Path(n).name.replace("%2B", "+"), 0) for n in v) for k, v in fetched.items()}}
    largest = sorted(size.items(), key=lambda kv: -kv[1])[:3]
    print(f"== wheelhouse: {summary['wheels']} wheels, {_mb(summary['bytes'])} in {dest}, "
          f"{summary['seconds']:.0f} s (network {_mb(summary['network'])}, local disk {_mb(summary['disk'])}, "
          f"already there {_mb(summary['there'])}); largest: "
          + ", ".join(f"{n.split('-')[0]} {_mb(s)}" for n, s in largest), flush=True)
    shown = dest.relative_to(paths.REPO) if dest.is_relative_to(paths.REPO) else dest
    print(f"   install from it with no index: make lab WHEELHOUSE={shown}", flush=True)
    summary["largest"] = [[name.split("-")[0], n] for name, n in largest]
    return summary


DOWNLOADS_RECORD = records.CPU_DOWNLOADS


def host_platform(torch: str = "cpu") -> str:
    """The record's key for this machine's downloads: "linux-x86_64", "linux-x86_64-cuda", ..."""
    import platform

    return f"{sys.platform}-{platform.machine().lower()}" + ("-cuda" if torch == "cuda" else "")


def record_downloads(summary: dict, torch: str, path: Path = DOWNLOADS_RECORD) -> Path:
    """Write this machine's wheelhouse summary into the downloads record (README renders it); the
    other platforms' entries stay."""
    import platform

    record = json.loads(path.read_text()) if path.exists() else {"platforms": {}}
    record["platforms"][host_platform(torch)] = {
        "bytes": summary["bytes"], "wheels": summary["wheels"], "from_disk_bytes": summary["disk"],
        "largest": summary["largest"],
        "provenance": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "python": platform.python_version(),
                       "command": f"make wheelhouse TORCH={torch} RECORD=1 (python -m labkit setup wheelhouse)"}}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


# -- a server someone else starts (Binder, a JupyterHub built by repo2docker) ------------------------

def server_config_dir() -> Path:
    """Where this Python's Jupyter server reads its drop-in configuration files."""
    return Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d"


def write_server_config(edition: str, config_dir: Path | None = None) -> Path:
    """For a server `python -m labkit lab` does not start (binder/postBuild): the edition's folder as the
    server's root and its first notebook as the default page, the lab's signature database, and
    its notebooks trusted. A launcher's own command line (a Binder ``urlpath``) still wins."""
    root, first, notebooks = lab.open_edition(lab.check_edition(edition))
    lab.trust_notebooks(notebooks)
    notary = dict(arg[2:].split("=", 1) for arg in lab.trust_flags())
    config = {"ServerApp": {"root_dir": str(root), "default_url": f"/lab/tree/{first}",
                            "jpserver_extensions": {lab.QUIET_SOCKETS_EXTENSION: True}},
              "NotebookNotary": {key.split(".", 1)[1]: value for key, value in notary.items()}}
    path = (config_dir or server_config_dir()) / "labkit-edition.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


# -- Binder: the third-party packages in environment.yml, the kit in postBuild ---------------------

BINDER_ENV = paths.REPO / "binder" / "environment.yml"
# Pins of packages the lab does not name but installs, kept for the lab's sake (requirements/ci.txt
# says why): without them Binder would take whatever their newest is.
BINDER_TRANSITIVE_PINS = ("jsonschema",)


def _pins() -> dict[str, str]:
    """requirements/ci.txt as {normalised name: the whole requirement line}."""
    pins = {}
    for line in PINS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"([A-Za-z0-9_.-]+)\s*==", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = line
    return pins


def binder_requirements() -> list[str]:
    """What Binder installs before it copies the repository (and so caches across commits): the
    kit's dependencies and its lab extra at the pins CI tests, and the index of PyTorch's CPU builds."""
    import tomllib

    project = tomllib.loads((paths.REPO / "pyproject.toml").read_text())["project"]
    wanted = [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in
              project["dependencies"] + project["optional-dependencies"]["lab"]]
    pins = _pins()
    lines, seen = [], set()
    for name in wanted + list(BINDER_TRANSITIVE_PINS):
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        if key not in pins:
            raise LabkitInputError(f"{PINS.relative_to(paths.REPO)} pins no {name}, which the lab installs")
        seen.add(key)
        lines.append(pins[key])
    return [f"--extra-index-url {TORCH_CPU_INDEX}"] + lines


def render_binder_env() -> str:
    items = "".join(f"      - {line}\n" for line in binder_requirements())
    return ("# Binder / JupyterHub (repo2docker): Python, and every third-party package of the lab at the pins\n"
            "# CI tests (requirements/ci.txt), with the CPU builds of torch. repo2docker installs this file\n"
            "# before it copies the repository, so its image layer is reused until this file changes;\n"
            "# binder/postBuild then installs the kit alone. Written by `python -m labkit setup binder-env`.\n"
            "name: labkit\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n"
            + items)


# -- the command ---------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    verbs = parser.add_subparsers(dest="question", required=True)
    source = verbs.add_parser("pip-source", help="print the pip options for installing the pins")
    source.add_argument("--wheelhouse", default="", help="install from this folder alone, no index")
    wheels = verbs.add_parser("wheelhouse", help="download the pinned wheels into DIR (make wheelhouse)")
    wheels.add_argument("dir", metavar="DIR")
    for verb in (source, wheels):
        verb.add_argument("--torch", default="cpu", help="cpu (default: the CPU build on Linux) or cuda (PyPI's)")
    wheels.add_argument("--record", action="store_true",
                        help=f"write its sizes into {DOWNLOADS_RECORD.relative_to(paths.REPO)}")
    verbs.add_parser("lab-overrides", help="write JupyterLab's defaults (no news prompt, no update checks) for this "
                                           "Python")
    server = verbs.add_parser("server-config", help="make this Python's Jupyter server open EDITION, trusted")
    server.add_argument("edition", metavar="EDITION", help="student or instructor")
    inst = verbs.add_parser("install", help="install the kit with EXTRAS at the pins into this Python (make's set-up)")
    inst.add_argument("extras", metavar="EXTRAS", help="comma-separated extras, e.g. lab or lab,test,browser")
    inst.add_argument("--torch", default="cpu", help="cpu (default: the CPU build on Linux) or cuda (PyPI's)")
    inst.add_argument("--wheelhouse", default="", help="install from this folder alone, no index")
    inst.add_argument("--installer", default="auto", help="auto (uv where it installs, else pip; default) or pip")
    inst.add_argument("--compile-in-background", action="store_true",
                      help="compile the lab's imports now and the rest of the bytecode in the background")
    inst.add_argument("--room", action="store_true",
                      help="and the room beside the kit (room/, its own distribution: python -m labkit hub)")
    binder = verbs.add_parser("binder-env", help="write binder/environment.yml from pyproject.toml and the pins")
    binder.add_argument("--check", action="store_true", help="only say whether the file is as it would be written")


def run(args) -> int:
    if args.question == "pip-source":
        problem = torch_problem(args.torch) or (args.wheelhouse and wheelhouse_problem(args.wheelhouse))
        if problem:  # one line and exit 2, as from the Makefile's own check of the same values
            raise LabkitInputError(problem)
        print(" ".join(pip_source_args(args.torch, args.wheelhouse or None)))
    elif args.question == "wheelhouse":
        problem = torch_problem(args.torch)
        if problem:
            raise LabkitInputError(problem)
        summary = make_wheelhouse(Path(args.dir), args.torch)
        if args.record:
            path = record_downloads(summary, args.torch).relative_to(paths.REPO)
            print(f"wrote {path}: python -m labkit docs --write")
    elif args.question == "install":
        return install(args.extras, args.torch, args.wheelhouse or None, args.installer,
                       background_compile=args.compile_in_background, room=args.room)
    elif args.question == "binder-env":
        text, where = render_binder_env(), BINDER_ENV.relative_to(paths.REPO)
        if args.check:
            if BINDER_ENV.read_text() != text:
                print(f"{where} is not as pyproject.toml and the pins say: python -m labkit setup binder-env")
                return 1
            print(f"{where} is as pyproject.toml and the pins say")
        else:
            BINDER_ENV.write_text(text)
            print(f"wrote {where}")
    elif args.question == "lab-overrides":
        print(f"JupyterLab defaults (no news prompt, no update checks): {lab.write_lab_overrides()}")
    else:
        print(f"Jupyter server opens the {lab.check_edition(args.edition)} edition: "
              f"{write_server_config(args.edition)}")
    return 0
