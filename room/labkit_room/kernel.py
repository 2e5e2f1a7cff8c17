"""A learner's kernel in a room: its own network, its sockets closed to others, the room's limits;
then IPython's kernel as usual.

The room's kernel spec (:func:`labkit_room.runtime.room_kernel_spec`, found first on the
learners' ``JUPYTER_PATH`` under the name ``python3``) starts every learner's kernel as
``python -I -S .../kernel_launcher.py -- python -P -s -m labkit_room.kernel -f CONNECTION_FILE``.
Before the first cell runs:

* **its own user, network and IPC namespaces** (:mod:`labkit_room.kernel_launcher`, a script
  that imports nothing of the kit: a namespace cannot be made once a thread runs, and the kit's
  imports start many). The kernel runs as the same user inside, with a loopback nobody else
  reaches and no other interface, and System V IPC of its own. Nothing another learner runs can
  connect to a socket the kernel opens, and nothing the kernel runs can listen on the box: not on
  the port of the learner's own Jupyter server either, so a learner who ends that server cannot
  put a page of their own in its place on the hub's address. **Fail closed**: this module checks
  that it runs in namespaces other than the box's (:func:`namespace_refusal`); where it does not,
  or a limit cannot be applied, the kernel runs nothing (:func:`refusing_kernel`): every cell
  answers with one line saying why.
* **its subprocess pipe over a private socket** (:func:`pipe_in_private_folder`): ipykernel
  listens for the output of forked children on a TCP port of 127.0.0.1, without authenticating
  what arrives before reading it whole; here it listens on a unix socket in the learner's runtime
  folder (mode 0700) instead, whatever the network.
* **before its server in the OOM killer's order**: the kernel raises its oom_score_adj
  (:data:`labkit_room.sandbox.KERNEL_OOM_SCORE_ADJ`), and what it starts inherits it, so when the
  learner's group is full a kernel or its children end, not the server that holds their session.
* **the room's limits** (:mod:`labkit_room.limits`): the GPU share, both limits in
  ``labkit.describe()``, a memory error explained under its traceback.

That command line is the kernel spec's, never typed by anyone: the kit's commands are
``python -m labkit ...``.
"""

from __future__ import annotations

import os
import sys

from labkit_room.kernel_launcher import BOX_NAMESPACES_ENV, REFUSED_ENV, namespace_ids

# What a learner sees in every cell of a kernel that could not be set up (then the cause).
REFUSAL_LINE = "This kernel runs nothing: the room could not set it up safely"


def namespace_refusal() -> str:
    """'' if this process runs in a user, network and IPC namespace other than the box's (those the
    launcher recorded before it left them), with one uid mapped and the loopback alone; else why not."""
    import socket

    why = os.environ.get(REFUSED_ENV, "")
    if why:
        return why
    box = os.environ.get(BOX_NAMESPACES_ENV, "").split()
    try:
        mine = namespace_ids().split()
        uid_map = open("/proc/self/uid_map").read().split()
        interfaces = sorted(name for _, name in socket.if_nameindex())
    except OSError as err:
        return f"cannot read this kernel's namespaces ({err.strerror or err})"
    if len(box) != len(mine) or any(a == b for a, b in zip(box, mine, strict=True)):
        return "not started by the room's launcher: this kernel shares the box's namespaces"
    if uid_map != [str(os.getuid()), str(os.getuid()), "1"]:
        return f"this kernel's user namespace maps more than its own user ({' '.join(uid_map)})"
    if interfaces != ["lo"]:
        return f"this kernel sees interfaces other than its own loopback ({', '.join(interfaces)})"
    return ""


def network_state() -> str:
    """One line for ``labkit.describe()``: whose network this kernel is on."""
    return "own (a loopback of this kernel's alone)" if not namespace_refusal() else "the box's (shared loopback)"


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


def refusing_kernel(why: str):
    """A kernel that runs no code: every cell, completion and inspection answers with one line
    (:data:`REFUSAL_LINE` and `why`). No IPython shell, no debugger: nothing of the learner's runs."""
    from ipykernel.kernelbase import Kernel

    line = f"{REFUSAL_LINE} ({why}). Ask the instructor; their log names you and the cause."

    class RefusingKernel(Kernel):
        implementation = "labkit-refusing"
        implementation_version = "1"
        banner = line
        language_info = {"name": "python", "mimetype": "text/x-python", "file_extension": ".py"}

        def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False,
                       **kwargs):
            if not silent:
                self.send_response(self.iopub_socket, "stream", {"name": "stderr", "text": line + "\n"})
            return {"status": "error", "ename": "RoomKernelRefused", "evalue": line, "traceback": [line],
                    "execution_count": self.execution_count}

        def do_complete(self, code, cursor_pos):
            return {"status": "ok", "matches": [], "cursor_start": cursor_pos, "cursor_end": cursor_pos,
                    "metadata": {}}

        def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}

    return RefusingKernel


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    before_the_server_in_oom_order()
    pipe_in_private_folder()
    from ipykernel.kernelapp import IPKernelApp

    why = namespace_refusal()
    if not why:
        try:
            from labkit import backends
            from labkit_room import limits

            limits.apply()
            limits.note_network(network_state())
            backends.describe_also(limits.describe)
        except Exception as err:  # noqa: BLE001 (any limit not applied: the kernel runs nothing)
            first = (str(err).splitlines() or [type(err).__name__])[0]
            why = f"the room's limits could not be applied: {first}"
    if why:
        import tempfile

        print(f"labkit: {os.environ.get('USER', os.getuid())}'s kernel runs nothing: {why}", file=sys.stderr,
              flush=True)
        # No configuration of the learner's either: IPython's profile (~/.ipython) holds Python that the
        # kernel's app would run, here on the box's own network. An empty one of this process's instead.
        # Removed when the kernel ends (a killed one leaves it in the learner's own /tmp, gone at the close).
        with tempfile.TemporaryDirectory(prefix="labkit-refused-ipython-", ignore_cleanup_errors=True) as empty:
            os.environ["IPYTHONDIR"] = empty
            IPKernelApp.launch_instance(argv=argv, kernel_class=refusing_kernel(why))
        return
    app = IPKernelApp.instance()
    app.initialize(argv)
    limits.install_messages(app.shell)
    app.start()


if __name__ == "__main__":
    main()
