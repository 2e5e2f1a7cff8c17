"""Nothing of a learner outlives the close: System V shared memory, semaphores and message queues a
learner's uid made stay after every process of theirs has ended, until removed; the close removes
them (labkit_room.accounts.remove_ipc), and a uid that owns one is not handed out again."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from labkit_room import accounts

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="makes IPC objects as another uid: needs root"),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/sysvipc is Linux's")]
UID = 4242421  # no account's: nothing else of the box's is touched

MAKE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
ids = [libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600), libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600),
       libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)]
print(*ids)
sys.exit(0 if min(ids) >= 0 else ctypes.get_errno())
"""


def _python_for(uid: int) -> str:
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            if subprocess.run([python, "-c", ""], user=uid, group=uid, extra_groups=[], cwd="/",
                              timeout=60).returncode == 0:
                return python
        except OSError:
            continue
    pytest.skip("no Python here that an unprivileged uid may run")


def test_a_uids_ipc_objects_outlive_it_until_the_close_removes_them():
    made = subprocess.run([_python_for(UID), "-c", MAKE], user=UID, group=UID, extra_groups=[], cwd="/",
                          capture_output=True, text=True, timeout=60)
    try:
        assert made.returncode == 0, made.stderr
        shm, sem, msg = map(int, made.stdout.split())
        theirs = {(kind, ipc_id) for kind, ipc_id, uid, _ in accounts.sysv_ipc() if uid == UID}
        assert theirs == {("shm", shm), ("sem", sem), ("msg", msg)}  # the process is gone; they are not
        assert UID in accounts.owned_ids(folders=())  # not handed to a new learner while they are there
        removed = accounts.remove_ipc({UID})
        assert sorted(removed) == sorted([f"shm {shm}", f"sem {sem}", f"msg {msg}"])
        assert not [o for o in accounts.sysv_ipc() if UID in o[2:]]
        assert UID not in accounts.owned_ids(folders=())
    finally:
        accounts.remove_ipc({UID})
