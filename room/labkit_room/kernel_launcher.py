"""The first step of every learner's kernel in a room: a user, network and IPC namespace of its own,
then the kernel (:mod:`labkit_room.kernel`) started afresh inside them.

``unshare(CLONE_NEWUSER)`` fails (EINVAL) in a process that already runs a second thread, and
importing the kit imports torch, which starts many: so this step runs as a script of its own, under
``python -I -S`` (no site-packages, no ``.pth`` file, nothing of the environment's), importing
nothing but the standard library, before anything else of the kernel's. It fails closed: where
any part cannot be set up (the box refuses user namespaces, the learner has spent their count of
them, a thread is already running, the loopback does not come up, an interface other than the
loopback is there), the kernel still starts, but as a kernel that runs nothing and answers every
cell with the one line saying why (:func:`labkit_room.kernel.refusing_kernel`), and that line
goes to the learner's server log (the instructor's, root-only) with the learner's name.

Usage (the room's kernel spec, :func:`labkit_room.runtime.room_kernel_spec`)::

    python -I -S .../kernel_launcher.py -- python -P -s -m labkit_room.kernel -f CONNECTION_FILE
    python -I -S .../kernel_launcher.py --probe      # what `hub start` asks, as an unprivileged user
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWIPC = 0x10000000, 0x40000000, 0x08000000
NAMESPACES = ("user", "net", "ipc")
_SIOCSIFFLAGS, _IFF_UP, _IFF_LOOPBACK, _IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40
# Set on the kernel by this launcher alone: why the namespaces could not be made ("" when they were),
# and the box's own namespaces, which the kernel checks its own differ from.
REFUSED_ENV = "LABKIT_KERNEL_REFUSED"
BOX_NAMESPACES_ENV = "LABKIT_KERNEL_BOX_NAMESPACES"


def namespace_ids() -> str:
    """This process's user, network and IPC namespaces, as /proc names them ("net:[4026531840] ...")."""
    return " ".join(os.readlink(f"/proc/self/ns/{kind}") for kind in NAMESPACES)


def _threads() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))


def _loopback_up() -> None:
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH", b"lo", _IFF_UP | _IFF_LOOPBACK | _IFF_RUNNING).ljust(40, b"\0")
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, request)


def enter_own_namespaces() -> str:
    """Move this process into a user, network and IPC namespace of its own (the same uid and gid
    inside, nothing else mapped), with its loopback up and no other interface. '' if done, else why
    not, in a few words."""
    import socket

    if _threads() != 1:
        return f"{_threads()} threads already run (a namespace of its own needs one)"
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC) != 0:
        return f"unshare: {os.strerror(ctypes.get_errno())}"
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
        _loopback_up()
        interfaces = sorted(name for _, name in socket.if_nameindex())
    except OSError as err:
        return f"setting up the namespace: {err.strerror or err}"
    if interfaces != ["lo"]:
        return f"interfaces other than the loopback: {', '.join(interfaces)}"
    return ""


def _learner() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return f"uid {os.getuid()}"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--probe"]:
        why = enter_own_namespaces()
        print(why or "ok", file=sys.stderr if why else sys.stdout)
        return 1 if why else 0
    if "--" not in argv or not argv[argv.index("--") + 1:]:
        print("usage: kernel_launcher.py -- KERNEL COMMAND... | --probe", file=sys.stderr)
        return 2
    cmd = argv[argv.index("--") + 1:]
    try:
        box = namespace_ids()
        why = enter_own_namespaces()
    except OSError as err:
        box, why = "", f"reading this process's namespaces: {err.strerror or err}"
    env = dict(os.environ)
    env[BOX_NAMESPACES_ENV] = box
    env[REFUSED_ENV] = why
    if why:
        # The server's log: the learner's own, root-only, in the room's state folder.
        print(f"labkit: {_learner()}'s kernel runs nothing: it could not get a network of its own ({why})",
              file=sys.stderr, flush=True)
    os.execve(cmd[0], cmd, env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
