"""The reaper a learner's server runs under (room/labkit_room/reaper.py): it hands the server the
hub's signals and its exit code back, and it reads the status of every orphan the learner leaves,
whatever the box's first process does with orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REAPER = Path(__file__).resolve().parents[1] / "room" / "labkit_room" / "reaper.py"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")


def _reaper(*command: str, own: tuple | list = (), **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-P", "-s", str(REAPER), *own, "--", *command], stdout=subprocess.PIPE,
                            text=True, **kwargs)


def test_the_servers_exit_code_comes_back():
    for code in (0, 3):
        done = _reaper(sys.executable, "-c", f"raise SystemExit({code})")
        assert done.wait(timeout=60) == code


def test_an_orphan_of_the_server_is_handed_to_the_reaper_and_read_when_it_ends():
    # The server starts a child that starts a grandchild and exits at once: the grandchild, an
    # orphan, must now be the reaper's; once it ends, nothing of it may be left (no zombie).
    server = textwrap.dedent("""
        import os, sys, time
        read, write = os.pipe()
        if os.fork() == 0:
            if os.fork() == 0:
                os.write(write, str(os.getpid()).encode()); time.sleep(0.5); os._exit(0)
            os._exit(0)
        os.wait()
        orphan = int(os.read(read, 32))
        time.sleep(0.2)
        parent = int(open(f"/proc/{orphan}/stat").read().rsplit(")", 1)[1].split()[1])
        time.sleep(1.0)
        print(orphan, parent, os.path.exists(f"/proc/{orphan}"), flush=True)
    """)
    reaper = _reaper(sys.executable, "-c", server)
    out, _ = reaper.communicate(timeout=60)
    orphan, parent, still_there = out.split()
    assert int(parent) == reaper.pid, "the orphan went to another process than the reaper"
    assert still_there == "False", "the orphan ended and is still a zombie"
    assert reaper.returncode == 0


def test_the_hubs_signal_reaches_the_server():
    server = textwrap.dedent("""
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))
        print("ready", flush=True)
        time.sleep(60)
    """)
    reaper = _reaper(sys.executable, "-c", server)
    assert reaper.stdout.readline().strip() == "ready"
    started = time.monotonic()
    reaper.send_signal(signal.SIGTERM)
    assert reaper.wait(timeout=30) == 7 and time.monotonic() - started < 30


def test_no_command_is_a_usage_line():
    done = subprocess.run([sys.executable, str(REAPER)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == "usage: reaper.py [--user UID:GID] -- COMMAND [ARG...]"


def _runs_as_nobody(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", ""], user=65534, cwd="/", timeout=60).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(os.geteuid() != 0,
                    reason="starting the server as another user needs root")
def test_as_root_the_server_is_the_learner_and_cannot_reach_the_reaper():
    # What a learner's kernel would try from inside the server's tree: signal the reaper (to orphan
    # the server, or end its reaping), trace it, read its environment (the hub's token).
    server = textwrap.dedent("""
        import ctypes, os, signal
        reaper = os.getppid()
        def tried(step):
            try:
                step(); return "allowed"
            except OSError:
                return "refused"
        libc = ctypes.CDLL(None, use_errno=True)
        traced = "allowed" if libc.ptrace(16, reaper, 0, 0) == 0 else "refused"  # PTRACE_ATTACH
        print(os.getuid(), tried(lambda: os.kill(reaper, signal.SIGTERM)),
              tried(lambda: open(f"/proc/{reaper}/environ").read()), traced, flush=True)
    """)
    python = next((p for p in (sys.executable, "/usr/bin/python3") if _runs_as_nobody(p)), None)
    if python is None:
        pytest.skip("no Python here that an unprivileged user may run")
    reaper = _reaper(python, "-c", server, own=["--user", "65534:65534"], cwd="/")
    out, _ = reaper.communicate(timeout=60)
    assert out.split() == ["65534", "refused", "refused", "refused"], out
    assert reaper.returncode == 0


def test_the_reaper_never_starts_a_server_as_root():
    done = subprocess.run([sys.executable, str(REAPER), "--user", "0:0", "--", "true"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "root" in done.stderr
