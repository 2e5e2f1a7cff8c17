"""A learner's kernel in a room: its own network, its sockets closed to others, the room's limits;
then IPython's kernel as usual.

The room's kernel spec (:func:`labkit_room.runtime.room_kernel_spec`, found first on the
learners' ``JUPYTER_PATH`` under the name ``python3``) starts every learner's kernel as
``python -m labkit_room.kernel -f CONNECTION_FILE``. Before the first cell runs:

* **its own network** (:func:`own_network`): the kernel moves into a user and network namespace
  of its own, the same user inside, with a loopback nobody else reaches and no other interface.
  Nothing another learner runs can connect to a socket the kernel opens, and nothing the kernel
  runs can listen on the box: not on the port of the learner's own Jupyter server either, so a
  learner who ends that server cannot put a page of their own in its place on the hub's address.
  Where the box refuses unprivileged user namespaces the kernel runs on the box's network, and the
  room said so at its start.
* **its subprocess pipe over a private socket** (:func:`pipe_in_private_folder`): ipykernel
  listens for the output of forked children on a TCP port of 127.0.0.1, without authenticating
  what arrives before reading it whole; here it listens on a unix socket in the learner's runtime
  folder (mode 0700) instead, whatever the network.
* **before its server in the OOM killer's order**: the kernel raises its oom_score_adj
  (:data:`labkit_room.sandbox.KERNEL_OOM_SCORE_ADJ`), and what it starts inherits it, so when the
  learner's group is full a kernel or its children end, not the server that holds their session.
* **the room's limits** (:mod:`labkit_room.limits`): the GPU share, both limits in
  ``labkit.describe()``, a memory error explained under its traceback.

That ``python -m`` line is the kernel spec's, never typed by anyone: the kit's commands are
``python -m labkit ...``.
"""

from __future__ import annotations

import os
import sys

_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
_SIOCSIFFLAGS, _IFF_UP, _IFF_LOOPBACK, _IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40
# Set by the room in every learner's environment: "1" asks each kernel for a network of its own.
OWN_NETWORK_ENV = "LABKIT_KERNEL_OWN_NETWORK"


def _in_own_user_namespace() -> bool:
    """Whether this process already runs in a user namespace its parent does not (it made one)."""
    try:
        mine = open("/proc/self/uid_map").read()
        parent = open(f"/proc/{os.getppid()}/uid_map").read()
    except OSError:
        return False
    return mine != parent


def own_network(argv: list[str]) -> str:
    """Move this process into a user and network namespace of its own, bring its loopback up, and
    start the kernel afresh in it (execve, so it holds none of the namespace's capabilities).
    Returns why not where it cannot ('' once inside). Must run before any thread starts."""
    if _in_own_user_namespace():
        return ""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return f"no user namespace for the kernel here ({os.strerror(ctypes.get_errno())})"
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{gid} {gid} 1")
    _loopback_up()
    os.execv(sys.executable, [sys.executable, "-m", "labkit_room.kernel", *argv])
    return "execv returned"  # not reached


def _loopback_up() -> None:
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH", b"lo", _IFF_UP | _IFF_LOOPBACK | _IFF_RUNNING).ljust(40, b"\0")
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, request)


def network_state() -> str:
    """One line for ``labkit.describe()``: whose network this kernel is on."""
    if _in_own_user_namespace():
        return "own (a loopback of this kernel's alone)"
    return "the box's (shared loopback)"


def pipe_in_private_folder() -> None:
    """Make ipykernel's subprocess-output pipe a unix socket in this user's runtime folder (mode
    0700: no other user can connect to it) instead of a TCP port on 127.0.0.1 (any user can)."""
    import tempfile
    import uuid

    import zmq
    from ipykernel import iostream
    from jupyter_core.paths import jupyter_runtime_dir

    folder = jupyter_runtime_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if os.stat(folder).st_mode & 0o077:
        folder = tempfile.mkdtemp(prefix="kernel-pipe-")  # mode 0700

    def setup_pipe_in(self):
        self._pipe_uuid = os.urandom(16)
        pipe_in = self.socket.context.socket(zmq.PULL)
        pipe_in.linger = 0
        self._pipe_address = f"ipc://{os.path.join(folder, 'pipe-' + uuid.uuid4().hex)}"
        pipe_in.bind(self._pipe_address)
        self._pipe_in = iostream.ZMQStream(pipe_in, self.io_loop)
        self._pipe_in.on_recv(self._handle_pipe_msg)

    def setup_pipe_out(self):
        ctx = zmq.Context()  # a new context after fork, as ipykernel's own
        pipe_out = ctx.socket(zmq.PUSH)
        pipe_out.linger = 3000
        pipe_out.connect(self._pipe_address)
        return ctx, pipe_out

    iostream.IOPubThread._setup_pipe_in = setup_pipe_in
    iostream.IOPubThread._setup_pipe_out = setup_pipe_out


def before_the_server_in_oom_order() -> None:
    from labkit_room.sandbox import KERNEL_OOM_SCORE_ADJ

    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(str(KERNEL_OOM_SCORE_ADJ))
    except OSError:  # not Linux, or a kernel that refuses: the order stays as it was
        pass


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    network = ""
    if os.environ.get(OWN_NETWORK_ENV) == "1":
        network = own_network(argv)  # execs the kernel again inside its namespace; returns only where refused
    before_the_server_in_oom_order()
    pipe_in_private_folder()
    from ipykernel.kernelapp import IPKernelApp

    from labkit import backends
    from labkit_room import limits

    limits.apply()
    limits.note_network(network or network_state())
    backends.describe_also(limits.describe)
    app = IPKernelApp.instance()
    app.initialize(argv)
    limits.install_messages(app.shell)
    app.start()


if __name__ == "__main__":
    main()
