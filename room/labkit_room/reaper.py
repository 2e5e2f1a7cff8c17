"""A learner's server's parent: it starts the server, passes it the signals the hub sends, and reaps
every process of the learner's that ends orphaned.

A process whose parent has exited is handed to the nearest ancestor that asked for orphans
(``PR_SET_CHILD_SUBREAPER``), else to the box's first process, which reads its exit status and so
frees its entry. Not every first process does that promptly: a container's or a microVM's may
leave ended processes as zombies for seconds or for good, and each counts against the learner's
process limit (a control group's ``pids``, RLIMIT_NPROC) until it is read. A learner process that
forks and exits in a loop fills that limit with zombies and then cannot fork at all; worse, the
learner's own next kernel cannot start. With this process between the hub and the server, the
learner's orphans come here and are read at once, whatever the box's first process does.

In a room it runs as root and starts the server as the learner (``--user UID:GID``): no process of
the learner's may signal it, trace it or read its memory or environment (it holds the server's
hub token), and it makes itself non-dumpable besides. It never runs anything of the learner's as
root: the server is the only thing it starts, and it does nothing else but wait.

Run as a script, not as ``-m labkit...``: it imports nothing but the standard library (importing the
kit would import torch in every server's parent). Usage (the hub's ``Spawner.cmd``, the spawner
adds ``--user``)::

    python -P -s .../room/labkit_room/reaper.py --user 1001:1001 -- python -P -s -m jupyterhub.singleuser
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36  # linux/prctl.h
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def become_subreaper() -> bool:
    """Ask the kernel to hand this process the orphans of its descendants (Linux 3.4 on)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def undumpable() -> bool:
    """No core, no trace, no /proc/PID/mem or environ of this process for anyone but root."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def run(cmd: list[str], user: tuple[int, int] | None = None) -> int:
    """Start `cmd` (as `user`, (uid, gid), where given), pass it the hub's signals, reap every child
    until `cmd` ends; its exit code (128 + N for a signal N, as a shell reports it)."""
    become_subreaper()
    if not undumpable():
        print("reaper: could not make itself non-dumpable; refusing to start the server", file=sys.stderr)
        return 1
    as_user = {} if user is None else {"user": user[0], "group": user[1], "extra_groups": []}
    server = subprocess.Popen(cmd, **as_user)  # its status is read below, by waitpid(-1), never by Popen
    for sig in FORWARDED:
        signal.signal(sig, lambda number, frame: _forward(server.pid, number))
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # no child at all: the server's status was read already
            return 0
        if pid == server.pid:
            code = os.waitstatus_to_exitcode(status)
            server.returncode = code
            _reap_the_rest()
            return code if code >= 0 else 128 - code


def _forward(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def _reap_the_rest() -> None:
    """Read whatever else has ended; what still runs is the hub's to end (it sweeps the learner's uid)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


USAGE = "usage: reaper.py [--user UID:GID] -- COMMAND [ARG...]"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, cmd = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else ([], argv)
    user = None
    if own[:1] == ["--user"] and len(own) == 2 and all(part.isdigit() for part in own[1].split(":")) \
            and own[1].count(":") == 1:
        uid, gid = map(int, own[1].split(":"))
        user = (uid, gid)
    elif own:
        print(USAGE, file=sys.stderr)
        return 2
    if not cmd:
        print(USAGE, file=sys.stderr)
        return 2
    if user is not None and 0 in user:
        print("reaper: refusing to start a server as root", file=sys.stderr)
        return 2
    return run(cmd, user)


if __name__ == "__main__":
    sys.exit(main())
