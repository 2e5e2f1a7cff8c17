# JupyterHub's configuration for a room on one server, loaded by `jupyterhub -f` (labkit.classroom.control
# starts it so). Everything room-specific comes from the room file the control writes (LABKIT_HUB_ROOM,
# root-only); the names, start notebook and limits come from labkit.classroom.room, the one place the
# Kubernetes values are rendered from too.
import json
import os
from pathlib import Path

from labkit.classroom import lab_server
from labkit.classroom import room as _room

c = get_config()  # noqa: F821 (JupyterHub provides it)
_spec = json.loads(Path(os.environ["LABKIT_HUB_ROOM"]).read_text())
_state = Path(_spec["state_dir"])
_limits = _room.Limits(**_spec["limits"])

# Where it listens: the public proxy on the instructor's address, the hub and the proxy's API on
# loopback only.
c.JupyterHub.bind_url = _spec["public_url"]
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
c.JupyterHub.authenticator_class = "labkit.classroom.auth.RoomAuthenticator"
c.RoomAuthenticator.table_file = str(_state / "passwords.json")
c.Authenticator.allowed_users = set(_spec["learners"])
c.Authenticator.admin_users = {_room.ADMIN_USER}
c.JupyterHub.allow_named_servers = False

# What each learner gets: their JupyterLab, as their own system user, on notebook 00 of their folder.
c.JupyterHub.spawner_class = "labkit.classroom.spawner.RoomSpawner"
c.Spawner.cmd = [_spec["learner_python"], "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = _room.start_url(_spec.get("lab", True))
c.Spawner.notebook_dir = f"~/{_room.LEARNER_FOLDER}"
c.Spawner.mem_limit = _limits.memory_bytes
c.Spawner.env_keep = ["LANG", "LC_ALL"]
c.Spawner.environment = {**_spec["learner_env"], **_limits.env()}
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
# Kernels talk to their server over unix sockets in the learner's own runtime folder (mode 0700),
# not over loopback TCP ports that any user of the box could connect to. labkit.classroom.lab_server: a socket
# a browser drops during its handshake leaves no traceback in the learner's log.
c.Spawner.args = ["--KernelManager.transport=ipc", lab_server.CLI_FLAG]
if _spec.get("lab", True):
    c.Spawner.args += ["--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]

# Idle servers are culled after the instructor's timeout (jupyterhub-idle-culler, a hub service),
# checked every quarter of it, but at least every 5 minutes and at most every 2 s (a test's 10 s).
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [_spec["hub_python"], "-m", "jupyterhub_idle_culler", f"--timeout={_limits.idle_timeout_s}",
                f"--cull-every={max(2, min(300, _limits.idle_timeout_s // 4))}"],
}]
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
