"""``python -m labkit lab``: JupyterLab on the first notebook, and the address to open (``make lab``).

Which notebooks it opens is the edition (``make lab EDITION=...``, ``--edition``):

    student      (default) a learner's folder, ``student/``: the student edition of every notebook and
                 the docs it links to that give no answer away, built where missing (a learner's own
                 copy is never overwritten); the file browser shows that folder alone
    instructor   the repository, on ``notebooks/``: the executed notebooks, solutions included

Both open trusted (signed into a notebook-signature database of the lab's own, ``build/lab/``), so a
notebook's saved widgets and HTML render before its cells run.

It picks a free port and a random token itself, so the address it prints is the one the server
answers on, and prints it once the server answers there (not while JupyterLab is still starting).
The token reaches JupyterLab in its environment (``JUPYTER_TOKEN``), never on its
command line: any user of the machine reads a process's command line (``/proc/PID/cmdline``),
and with the token would run code as whoever started the lab (root, on many a shared box); a
process's environment is its own user's alone.

``--allow-root`` is passed only when running as root (containers, many cloud VMs), where
JupyterLab otherwise refuses to start; nobody else needs it. Without a screen (no DISPLAY on
Linux) no browser is opened: open the printed address yourself, through an SSH tunnel from a
remote machine. JupyterLab opens without its pop-up asking about official Jupyter news, and
never checks for updates (see :data:`LAB_OVERRIDES`).

    python -m labkit lab [--edition student|instructor] [--ip 127.0.0.1] [--port 0] [jupyter lab options ...]
    python -m labkit lab --check-only ...    check the edition and the port, start nothing

``make lab-check`` asks ``--check-only`` with the machine's Python before the set-up has made the
venv, so this module imports nothing but the standard library and the kit's paths and errors (which
import nothing else) until JupyterLab is really to start. The set-up's other questions are
:mod:`labkit.tools.setup`'s.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
from pathlib import Path

from labkit import paths
from labkit.errors import LabkitInputError

FIRST_NOTEBOOK = (paths.NOTEBOOKS / "00_setup_and_tour.ipynb").relative_to(paths.REPO).as_posix()
EDITIONS = ("student", "instructor")
LEARNER_FOLDER = paths.REPO / "student"  # gitignored; `make student` builds the same folder
# The lab's own notebook-signature database and its key: what it trusts is what this command signed
# (and what the learner saves from a trusted notebook), whatever else the machine's Jupyter trusts.
LAB_STATE = paths.BUILD / "lab"

# -- JupyterLab without the news prompt ------------------------------------------------------------

# On its first start JupyterLab asks "Would you like to get notified about official Jupyter
# news?" (the `@jupyterlab/apputils-extension:announcements` plugin asks while the Notification
# setting `fetchNews` is "none", its default). An overrides.json in the lab's settings folder
# changes the defaults for everyone using this Python; a learner's own choice in Settings still
# wins. The schema: jupyterlab/schemas/@jupyterlab/apputils-extension/notification.json.
NOTIFICATION_PLUGIN = "@jupyterlab/apputils-extension:notification"
# A Markdown file opens rendered, as the docs a notebook links to (docs/TRITON_MASKS.md, and after the
# capstone MECHANICS.md and VLLM_MAP.md) are meant to be read; JupyterLab's default is its source in an
# editor. "Markdown Preview" is the factory of @jupyterlab/markdownviewer-extension; the schema:
# jupyterlab/schemas/@jupyterlab/docmanager-extension/plugin.json, "defaultViewers".
DOCMANAGER_PLUGIN = "@jupyterlab/docmanager-extension:plugin"
MARKDOWN_VIEWER = "Markdown Preview"
# The file browser gives the names the width its "Modified" column took: at the default width of the
# side panel the names of a learner's copies (``D_07_exercises.ipynb``) then show whole. The schema:
# jupyterlab/schemas/@jupyterlab/filebrowser-extension/browser.json.
FILEBROWSER_PLUGIN = "@jupyterlab/filebrowser-extension:browser"
LAB_OVERRIDES = {NOTIFICATION_PLUGIN: {"fetchNews": "false", "checkForUpdates": False},
                 DOCMANAGER_PLUGIN: {"defaultViewers": {"markdown": MARKDOWN_VIEWER}},
                 FILEBROWSER_PLUGIN: {"showLastModifiedColumn": False}}
# And the server neither fetches the news feed nor asks PyPI for a newer JupyterLab.
NO_NEWS_FLAGS = ["--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
# A browser that drops a kernel's websocket during its handshake (a reload) would leave a traceback
# and a 500 in the server's log (jupyter-server#1265): labkit.tools.lab_server closes it quietly.
QUIET_SOCKETS_EXTENSION = "labkit.tools.lab_server"
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


def trust_notebooks(notebooks, state: Path | None = None) -> int:
    """Sign `notebooks` into the lab's own signature database, as ``jupyter trust`` does into the user's:
    JupyterLab then renders their saved outputs (widget state, HTML) on opening. Returns how many."""
    import nbformat
    from nbformat.sign import NotebookNotary

    state = state or LAB_STATE
    state.mkdir(parents=True, exist_ok=True)
    notary = NotebookNotary(db_file=str(state / "nbsignatures.db"), secret_file=str(state / "notebook_secret"))
    for path in notebooks:
        notary.sign(nbformat.read(path, as_version=4))
    return len(notebooks)


TOKEN_ENV = "JUPYTER_TOKEN"  # where jupyter_server's IdentityProvider reads its token from


def lab_command(ip: str, port: int, *, as_root: bool, open_browser: bool,
                extra: list[str] = (), root: Path = paths.REPO, first: str = FIRST_NOTEBOOK) -> list[str]:
    """The ``jupyter lab`` command line (python -m jupyter, so no venv needs to be active), serving
    `root` and opening `first` (a path under it). No token in it: :func:`lab_env` carries it."""
    cmd = [sys.executable, "-m", "jupyter", "lab",
           f"--ServerApp.ip={ip}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--ServerApp.root_dir={root}", *NO_NEWS_FLAGS, *trust_flags(), QUIET_SOCKETS_FLAG]
    if as_root:
        cmd.append("--allow-root")  # JupyterLab refuses root without it ("Running as root is not recommended")
    if not open_browser:
        cmd.append("--no-browser")
    return cmd + list(extra) + [first]


def lab_env(token: str) -> dict[str, str]:
    """This process's environment with the lab's token in it (readable by this user and root alone)."""
    return {**os.environ, TOKEN_ENV: token}


def lab_url(ip: str, port: int, token: str, first: str = FIRST_NOTEBOOK) -> str:
    host = "127.0.0.1" if ip in ("", "0.0.0.0", "localhost") else ip
    return f"http://{host}:{port}/lab/tree/{first}?token={token}"


# -- the edition and the port: checked before anything starts --------------------------------------

def check_edition(edition: str) -> str:
    """`edition` if it is one of :data:`EDITIONS`; otherwise stop with one line that names both."""
    value = (edition or "").strip().lower()
    if value not in EDITIONS:
        raise LabkitInputError(f"EDITION={edition!r} is not an edition: choose one of {', '.join(EDITIONS)} "
                               "(student, the default, for learners; instructor for the solved notebooks)")
    return value


def check_port(text, ip: str = "127.0.0.1") -> int:
    """The port as an int: 0 (a free one) or 1-65535 that nothing here listens on; otherwise one line."""
    try:
        port = int(str(text).strip())
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise LabkitInputError(f"port {text!r} is not a port: give an integer from 1 to 65535, or 0 for a free one")
    if port:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((ip if ip != "0.0.0.0" else "", port))
            except OSError as err:
                raise LabkitInputError(f"port {port} cannot be used on {ip} ({err.strerror or err}): choose "
                                       "another (--port N, LAB_PORT=N), or 0 for a free one") from None
    return port


def open_edition(edition: str, learner_folder: Path | None = None) -> tuple[Path, str, list[Path]]:
    """(root folder, first notebook under it, the notebooks to trust) for `edition`; the student
    edition's folder is built first where it is missing, and what was kept is said."""
    learner_folder = learner_folder or LEARNER_FOLDER
    if edition == "instructor":
        return paths.REPO, FIRST_NOTEBOOK, sorted(paths.NOTEBOOKS.glob("*.ipynb"))
    from labkit.workshop.editions.student import build_learner_folder

    folder = build_learner_folder(learner_folder, paths.NOTEBOOKS)
    shown = learner_folder.relative_to(paths.REPO) if learner_folder.is_relative_to(paths.REPO) else learner_folder
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


# -- the command ---------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--edition", default=os.environ.get("EDITION") or "student",
                        help="student (default: a learner's folder, student/) or instructor (notebooks/, solved)")
    parser.add_argument("--ip", default=os.environ.get("LAB_IP") or "127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", default=os.environ.get("LAB_PORT") or "0", help="port (default: a free one)")
    parser.add_argument("--check-only", action="store_true",
                        help="check --edition and --port (one line and exit 2 where they are wrong), start nothing")
    parser.epilog = "Any other option goes to `jupyter lab` as it is."
    parser.set_defaults(passed_on=[])


def run(args) -> int:
    edition = check_edition(args.edition)
    port = check_port(args.port, args.ip) or free_port(args.ip if args.ip != "0.0.0.0" else "")
    if args.check_only:
        return 0
    write_lab_overrides()
    root, first, notebooks = open_edition(edition)
    trust_notebooks(notebooks)
    token = secrets.token_hex(24)
    cmd = lab_command(args.ip, port, as_root=is_root(), open_browser=has_screen(), extra=args.passed_on,
                      root=root, first=first)
    url = lab_url(args.ip, port, token, first)
    print(f"JupyterLab is starting on the {edition} edition; its address follows once it answers ...", flush=True)
    banner = _banner(url, edition, args.ip, port)
    status = status_url(args.ip, port)
    if hasattr(os, "fork"):
        # This process becomes JupyterLab (its pid is the lab's, and Ctrl-C reaches it as before); a
        # forked watcher prints the address once the server answers, then exits.
        sys.stdout.flush()
        lab_pid = os.getpid()
        if os.fork() == 0:
            try:
                if wait_until_answering(status, token, alive=lambda: os.getppid() == lab_pid):
                    print(banner, flush=True)
            finally:
                os._exit(0)
        os.chdir(root)
        os.execve(cmd[0], cmd, lab_env(token))
        return 0  # not reached: this process is JupyterLab now
    # No fork (Windows): JupyterLab as a child, watched from here.
    import subprocess

    proc = subprocess.Popen(cmd, cwd=root, env=lab_env(token))
    if wait_until_answering(status, token, alive=lambda: proc.poll() is None):
        print(banner, flush=True)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:  # JupyterLab got it too, and decides whether to stop
            continue


def status_url(ip: str, port: int) -> str:
    """Where the started server answers when it is ready (``/api/status``, which needs the token)."""
    host = "127.0.0.1" if ip in ("", "0.0.0.0", "localhost") else ip
    return f"http://{host}:{port}/api/status"


def wait_until_answering(url: str, token: str, alive, poll_s: float = 0.2, say_every_s: float = 15.0,
                         log=print) -> bool:
    """Poll `url` with `token` until it answers 200 (True), or until ``alive()`` says the server is gone
    (False). Every `say_every_s` seconds of waiting it says it is still waiting."""
    import time
    import urllib.error
    import urllib.request

    started = said = time.monotonic()
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    while alive():
        try:
            with urllib.request.urlopen(request, timeout=2) as answer:
                if answer.status == 200:
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() - said >= say_every_s:
            said = time.monotonic()
            log(f"  ... still starting ({said - started:.0f} s)", flush=True)
        time.sleep(poll_s)
    return False


def _banner(url: str, edition: str, ip: str, port: int) -> str:
    bar = "=" * 78
    lines = [bar, f"  JupyterLab answers on the {edition} edition. Open the lab at:", "", f"    {url}", ""]
    if ip == "0.0.0.0":
        lines.append("  (listening on every interface: use this machine's address in place of 127.0.0.1)")
    elif not has_screen():
        lines.append(f"  On a remote machine, tunnel first: ssh -L {port}:127.0.0.1:{port} <this machine>")
    if is_root():
        lines.append("  Running as root: started with --allow-root; the token above still guards the server.")
    if edition == "student":
        lines.append("  (the instructor edition, solutions included: make lab EDITION=instructor)")
    lines += ["  Stop it with Ctrl-C.", bar]
    return "\n".join(lines)
