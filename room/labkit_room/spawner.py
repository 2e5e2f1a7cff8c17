"""The room's spawner: JupyterHub's LocalProcessSpawner, each learner's JupyterLab started as that
learner's system user, inside the learner's sandbox (:mod:`labkit_room.sandbox`): their
control group, their own temporary folders, their rlimits.

Memory is held twice, on purpose. The learner's control group caps all their processes and the
shared memory they write together (``MEM_LIMIT``), and the kernel answers an overrun with the OOM
killer: a process ends. Under that cap each process holds an rlimit on its data segment
(RLIMIT_DATA: private writable memory, which is what Python objects, torch tensors and numpy
arrays take), set before the server starts and inherited by every kernel it starts: one
allocation past it fails in the learner's own cell with a MemoryError, which
:mod:`labkit_room.limits` explains under the traceback, and the kernel lives on.
RLIMIT_DATA rather than RLIMIT_AS: the address space of a process that imports torch (and, on a
GPU, of the CUDA driver's reservations) is many times its memory.

The server's output goes to a log of the learner's own in the room's root-only state folder
(never the hub's log, which a server writing to an inherited descriptor could forge lines in).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess

from jupyterhub.spawner import LocalProcessSpawner
from tornado import web
from traitlets import Bool, Dict, Int, Unicode

from labkit_room import accounts, groups, learner_paths, sandbox
from labkit_room.room import is_learner_name


def cache_env(home: str) -> dict[str, str]:
    """A learner's temporary and cache folders, all in their home: nothing of theirs in a folder
    another learner writes to, whether or not the box gave their server private /tmp."""
    tmp = str(sandbox.private_folder(home, "/tmp"))
    return {"TMPDIR": tmp, "XDG_CACHE_HOME": f"{home}/.cache",
            "TORCHINDUCTOR_CACHE_DIR": f"{home}/.cache/torchinductor", "TRITON_CACHE_DIR": f"{home}/.cache/triton",
            "MPLCONFIGDIR": f"{home}/.config/matplotlib"}


def lab_settings_env(home: str) -> dict[str, str]:
    """JupyterLab's user settings and workspaces in the learner's home, where they belong: the room
    points JUPYTER_CONFIG_DIR (whose lab/ folder JupyterLab would use for both) at a folder of its own,
    so that no configuration of the learner's (~/.jupyter/labconfig/page_config.json, which picks
    the lab's extensions and options, a server config) is read by their server."""
    return {"JUPYTERLAB_SETTINGS_DIR": f"{home}/.jupyter/lab/user-settings",
            "JUPYTERLAB_WORKSPACES_DIR": f"{home}/.jupyter/lab/workspaces"}


class RoomSpawner(LocalProcessSpawner):
    """A learner's server as that learner, in their sandbox; its output in their own log."""

    room_id = Unicode(help="the room's id: the learners' control groups are named after it").tag(config=True)
    hierarchy = Dict(help="labkit_room.groups.Hierarchy.to_json() of this box").tag(config=True)
    process_memory = Int(0, help="RLIMIT_DATA of each of a learner's processes, bytes").tag(config=True)
    tasks = Int(0, help="a learner's processes and threads together").tag(config=True)
    disk = Int(0, help="a learner's files, bytes (RLIMIT_FSIZE: no file larger)").tag(config=True)
    private_folders = Bool(False, help="give each server its own /tmp, /var/tmp, /dev/shm, /run/lock").tag(config=True)
    log_dir = Unicode(help="root-only folder of the learners' server logs").tag(config=True)

    def _home(self) -> str:
        return pwd.getpwnam(self.user.name).pw_dir

    def _plan(self) -> sandbox.Plan:
        return sandbox.Plan(room_id=self.room_id, learner=self.user.name, home=self._home(),
                            hierarchy=self.hierarchy, process_bytes=self.process_memory, tasks=self.tasks,
                            file_bytes=self.disk, private_folders=self.private_folders,
                            uid=pwd.getpwnam(self.user.name).pw_uid)

    def _hierarchy(self) -> groups.Hierarchy:
        return groups.Hierarchy.from_json(self.hierarchy)

    def make_preexec_fn(self, name):
        """As root, in the forked child: the sandbox, then the learner's home as the working folder.
        The child stays root: it runs the reaper (or systemd-run, which runs it), which starts the
        server as the learner and so stays out of the learner's reach."""
        plan = self._plan()
        home = self._home()

        def preexec():
            sandbox.enter(plan)
            os.chdir(home)

        return preexec

    def _server_command(self, base_cmd: list[str]) -> list[str]:
        """The hub's command with the learner's ids for the reaper (the words before its "--")."""
        entry = pwd.getpwnam(self.user.name)
        if entry.pw_uid == 0 or entry.pw_gid == 0:
            raise web.HTTPError(400, f"{self.user.name} is root here: no server")
        cut = base_cmd.index("--")
        return [*base_cmd[:cut], "--user", f"{entry.pw_uid}:{entry.pw_gid}", *base_cmd[cut:]]

    def get_env(self):
        env = super().get_env()
        env.update(cache_env(self._home()))
        env.update(lab_settings_env(self._home()))
        return env

    async def start(self):
        if not is_learner_name(self.user.name):
            # The instructor administers the room from /hub/admin; only learners have servers.
            raise web.HTTPError(400, f"{self.user.name} has no server in this room: only learners do")
        if self.private_folders:
            # Checked here, in the hub, for the learner's one line; the server's own start checks them
            # again by descriptor (a swap in between is refused there too, in fewer words).
            try:
                for fd in sandbox.open_private_folders(self._home(), pwd.getpwnam(self.user.name).pw_uid).values():
                    os.close(fd)
            except learner_paths.LearnerPathError as err:
                self.log.warning("refused %s's server: %s", self.user.name, err)
                raise web.HTTPError(400, f"your server was not started: {err}") from None
        log = os.open(os.path.join(self.log_dir, f"{self.user.name}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                      0o600)
        base_cmd = list(self.cmd)
        hierarchy = self._hierarchy()
        self.cmd = self._server_command(base_cmd)
        if hierarchy.version == "systemd":
            self.cmd = groups.systemd_prefix(hierarchy, self.room_id, self.user.name,
                                             groups.GroupLimits(int(self.mem_limit), self.tasks)) + self.cmd
        self.popen_kwargs = {"stdout": log, "stderr": subprocess.STDOUT, "stdin": subprocess.DEVNULL}
        try:
            return await super().start()
        finally:
            os.close(log)
            self.cmd = base_cmd

    async def stop(self, now=False):
        """Stop the server, then end whatever of the learner's still runs (a process they left
        behind, detached from the server): a stopped server leaves nothing of its learner running."""
        await super().stop(now=now)
        await asyncio.get_running_loop().run_in_executor(None, self._end_the_rest)

    def _end_the_rest(self) -> None:
        hierarchy = self._hierarchy()
        if hierarchy.enforces:
            hierarchy.kill(self.room_id, self.user.name)
        accounts.kill_all_of(pwd.getpwnam(self.user.name).pw_uid)
