"""The room's spawner: JupyterHub's LocalProcessSpawner, each learner's JupyterLab started as
that learner's system user, held to the room's memory limit.

The memory limit is an rlimit on the data segment (RLIMIT_DATA: private writable memory, which
is what Python objects, torch tensors and numpy arrays take), set on the server before it starts
and inherited by every kernel it starts. Why an rlimit and not a cgroup: a cgroup's memory.max
caps a learner's processes together, but the kernel answers an overrun with the OOM killer, and
the learner sees a dead kernel; this machine's cgroups are v1 and belong to the container that
runs it. With the rlimit an allocation past the limit fails in the learner's own kernel with a
MemoryError, which :mod:`labkit.classroom.limits` explains under the traceback, and the kernel lives
on. RLIMIT_DATA rather than RLIMIT_AS: the address space of a process that imports torch (and,
on a GPU, of the CUDA driver's reservations) is many times its memory, so an address-space limit
would refuse work that fits. The limit is per process: a learner who opens several kernels has
the limit in each, which is what JupyterHub's MEM_LIMIT means on one box too.
"""

from __future__ import annotations

import resource

from jupyterhub.spawner import LocalProcessSpawner
from tornado import web

from labkit.classroom.room import is_learner_name


class RoomSpawner(LocalProcessSpawner):
    """A learner's server as that learner, with RLIMIT_DATA = ``mem_limit``."""

    def make_preexec_fn(self, name):
        become_user = super().make_preexec_fn(name)
        limit = int(self.mem_limit or 0)

        def preexec():
            if limit:
                resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
            become_user()

        return preexec

    async def start(self):
        if not is_learner_name(self.user.name):
            # The instructor administers the room from /hub/admin; only learners have servers.
            raise web.HTTPError(400, f"{self.user.name} has no server in this room: only learners do")
        return await super().start()
