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

Run as a script, not as ``-m labkit...``: it imports nothing but the standard library (importing the
kit would import torch in every server's parent). Usage (the hub's ``Spawner.cmd``)::

    python -P -s .../room/labkit_room/reaper.py -- python -P -s -m jupyterhub.singleuser
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def become_subreaper() -> bool:
    """Ask the kernel to hand this process the orphans of its descendants (Linux 3.4 on)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def run(cmd: list[str]) -> int:
    """Start `cmd`, pass it the hub's signals, reap every child until `cmd` ends; its exit code
    (128 + N for a signal N, as a shell reports it)."""
    become_subreaper()
    server = subprocess.Popen(cmd)  # its status is read below, by waitpid(-1), never by Popen
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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        print("usage: reaper.py -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
