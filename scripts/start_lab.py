"""Start JupyterLab on the first notebook and print the address to open (``make lab``).

Which notebooks it opens is the edition (``make lab EDITION=...``, ``--edition``):

    student      (default) a learner's folder, ``student/``: the student edition of every notebook and
                 the docs it links to that give no answer away, built where missing (a learner's own
                 copy is never overwritten); the file browser shows that folder alone
    instructor   the repository, on ``notebooks/``: the executed notebooks, solutions included

Both open trusted (signed into a notebook-signature database of the lab's own, ``build/lab/``), so a
notebook's saved widgets and HTML render before its cells run.

It picks a free port and a random token itself, so the address it prints is the one the server
answers on. ``--allow-root`` is passed only when running as root (containers, many cloud VMs),
where JupyterLab otherwise refuses to start; nobody else needs it. Without a screen (no DISPLAY
on Linux) no browser is opened: open the printed address yourself, through an SSH tunnel from a
remote machine. JupyterLab opens without its pop-up asking about official Jupyter news, and
never checks for updates (see :data:`LAB_OVERRIDES`).

    python scripts/start_lab.py [--ip 127.0.0.1] [--port 0] [jupyter lab options ...]

The same script answers three questions of the set-up (the Makefile and ``binder/postBuild``
ask them; each prints its answer and exits):

    --pip-source [--torch cpu|cuda] [--wheelhouse DIR]   the pip options for installing the pins
    --make-wheelhouse DIR [--torch cpu|cuda]              download the pinned wheels into DIR
    --write-lab-overrides                                 JupyterLab's defaults for this Python
    --write-server-config student|instructor              a server started elsewhere (Binder) opens it
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIRST_NOTEBOOK = "notebooks/00_setup_and_tour.ipynb"
EDITIONS = ("student", "instructor")
LEARNER_FOLDER = REPO / "student"  # gitignored; `make student` builds the same folder
# The lab's own notebook-signature database and its key: what it trusts is what this script signed
# (and what the learner saves from a trusted notebook), whatever else the machine's Jupyter trusts.
LAB_STATE = REPO / "build" / "lab"

# -- JupyterLab without the news prompt ------------------------------------------------------------

# On its first start JupyterLab asks "Would you like to get notified about official Jupyter
# news?" (the `@jupyterlab/apputils-extension:announcements` plugin asks while the Notification
# setting `fetchNews` is "none", its default). An overrides.json in the lab's settings folder
# changes the defaults for everyone using this Python; a learner's own choice in Settings still
# wins. The schema: jupyterlab/schemas/@jupyterlab/apputils-extension/notification.json.
NOTIFICATION_PLUGIN = "@jupyterlab/apputils-extension:notification"
LAB_OVERRIDES = {NOTIFICATION_PLUGIN: {"fetchNews": "false", "checkForUpdates": False}}
# And the server neither fetches the news feed nor asks PyPI for a newer JupyterLab.
NO_NEWS_FLAGS = ["--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
# A browser that drops a kernel's websocket during its handshake (a reload) would leave a traceback
# and a 500 in the server's log (jupyter-server#1265): labkit.classroom.lab_server closes it quietly.
QUIET_SOCKETS_EXTENSION = "labkit.classroom.lab_server"
QUIET_SOCKETS_FLAG = f"--ServerApp.jpserver_extensions={{'{QUIET_SOCKETS_EXTENSION}': True}}"


def lab_settings_dir() -> Path:
    """Where this Python's JupyterLab reads overrides.json: ``<sys.prefix>/share/jupyter/lab/settings``
    (``$JUPYTERLAB_DIR/settings`` where that is set, as JupyterLab itself does)."""
    app_dir = os.environ.get("JUPYTERLAB_DIR") or os.path.join(sys.prefix, "share", "jupyter", "lab")
    return Path(app_dir).resolve() / "settings"


def write_lab_overrides(settings_dir: Path | None = None) -> Path:
    """Merge :data:`LAB_OVERRIDES` into ``overrides.json`` (other plugins' entries are kept)."""
    path = Path(settings_dir or lab_settings_dir()) / "overrides.json"
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    if not isinstance(current, dict):
        current = {}
    for plugin, values in LAB_OVERRIDES.items():
        entry = current.get(plugin) if isinstance(current.get(plugin), dict) else {}
        current[plugin] = {**entry, **values}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n")
    return path


# -- JupyterLab's command line ---------------------------------------------------------------------

def free_port(ip: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def has_screen() -> bool:
    if not sys.platform.startswith("linux"):
        return True  # macOS and Windows open the default browser without a DISPLAY
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def trust_flags(state: Path | None = None) -> list[str]:
    """The lab's notebook-signature database and key (see :func:`trust_notebooks`)."""
    state = state or LAB_STATE
    return [f"--NotebookNotary.db_file={state / 'nbsignatures.db'}",
            f"--NotebookNotary.secret_file={state / 'notebook_secret'}"]


def trust_notebooks(paths, state: Path | None = None) -> int:
    """Sign `paths` into the lab's own signature database, as ``jupyter trust`` does into the user's:
    JupyterLab then renders their saved outputs (widget state, HTML) on opening. Returns how many."""
    import nbformat
    from nbformat.sign import NotebookNotary

    state = state or LAB_STATE
    state.mkdir(parents=True, exist_ok=True)
    notary = NotebookNotary(db_file=str(state / "nbsignatures.db"), secret_file=str(state / "notebook_secret"))
    for path in paths:
        notary.sign(nbformat.read(path, as_version=4))
    return len(paths)


def lab_command(ip: str, port: int, token: str, *, as_root: bool, open_browser: bool,
                extra: list[str] = (), root: Path = REPO, first: str = FIRST_NOTEBOOK) -> list[str]:
    """The ``jupyter lab`` command line (python -m jupyter, so no venv needs to be active), serving
    `root` and opening `first` (a path under it)."""
    cmd = [sys.executable, "-m", "jupyter", "lab",
           f"--ServerApp.ip={ip}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", *NO_NEWS_FLAGS, *trust_flags(),
           QUIET_SOCKETS_FLAG]
    if as_root:
        cmd.append("--allow-root")  # JupyterLab refuses root without it ("Running as root is not recommended")
    if not open_browser:
        cmd.append("--no-browser")
    return cmd + list(extra) + [first]


def lab_url(ip: str, port: int, token: str, first: str = FIRST_NOTEBOOK) -> str:
    host = "127.0.0.1" if ip in ("", "0.0.0.0", "localhost") else ip
    return f"http://{host}:{port}/lab/tree/{first}?token={token}"


# -- the edition and the port: checked before anything starts --------------------------------------

def usage_error(message: str):
    """Stop with one line on stderr and exit status 2, as every bad value of the set-up does."""
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)


def check_edition(edition: str) -> str:
    """`edition` if it is one of :data:`EDITIONS`; otherwise stop with one line that names both."""
    value = (edition or "").strip().lower()
    if value not in EDITIONS:
        usage_error(f"EDITION={edition!r} is not an edition: choose one of {', '.join(EDITIONS)} "
                         "(student, the default, for learners; instructor for the solved notebooks)")
    return value


def check_port(text, ip: str = "127.0.0.1") -> int:
    """The port as an int: 0 (a free one) or 1-65535 that nothing here listens on; otherwise one line."""
    try:
        port = int(str(text).strip())
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        usage_error(f"port {text!r} is not a port: give an integer from 1 to 65535, or 0 for a free one")
    if port:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((ip if ip != "0.0.0.0" else "", port))
            except OSError as err:
                usage_error(f"port {port} cannot be used on {ip} ({err.strerror or err}): choose another "
                            "(--port N, LAB_PORT=N), or 0 for a free one")
    return port


def open_edition(edition: str, learner_folder: Path | None = None) -> tuple[Path, str, list[Path]]:
    """(root folder, first notebook under it, the notebooks to trust) for `edition`; the student
    edition's folder is built first where it is missing, and what was kept is said."""
    learner_folder = learner_folder or LEARNER_FOLDER
    if edition == "instructor":
        return REPO, FIRST_NOTEBOOK, sorted((REPO / "notebooks").glob("*.ipynb"))
    sys.path.insert(0, str(REPO))  # this clone's labkit, whatever the interpreter has installed
    from labkit.workshop.editions.student import build_learner_folder

    folder = build_learner_folder(learner_folder, REPO / "notebooks")
    shown = learner_folder.relative_to(REPO) if learner_folder.is_relative_to(REPO) else learner_folder
    if folder.written:
        print(f"  student edition: wrote {len(folder.written)} notebook(s) into {shown}/", flush=True)
    if folder.outdated:
        names = ", ".join(p.name for p in folder.outdated)
        print(f"  kept your copies of {names} although the kit's notebooks changed since; to start one "
              f"afresh, delete it from {shown}/ (your answers in it go with it)", flush=True)
    if folder.others:
        names = ", ".join(str(p.relative_to(learner_folder)) for p in folder.others[:6])
        print(f"  {shown}/ also holds {len(folder.others)} file(s) a learner's folder does not ({names}"
              f"{', ...' if len(folder.others) > 6 else ''}), left as they are: an older `make student` "
              "wrote them; move them away if learners should not see them", flush=True)
    return learner_folder, folder.first.name, list(folder.notebooks)


# -- the set-up: where pip takes the pinned packages from ------------------------------------------

# PyPI's torch for Linux is the CUDA build (several GB of NVIDIA libraries); PyTorch's CPU index
# holds `2.13.0+cpu`, which satisfies the pin `torch==2.13.0` and sorts above PyPI's `2.13.0`.
# macOS and Windows wheels on PyPI are CPU builds already.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_CHOICES = ("cpu", "cuda")
PINS = REPO / "requirements" / "ci.txt"
# What `make wheelhouse` downloads: the kit's dependencies with every extra `make lab` installs,
# the build backend pip needs to install the kit itself from the clone, and pip.
WHEELHOUSE_EXTRAS = "lab,test,browser,hub"


def build_requires() -> list[str]:
    """pyproject.toml's [build-system] requires (the kit is installed editable, so pip builds it)."""
    import tomllib

    return list(tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"])


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
            "  pip would retry it for every package. Instead:\n"
            "    make lab TORCH=cuda             PyPI's torch (on Linux the CUDA build, several GB), or\n"
            "    make lab WHEELHOUSE=DIR         wheels that `make wheelhouse` downloaded elsewhere.")
    return ["--extra-index-url", TORCH_CPU_INDEX]


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
           "-d", str(dest), *source, "-c", str(PINS), f".[{WHEELHOUSE_EXTRAS}]", *build_requires(), "pip"]
    print(f"== wheelhouse: pip download into {dest} (TORCH={torch}; "
          f"{' '.join(source) or 'the indexes of pip configuration'})", flush=True)
    started = time.monotonic()
    fetched: dict[str, list[str]] = {"network": [], "disk": [], "there": []}
    saved = 0
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
    shown = dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest
    print(f"   install from it with no index: make lab WHEELHOUSE={shown}", flush=True)
    summary["largest"] = [[name.split("-")[0], n] for name, n in largest]
    return summary


DOWNLOADS_RECORD = REPO / "labkit" / "data" / "cpu" / "downloads.json"


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
                       "command": f"make wheelhouse TORCH={torch} RECORD=1 (scripts/start_lab.py)"}}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


# -- a server someone else starts (Binder, a JupyterHub built by repo2docker) ------------------------

def server_config_dir() -> Path:
    """Where this Python's Jupyter server reads its drop-in configuration files."""
    return Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d"


def write_server_config(edition: str, config_dir: Path | None = None) -> Path:
    """For a server this script does not start (binder/postBuild): the edition's folder as the
    server's root and its first notebook as the default page, the lab's signature database, and
    its notebooks trusted. A launcher's own command line (a Binder ``urlpath``) still wins."""
    root, first, notebooks = open_edition(check_edition(edition))
    trust_notebooks(notebooks)
    notary = dict(arg[2:].split("=", 1) for arg in trust_flags())
    config = {"ServerApp": {"root_dir": str(root), "default_url": f"/lab/tree/{first}",
                            "jpserver_extensions": {QUIET_SOCKETS_EXTENSION: True}},
              "NotebookNotary": {key.split(".", 1)[1]: value for key, value in notary.items()}}
    path = (config_dir or server_config_dir()) / "labkit-edition.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


# -- main ------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ip", default=os.environ.get("LAB_IP") or "127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", default=os.environ.get("LAB_PORT") or "0",
                        help="port (default: a free one)")
    parser.add_argument("--edition", default=os.environ.get("EDITION") or "student",
                        help="student (default: a learner's folder, student/) or instructor (notebooks/, solved)")
    setup = parser.add_argument_group("set-up (each prints its answer and exits)")
    setup.add_argument("--pip-source", action="store_true", help="print the pip options for installing the pins")
    setup.add_argument("--make-wheelhouse", metavar="DIR", help="download the pinned wheels into DIR")
    setup.add_argument("--write-lab-overrides", action="store_true",
                       help="write JupyterLab's defaults (no news prompt, no update checks) for this Python")
    setup.add_argument("--check-only", action="store_true",
                       help="check --edition and --port (one line and exit 2 where they are wrong), start nothing")
    setup.add_argument("--write-server-config", metavar="EDITION",
                       help="make this Python's Jupyter server open EDITION (student or instructor), trusted")
    setup.add_argument("--torch", default="cpu", help="cpu (default: the CPU build on Linux) or cuda (PyPI's build)")
    setup.add_argument("--wheelhouse", default="", help="with --pip-source: install from this folder, no index")
    setup.add_argument("--record", action="store_true",
                       help="with --make-wheelhouse: write its sizes into labkit/data/cpu/downloads.json")
    args, extra = parser.parse_known_args(argv)
    if args.pip_source:
        problem = torch_problem(args.torch) or (args.wheelhouse and wheelhouse_problem(args.wheelhouse))
        if problem:  # one line and exit 2, as from the Makefile's own check of the same values
            print(f"start_lab.py --pip-source: error: {problem}", file=sys.stderr)
            return 2
        print(" ".join(pip_source_args(args.torch, args.wheelhouse or None)))
        return 0
    if args.make_wheelhouse:
        summary = make_wheelhouse(Path(args.make_wheelhouse), args.torch)
        if args.record:
            print(f"wrote {record_downloads(summary, args.torch).relative_to(REPO)}: python -m labkit docs --write")
        return 0
    if args.write_lab_overrides:
        print(f"JupyterLab defaults (no news prompt, no update checks): {write_lab_overrides()}")
        return 0
    if args.write_server_config:
        print(f"Jupyter server opens the {check_edition(args.write_server_config)} edition: "
              f"{write_server_config(args.write_server_config)}")
        return 0

    edition = check_edition(args.edition)
    port = check_port(args.port, args.ip) or free_port(args.ip if args.ip != "0.0.0.0" else "")
    if args.check_only:
        return 0
    write_lab_overrides()
    root, first, notebooks = open_edition(edition)
    trust_notebooks(notebooks)
    token = secrets.token_hex(24)
    cmd = lab_command(args.ip, port, token, as_root=is_root(), open_browser=has_screen(), extra=extra,
                      root=root, first=first)
    url = lab_url(args.ip, port, token, first)
    bar = "=" * 78
    print(f"{bar}\n  JupyterLab is starting on the {edition} edition. Open the lab at:\n\n    {url}\n", flush=True)
    if args.ip == "0.0.0.0":
        print("  (listening on every interface: use this machine's address in place of 127.0.0.1)")
    elif not has_screen():
        print(f"  On a remote machine, tunnel first: ssh -L {port}:127.0.0.1:{port} <this machine>")
    if is_root():
        print("  Running as root: started with --allow-root; the token above still guards the server.")
    if edition == "student":
        print("  (the instructor edition, solutions included: make lab EDITION=instructor)")
    print(f"  Stop it with Ctrl-C.\n{bar}", flush=True)
    os.chdir(root)
    os.execv(cmd[0], cmd)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
