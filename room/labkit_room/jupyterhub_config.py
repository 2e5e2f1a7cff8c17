# JupyterHub's configuration for a room on one server, loaded by `jupyterhub -f` (labkit_room.control
# starts it so). Everything room-specific comes from the room file the control writes (LABKIT_HUB_ROOM,
# root-only); the names, start notebook and limits come from labkit_room.room, the one place the
# Kubernetes values are rendered from too.
import json
import os
from pathlib import Path

from labkit.workshop.room_report import REPORT_ENV
from labkit_room import accounts, control, culler, reaper, runtime, view
from labkit_room import room as _room

c = get_config()  # noqa: F821 (JupyterHub provides it)
_spec = json.loads(Path(os.environ["LABKIT_HUB_ROOM"]).read_text())
_state = Path(_spec["state_dir"])
_limits = _room.Limits(**_spec["limits"])

# Where it listens: the public proxy on the instructor's address, the hub and the proxy's API on
# loopback only. With a certificate the proxy serves HTTPS itself; without, a TLS front forwards to it
# (or the room stays on loopback, reached through an SSH tunnel).
c.JupyterHub.bind_url = _spec["bind_url"]
if _spec["tls"]["cert"]:
    c.JupyterHub.ssl_cert = _spec["tls"]["cert"]
    c.JupyterHub.ssl_key = _spec["tls"]["key"]
# Each learner's pages on an origin of their own, where the instructor has a wildcard name: JupyterHub's
# one reliable isolation of users' servers from each other and from the hub (its "Security overview").
# Over HTTPS the hub's cookies are then locked to its own host (__Host- cookies), out of reach of a
# learner's subdomain.
if _spec["subdomains"]:
    c.JupyterHub.subdomain_host = _spec["public_url"]
    c.JupyterHub.cookie_host_prefix_enabled = _spec["public_url"].startswith("https://")
# On one origin: the hub's pages may not be framed (JupyterHub's default) nor reached from a window a
# learner's page opens (COOP), and its XSRF cookie is not for scripts at all (its pages read the token
# from the page itself): no page on the origin can read it.
c.JupyterHub.tornado_settings = {
    "headers": {"Cross-Origin-Opener-Policy": "same-origin"},
    "xsrf_cookie_kwargs": {"httponly": True},
}
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{_spec['hub_port']}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{_spec['proxy_api_port']}"
c.ConfigurableHTTPProxy.command = _spec["proxy_command"]
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True

# Its files: all in the root-only state folder.
c.JupyterHub.db_url = f"sqlite:///{_state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(_state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(_state / "jupyterhub.pid")

# Who logs in: the learners and the instructor, each with their own generated password.
c.JupyterHub.authenticator_class = "labkit_room.auth.RoomAuthenticator"
c.RoomAuthenticator.table_file = str(_state / "passwords.json")
# The instructor is no admin of JupyterHub's: their role (labkit_room.room.INSTRUCTOR_ROLE) shows the
# admin page and starts and stops servers, and never opens one, nor makes anyone admin.
c.Authenticator.allowed_users = {*_spec["learners"], _room.ADMIN_USER}
c.Authenticator.admin_users = set()
c.JupyterHub.allow_named_servers = False

# What each learner gets: their JupyterLab, as their own system user, in their sandbox (control
# group, own temporary folders, rlimits), on notebook 00 of their folder. The server's Python reads
# nothing of the learner's: no module from the current folder or user site-packages (-P -s), no
# configuration, extension or kernel spec from the home (disable_user_config).
c.JupyterHub.spawner_class = "labkit_room.spawner.RoomSpawner"
# The server runs under the kit's reaper (room/labkit_room/reaper.py), which reads the exit status
# of every orphan the learner leaves: the box's first process may not, and unread ones fill the
# learner's process limit.
# The reaper stays root: -I -S, it reads nothing of the environment's and no site-packages (it needs
# the standard library alone).
c.Spawner.cmd = [_spec["learner_python"], "-I", "-S", str(Path(reaper.__file__)), "--",
                 _spec["learner_python"], *runtime.SAFE_PYTHON_FLAGS, "-m", "jupyterhub.singleuser"]
c.Spawner.disable_user_config = True
c.RoomSpawner.room_id = _spec["room_id"]
c.RoomSpawner.hierarchy = _spec["hierarchy"]
c.RoomSpawner.process_memory = _limits.process_memory_bytes
c.RoomSpawner.tasks = _limits.tasks
c.RoomSpawner.disk = _limits.disk_bytes
c.RoomSpawner.private_folders = _spec["private_folders"]
c.RoomSpawner.log_dir = _spec["log_dir"]
c.Spawner.default_url = _room.start_url(_spec.get("lab", True))
c.Spawner.notebook_dir = f"~/{_room.LEARNER_FOLDER}"
c.Spawner.mem_limit = _limits.memory_bytes
c.Spawner.env_keep = ["LANG", "LC_ALL"]
# REPORT_ENV: where a learner's checkers report their verdicts (the room's view, below).
c.Spawner.environment = {**_spec["learner_env"], **_limits.env(), REPORT_ENV: _spec["view_socket"]}
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
# Kernels talk to their server over unix sockets in the learner's own runtime folder (mode 0700),
# not over loopback TCP ports that any user of the box could connect to. labkit.tools.lab_server: a socket
# a browser drops during its handshake leaves no traceback in the learner's log. learner_server: every
# response but JupyterLab's page sandboxed, the server out of its kernels' reach. No terminal: a shell
# would run on the server's own network, where a learner could take the server's port; no extension
# manager: the server's packages are the room's.
# The memory gauge (jupyter-resource-usage), enabled by name: where it is installed as a wheel into a
# folder on PYTHONPATH, its own file that enables it is not on Jupyter's configuration path.
c.Spawner.args = ["--KernelManager.transport=ipc",
                  *_room.learner_server_args(*filter(None, [runtime.resource_usage_extension()]),
                                             lab=_spec.get("lab", True))]
if _spec.get("lab", True):
    c.Spawner.args += ["--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]

# Idle servers are culled after the instructor's timeout (jupyterhub-idle-culler, a hub service),
# checked every quarter of it, but at least every 5 minutes and at most every 2 s (a test's 10 s).
# With a session start (a room warmed before it), culling starts then, and idleness counts from then
# (room/labkit_room/culler.py: it waits, marks the running servers active, and becomes the culler).
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [_spec["hub_python"], str(Path(culler.__file__)), "--not-before", str(_spec.get("session_start", 0)),
                "--", f"--timeout={_limits.idle_timeout_s}",
                f"--cull-every={max(2, min(300, _limits.idle_timeout_s // 4))}"],
}]
c.JupyterHub.load_roles = [_room.INSTRUCTOR_ROLE, {
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers", "users:activity"],
    "services": ["idle-culler"],
}]
# The room's own warm-up (hub start --warm, room/labkit_room/warm.py): a token only the room's root-only
# state holds, whose role starts the learners' servers and reaches them, and no one else's.
if _spec.get("warmer_token"):
    c.JupyterHub.services.append({"name": "warmer", "api_token": _spec["warmer_token"]})
    c.JupyterHub.load_roles.append({
        "name": "warmer",
        "scopes": [f"{scope}!user={name}" for name in _spec["learners"]
                   for scope in ("read:users", "read:servers", "servers", "access:servers")],
        "services": ["warmer"],
    })

# The instructor's view (labkit_room.view): verdicts in from the learners' kernels, each learner's
# server token carrying the one scope that lets it report its own; the page, the board and the
# collections out to the instructor's role alone.
c.JupyterHub.custom_scopes = view.CUSTOM_SCOPES
c.Spawner.server_token_scopes = view.SERVER_TOKEN_SCOPES
c.JupyterHub.services.append(view.service(
    _spec["hub_python"], _spec["view_port"],
    view.config(_spec["learners"], _state, _spec["view_socket"], control.work_folder(_state), accounts.HOME_ROOT,
                _room.LEARNER_FOLDER)))
c.JupyterHub.load_roles += view.roles(_spec["learners"], _room.ADMIN_USER)
