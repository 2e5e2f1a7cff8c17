"""Start a room's hub, and stop it leaving nothing behind: ``python -m labkit hub start|stop``.

``start`` (as root) asks the box which limits it can enforce and prints them, one line each
(:mod:`labkit_room.enforcement`); creates one system user per learner, with an id that owns
nothing on the box, a control group (:mod:`labkit_room.groups`) and a fresh student edition
in their home; writes the room's secrets into a root-only state folder (mode 0700: passwords as
hashes, the hub's database, cookie secret and log; each learner's server log beside them); starts
JupyterHub with the room's configuration (:mod:`labkit_room.jupyterhub_config`) and prints
each learner's login and the instructor's to this terminal only (and into ``credentials.txt`` in
the state folder, mode 0600). It then waits: Ctrl-C, SIGTERM or ``hub stop`` from another terminal
tears the room down -- the hub stops every learner's server and its proxy, each learner's group is
frozen and killed whole, every process left of their uid is killed in one sweep, what they own in
the shared folders is removed, and so are the users, their homes and their groups. A user is
removed only if it carries this room's mark (:mod:`labkit_room.accounts`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from labkit import paths
from labkit.errors import LabkitInputError
from labkit_room import accounts, enforcement, groups, learner_paths, room, runtime, sandbox, view

KIT_ROOT = paths.REPO
DEFAULT_STATE = KIT_ROOT / "build" / "hub"
RUNTIME_DIR = KIT_ROOT / "build" / "hub-runtime"
CONFIG_FILE = Path(__file__).with_name("jupyterhub_config.py")


class HubError(RuntimeError):
    """The room cannot be started or stopped as asked (one line for the instructor)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _private_write(path: Path, text: str) -> None:
    """Write `path` readable by its owner alone, all at once: the text goes to a private file beside it,
    which then replaces it. The room rewrites its state while it is open (the processes below the
    hub), and `hub stop` or a test may read it at any moment: an in-place rewrite would show them an
    empty or half-written file, and a crash mid-write would lose the record of the users to remove."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _duration(seconds: int) -> str:
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def _say(message: str) -> None:
    print(message, flush=True)


@dataclass
class Room:
    """A room as its state file records it (state.json in the state folder)."""

    state_dir: Path
    room_id: str
    learners: list[str]
    public_url: str
    pid: int = 0  # the `hub start` process that tears the room down
    hub_pid: int = 0
    created: list[str] = field(default_factory=list)
    # (pid, start time) of the proxy and services the hub started, as last seen: each runs in a
    # session of its own, and outlives a hub that is killed unless the room ends it.
    below_hub: list = field(default_factory=list)
    hierarchy: dict = field(default_factory=dict)  # groups.Hierarchy.to_json(): where the learners' groups are

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def save(self) -> None:
        data = {"room_id": self.room_id, "learners": self.learners, "public_url": self.public_url,
                "pid": self.pid, "hub_pid": self.hub_pid, "created": self.created,
                "below_hub": [list(p) for p in self.below_hub], "hierarchy": self.hierarchy}
        _private_write(self.state_file, json.dumps(data, indent=1))

    @classmethod
    def load(cls, state_dir: Path) -> Room | None:
        path = Path(state_dir) / "state.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return cls(state_dir=Path(state_dir), **data)


def _alive(pid: int) -> bool:
    """Whether `pid` runs. A zombie does not: it has exited and waits for its parent to read its status
    (a `hub start` whose parent is blocked on `hub stop` is one), so waiting for it to go would wait forever."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _proc_stat(pid)
    return fields is None or fields[0] not in ("Z", "X")  # no /proc (not Linux): the signal's answer stands


def _loopback(ip: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return ip == "localhost"


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise HubError(f"hub {what} needs root: it creates (and removes) a system user per learner, so that each "
                       "learner's server runs as that learner (run it with sudo)")


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise HubError(f"JupyterHub exited with status {proc.returncode} while starting; its log ({log}) ends:\n"
                           f"{tail}")
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/hub/api/", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise HubError(f"JupyterHub did not answer on {url} within {timeout_s:.0f} s (log: {log})")


def credentials_text(url: str, logins: dict[str, str]) -> str:
    lines = [f"Room hub: {url}/hub/login", "",
             f"instructor (admin, {url}/hub/admin):  user {room.ADMIN_USER}  password {logins[room.ADMIN_USER]}", ""]
    lines += [f"{name}  password {pw}" for name, pw in logins.items() if name != room.ADMIN_USER]
    return "\n".join(lines) + "\n"


def write_logins(learners: int, out: Path) -> str:
    """A room's logins without a room on this box (for Kubernetes): `out`/passwords.json, the hashes
    the room's authenticator reads (the Secret), and `out`/credentials.txt, what to hand out; both
    readable by their owner alone. Returns where they went."""
    from labkit_room import auth

    names = [room.ADMIN_USER, *room.learner_names(learners)]
    out = Path(out)
    if out.exists():
        raise HubError(f"{out} exists: give a new folder (its logins would mix with the old ones)")
    out.mkdir(mode=0o700, parents=True)
    logins = {name: auth.new_password() for name in names}
    _private_write(out / room.LOGINS_FILE, json.dumps({n: auth.hash_password(p) for n, p in logins.items()}))
    _private_write(out / "credentials.txt", credentials_text("https://<the room's address>", logins))
    return (f"wrote {out / room.LOGINS_FILE} (hashes: the Secret {room.LOGINS_SECRET}) and {out / 'credentials.txt'} "
            "(the logins to hand out); both readable by you alone")


def start(learners: int, *, port: int = 8000, ip: str = "127.0.0.1", memory: str | None = None,
          gpu_share: float | None = None, idle_timeout_s: int = room.DEFAULT_IDLE_TIMEOUT_S,
          proxy: str = "auto", state_dir: Path = DEFAULT_STATE, foreground: bool = True,
          quiet_credentials: bool = False, disk: str | None = None, tasks: int = room.DEFAULT_TASKS,
          public_url: str | None = None, subdomains: bool = False, tls_cert: str | None = None,
          tls_key: str | None = None, warm: bool = False, session_start: float | None = None) -> Room:
    """Start a room and (foreground) wait until it is stopped, then tear it down. Returns the Room.
    `warm`: once the hub is open, start every learner's server and a kernel on notebook 00
    (labkit_room.warm); `session_start` (Unix time): cull idle servers from then on."""
    _require_root("start")
    if warm and subdomains:
        raise HubError("--warm reaches each learner's server under the hub's own address; with --subdomains each "
                       "has its own name: warm such a room by logging in, or leave --warm out")
    try:
        import jupyterhub  # noqa: F401  (a clear message below if it is missing)
        import jupyterhub_idle_culler  # noqa: F401
    except ImportError as err:
        raise ImportError(str(err), name=err.name) from err
    from labkit_room import auth
    from labkit_room.proxy import proxy_command

    names = room.learner_names(learners)
    limits = room.limits_for(learners, memory=memory, gpu_share=gpu_share, idle_timeout_s=idle_timeout_s,
                             disk=disk, tasks=tasks)
    bind_url, public_url = room.addresses(ip, port, public_url, subdomains, tls_cert, tls_key)
    state_dir = Path(state_dir).resolve()
    old = Room.load(state_dir)
    if old is not None and (_alive(old.pid) or accounts.room_users(old.room_id)):
        raise HubError(f"a room is already running from {state_dir} (pid {old.pid}, users "
                       f"{', '.join(accounts.room_users(old.room_id)) or 'none'}): python -m labkit hub stop first")
    taken = [n for n in names if accounts.exists(n)]
    if taken:
        raise HubError(f"users {', '.join(taken)} already exist on this machine; the room would not own them "
                       "(remove them, or stop the room that made them: python -m labkit hub stop)")
    for path in (RUNTIME_DIR.parent,):
        path.mkdir(parents=True, exist_ok=True)
    blocked = runtime.first_unreachable(RUNTIME_DIR.parent)
    if blocked is not None:
        raise HubError(f"the learners cannot reach {RUNTIME_DIR} ({blocked} is closed to other users): put the kit "
                       "where any user can read it (e.g. /opt or /srv) and start the hub there")
    proxy_cmd, proxy_line = proxy_command(proxy)

    shutil.rmtree(state_dir, ignore_errors=True)
    state_dir.mkdir(parents=True, mode=0o700)
    os.chmod(state_dir, 0o700)
    (state_dir / "logs").mkdir(mode=0o700)
    this = Room(state_dir=state_dir, room_id=secrets.token_hex(6), learners=names, public_url=public_url,
                pid=os.getpid())
    this.save()
    stopping: list[int] = []

    def _on_signal(signum, _frame):
        if signum != signal.SIGINT:
            stopping.append(signum)
        raise KeyboardInterrupt

    # SIGINT too, not Python's default handler alone: a process started with SIGINT ignored (by a
    # parent that ignores it, as some launchers and test workers do) keeps it ignored, and Ctrl-C
    # would never close the room.
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    hub = None
    keep_open = False  # only start(foreground=False) returns with the room still open
    try:
        if runtime.has_lab() and not runtime.resource_usage_extension():
            _say("jupyter-resource-usage is not installed here: the learners' labs show no memory gauge "
                 "(pip install jupyter-resource-usage)")
        if not runtime.has_lab():
            _say("JupyterLab is not installed here: each learner gets the Jupyter server alone (its REST and kernel "
                 "API, what JupyterLab talks to; no web page). Fine for `hub bench`, not for a room.")
        _say(f"room {this.room_id}: {learners} learners, {limits.memory_bytes / 2**30:.1f} GiB each, "
             f"GPU memory share {limits.gpu_memory_fraction:.3f}, idle servers culled after "
             f"{_duration(limits.idle_timeout_s)}; proxy: {proxy_line}")
        if not bind_url.startswith("https://") and not public_url.startswith("https://") and not _loopback(ip):
            _say(f"WARNING: the room listens on {ip} without TLS: logins travel in the clear. Put a TLS front "
                 "before it (docs/INSTRUCTOR_GUIDE.md, 'A room on a public address') or give --tls-cert/--tls-key.")
        RUNTIME_DIR.mkdir(parents=True, exist_ok=True)
        python, python_env = runtime.learner_python(RUNTIME_DIR)
        runtime.compile_learner_packages(log=_say)
        kit = runtime.kit_copy(RUNTIME_DIR)
        template = RUNTIME_DIR / "learner-folder"
        shutil.rmtree(template, ignore_errors=True)
        runtime.build_learner_folder(template)

        hierarchy = groups.detect()
        try:
            hierarchy.prepare(this.room_id, learners)
        except groups.GroupError as err:
            hierarchy = groups.Hierarchy("none", why_not=str(err))
        this.hierarchy = hierarchy.to_json()
        this.save()
        mount_refusal = sandbox.can_mount()
        # What a learner's server runs from must be outside the folders it gets its own copy of.
        needed = [RUNTIME_DIR, Path(python), *map(Path, runtime.site_dirs()),
                  *map(Path, runtime.hub_pythonpath(KIT_ROOT))]
        hidden = next(((path, shared) for path in needed if (shared := sandbox.hidden_by_private_folders(path))), None)
        if hidden and not mount_refusal:
            raise HubError(f"the learners' servers need {hidden[0]}, under {hidden[1]}, which each of them replaces "
                           "with a folder of their own: put the checkout and its packages outside "
                           + ", ".join(sandbox.SHARED_FOLDERS) + " (e.g. under /opt or /srv)")
        network_refusal = enforcement.kernel_network_refusal(python, runtime.kernel_launcher(RUNTIME_DIR))
        if network_refusal:
            # The one-origin room's pages and every kernel's sockets depend on it: fail closed.
            raise HubError(f"learners' kernels cannot get a network of their own on this box ({network_refusal}): "
                           "without it a kernel could listen on its server's port and reach other learners' "
                           "sockets, so the room does not open (allow unprivileged user namespaces: "
                           "sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone)")
        survey = enforcement.survey(limits, hierarchy, mount_refusal, network_refusal, enforcement.gpu_state(),
                                    public_url, subdomains)
        _say("what this box enforces for each learner:\n" + "\n".join(line.text() for line in survey))
        _private_write(state_dir / "enforced.json", json.dumps([line.to_json() for line in survey], indent=1))

        logins = {room.ADMIN_USER: auth.new_password()}
        owned = accounts.owned_ids()
        group_limits = groups.GroupLimits(limits.memory_bytes, limits.tasks)
        for name in names:
            this.created.append(name)  # before useradd: a crash in between still tears it down
            this.save()
            uid = accounts.free_id(owned)
            owned.add(uid)
            account = accounts.create_learner(name, this.room_id, uid,
                                              disk_bytes=None if mount_refusal else limits.disk_bytes)
            if hierarchy.version in ("v1", "v2"):
                hierarchy.create(this.room_id, name, group_limits)
            folder = account.home / room.LEARNER_FOLDER
            shutil.copytree(template, folder)
            for path in [folder, *folder.rglob("*")]:
                os.chown(path, account.uid, account.gid)
            logins[name] = auth.new_password()
        _private_write(state_dir / "passwords.json",
                       json.dumps({n: auth.hash_password(p) for n, p in logins.items()}))
        spec = {
            "state_dir": str(state_dir), "room_id": this.room_id, "learners": names, "bind_url": bind_url,
            "public_url": public_url, "subdomains": subdomains, "tls": {"cert": tls_cert, "key": tls_key},
            "hub_port": _free_port(), "proxy_api_port": _free_port(), "proxy_command": proxy_cmd,
            "learner_python": python, "hub_python": sys.executable, "limits": limits.to_json(),
            "lab": runtime.has_lab(), "hierarchy": hierarchy.to_json(), "private_folders": not mount_refusal,
            "log_dir": str(state_dir / "logs"),
            # The instructor's view (labkit_room.view): its port, and the socket the learners' kernels
            # report to.
            "view_port": _free_port(), "view_socket": str(view.socket_path(this.room_id)),
            "warmer_token": secrets.token_hex(32) if warm else None, "session_start": session_start or 0,
            "learner_env": {
                "PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin",
                "PYTHONPATH": os.pathsep.join([str(kit), *runtime.hub_pythonpath(KIT_ROOT)]),
                **python_env, **runtime.jupyter_env(runtime.room_kernel_spec(RUNTIME_DIR, python)),
                "JUPYTER_CONFIG_DIR": str(runtime.learner_config_dir(RUNTIME_DIR)),
                # and limits.env(), added by the config
            },
        }
        _private_write(state_dir / "room.json", json.dumps(spec, indent=1))
        log = state_dir / "hub.log"
        log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        # The kit and the room from this checkout first: an editable install's finder points at the folder
        # it was installed from, which may be one the learners' servers do not see (a checkout under /tmp,
        # served from a bind mount elsewhere), and the hub hands them paths of its own modules (the reaper).
        env = {**os.environ, "LABKIT_HUB_ROOM": str(state_dir / "room.json"),
               "PYTHONPATH": os.pathsep.join([str(KIT_ROOT), str(KIT_ROOT / "room"),
                                              os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(CONFIG_FILE)], cwd=state_dir,
                               env=env, stdout=log_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True, preexec_fn=_hub_priority)
        os.close(log_fd)
        this.hub_pid = hub.pid
        this.save()
        _wait_ready(bind_url, hub, log)
        text = credentials_text(public_url, logins)
        _private_write(state_dir / "credentials.txt", text)
        if not quiet_credentials:
            _say("\n" + text)
        _say(f"logins also in {state_dir / 'credentials.txt'} (root only); hub log: {log} (root only)")
        if session_start:
            _say(f"idle servers are culled from {time.strftime('%H:%M', time.localtime(session_start))}, the "
                 "session's start, on")
        if warm:
            from labkit_room import warm as warming

            warming.warm_room(bind_url, spec["warmer_token"], names, log=_say)
        if not foreground:
            keep_open = True
            return this
        _say("the room is open: Ctrl-C here (or python -m labkit hub stop) closes it and removes the learners")
        while hub.poll() is None:
            _watch_once(this, hub.pid)
            time.sleep(2)
        _say(f"JupyterHub exited with status {hub.returncode}; closing the room")
    except KeyboardInterrupt:
        _hold_signals(previous)
        _say("\nclosing the room" + (f" (signal {stopping[0]})" if stopping else ""))
    finally:
        if not keep_open:
            _hold_signals(previous)
            teardown(this, hub)
        for s, handler in previous.items():
            signal.signal(s, handler)
    return this


def _hub_priority() -> None:
    """In the hub's process before it starts: room.HUB_NICE, where this box lets root set it."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, room.HUB_NICE)
    except OSError:
        pass  # the hub runs at the default priority, as the learners do


def _watch_once(this: Room, hub_pid: int) -> None:
    """Record the processes the hub started itself (the proxy, the services), for a close after the
    hub is killed. Nothing a learner does may end the room here: their processes come and go below
    the hub by the thousand (a fork-and-exit loop), so each is read once, and a read that fails for any
    reason is said and skipped: only the instructor's command or the session's end closes a room."""
    try:
        seen = [[pid, start] for pid, start in _children_of(hub_pid)]
        if seen != this.below_hub:
            this.below_hub = seen
            this.save()
    except Exception as err:  # noqa: BLE001 (kept open: said once per round, the next round tries again)
        _say(f"the room stays open; its watch skipped a round ({type(err).__name__}: {err})")


def _children_of(pid: int) -> list[tuple[int, int]]:
    """(pid, start time) of the processes whose parent is `pid`, each read from /proc once."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None and st[0] == pid:
            found.append((int(entry.name), st[1]))
    return found


def _hold_signals(previous: dict) -> None:
    """Until the room is closed, Ctrl-C (and SIGTERM, SIGHUP) say so instead of cutting the teardown
    short: an impatient second Ctrl-C would leave users and servers behind. `previous` keeps the
    handlers to put back."""
    def still_closing(_signum, _frame):
        os.write(sys.stdout.fileno(), b"still closing the room: the learners' servers and users go first\n")

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous.setdefault(s, signal.getsignal(s))
        signal.signal(s, still_closing)


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, from the state on (None if unreadable)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a process, from /proc (None if it is gone)."""
    fields = _proc_stat(pid)
    return None if fields is None else (int(fields[1]), int(fields[19]))


def _descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, start time) of every process below `pid`: the proxy and services the hub started, each
    in a session of its own, which a signal to the hub's process group would not reach."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))):
            parents.setdefault(st[0], []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if st := _stat(child):
                found.append((child, st[1]))
                todo.append(child)
    return found


def _end_left(processes: list[tuple[int, int]], grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, those of `processes` still running (same pid and start time)."""
    accounts.signal_until_gone(lambda: [pid for pid, start in processes if (st := _stat(pid)) and st[1] == start],
                               grace_s)


def teardown(this: Room, hub: subprocess.Popen | None = None) -> list[str]:
    """Stop the hub (it stops the servers and the proxy), freeze and kill each learner's group, kill
    what is left of their uids, remove what they own in the shared folders, the users, their homes,
    their groups and the room's secrets. Returns the users removed. Safe to run twice."""
    hub_pid = hub.pid if hub is not None else this.hub_pid
    below = [tuple(p) for p in this.below_hub] + (_descendants(hub_pid) if _alive(hub_pid) else [])
    if _alive(hub_pid):
        os.kill(hub_pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (hub.poll() is None if hub is not None else _alive(hub_pid)):
            time.sleep(0.2)
        if hub is not None and hub.poll() is None or hub is None and _alive(hub_pid):
            try:
                os.killpg(hub_pid, signal.SIGKILL)  # the hub and the proxy and services it started
            except ProcessLookupError:
                pass
            if hub is not None:
                hub.wait()
    _end_left(below)  # a proxy or service the hub did not stop (it was killed, or failed to)
    _end_leftover_proxy(this.state_dir)
    hierarchy = groups.Hierarchy.from_json(this.hierarchy) if this.hierarchy else groups.Hierarchy("none")
    removed, refused = [], []
    for name in dict.fromkeys(this.created + accounts.room_users(this.room_id)):
        try:
            if hierarchy.enforces:
                hierarchy.kill(this.room_id, name)  # frozen first: a process that re-forks is caught whole
            _save_work(this, name)
            if accounts.remove_learner(name, this.room_id):
                removed.append(name)
            hierarchy.remove(this.room_id, name)
        except (accounts.AccountError, groups.GroupError) as err:
            refused.append(str(err))
    try:
        hierarchy.remove(this.room_id)
    except groups.GroupError as err:
        refused.append(str(err))
    for secret in ("passwords.json", "credentials.txt", "jupyterhub_cookie_secret", "jupyterhub.sqlite",
                   "room.json"):
        (this.state_dir / secret).unlink(missing_ok=True)
    this.created = [n for n in this.created if accounts.exists(n)]
    this.pid = this.hub_pid = 0
    this.below_hub = []
    this.save()
    shutil.rmtree(view.socket_path(this.room_id).parent, ignore_errors=True)
    shutil.rmtree(RUNTIME_DIR / "kit", ignore_errors=True)
    shutil.rmtree(RUNTIME_DIR / "learner-folder", ignore_errors=True)
    _say(f"room {this.room_id} closed: removed {len(removed)} learner(s), their homes and groups; no process of "
         "theirs left running")
    for line in refused:
        _say("  " + line)
    return removed


def work_folder(state_dir: Path) -> Path:
    """Where a closed room keeps its learners' work, root's alone: beside the state folder (which the
    next `hub start` empties), one folder per room and learner."""
    state_dir = Path(state_dir)
    return state_dir.with_name(state_dir.name + "-work")


def _save_work(this: Room, name: str) -> None:
    """Copy the learner's folder (their notebooks and what they wrote beside them) out of their home,
    before anything of theirs is removed: with their processes ended, by descriptor, leaving out links
    and hard-linked files (:func:`labkit_room.learner_paths.copy_out`). Said in one line either way."""
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return
    home = Path(entry.pw_dir)
    if entry.pw_gecos != accounts.room_mark(this.room_id) or home != accounts.HOME_ROOT / name or not home.is_dir():
        return
    try:
        accounts.kill_all_of(entry.pw_uid)  # nothing writes while it is copied
        root = work_folder(this.state_dir)
        root.mkdir(mode=0o700, exist_ok=True)
        os.chmod(root, 0o700)
        target = root / this.room_id / name
        copied = learner_paths.copy_out(home, room.LEARNER_FOLDER, entry.pw_uid, target)
    except (OSError, accounts.AccountError) as err:
        _say(f"  {name}'s work was NOT saved: {err}")
        return
    left = f"; left out (links, hard-linked or foreign files): {', '.join(copied.left_out[:5])}" \
        + (" ..." if len(copied.left_out) > 5 else "") if copied.left_out else ""
    _say(f"  saved {name}'s work ({copied.files} files) in {target}{left}")


def _end_leftover_proxy(state_dir: Path) -> None:
    """The proxy JupyterHub started, if the hub died before stopping it (its pid file)."""
    pid_file = state_dir / "jupyterhub-proxy.pid"
    if pid_file.exists():
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGTERM)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
        pid_file.unlink(missing_ok=True)


def stop(state_dir: Path = DEFAULT_STATE, wait_s: float = 120) -> str:
    """Close the room recorded in `state_dir`: ask its `hub start` to tear down, or do it here."""
    _require_root("stop")
    state_dir = Path(state_dir).resolve()
    this = Room.load(state_dir)
    if this is None:
        raise LabkitInputError(f"no room recorded in {state_dir} (state.json): nothing to stop")
    if _alive(this.pid) and this.pid != os.getpid():
        os.kill(this.pid, signal.SIGTERM)
        deadline = time.monotonic() + wait_s
        while _alive(this.pid) and time.monotonic() < deadline:
            time.sleep(0.3)
        if not _alive(this.pid):
            left = accounts.room_users(this.room_id)
            if not left:
                return f"room {this.room_id} closed by its hub start process (pid {this.pid})"
    removed = teardown(Room.load(Path(state_dir)) or this)
    return f"room {this.room_id} closed here: removed {', '.join(removed) or 'no users'}"
