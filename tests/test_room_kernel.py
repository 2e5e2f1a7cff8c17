"""A learner's kernel in a room fails closed (room/labkit_room/kernel_launcher.py, labkit_room.kernel):
where its own user, network and IPC namespaces cannot be made, it runs nothing and every cell says why,
in one line; the launcher says so, with the learner's name, in the server's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from room_kernel_session import kit_and_room_path, room_kernel

from labkit_room import kernel, kernel_launcher

LAUNCHER = Path(kernel_launcher.__file__)
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="namespaces are Linux's")


def _launch_with_a_thread_running(*command: str) -> subprocess.CompletedProcess:
    """The launcher run in a process that already has a second thread (as one that imported torch
    first does): it cannot make a user namespace there."""
    code = textwrap.dedent(f"""
        import runpy, sys, threading, time
        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
        sys.argv = [{str(LAUNCHER)!r}, *{list(command)!r}]
        runpy.run_path({str(LAUNCHER)!r}, run_name="__main__")
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_launcher_refuses_where_a_thread_already_runs_and_says_so_with_the_learners_name():
    shown = "import os; print(repr(os.environ['LABKIT_KERNEL_REFUSED']))"
    done = _launch_with_a_thread_running("--", sys.executable, "-c", shown)
    assert done.returncode == 0, done.stderr
    why = eval(done.stdout.strip())  # the reason the kernel is handed, non-empty: it must refuse
    assert "threads already run" in why, why
    user = __import__("pwd").getpwuid(os.getuid()).pw_name
    assert done.stderr.strip() == f"labkit: {user}'s kernel runs nothing: it could not get a network of its own ({why})"
    probe = _launch_with_a_thread_running("--probe")
    assert probe.returncode == 1 and "threads already run" in probe.stderr


def test_the_launcher_gives_the_kernel_its_own_namespaces_where_the_box_allows():
    allowed = subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), "--probe"], capture_output=True, text=True,
                             timeout=60)
    if allowed.returncode != 0:
        pytest.skip(f"this box refuses the kernel's namespaces ({allowed.stderr.strip()}): the room refuses to open")
    code = ("import json, os, socket\n"
            "from labkit_room import kernel\n"
            "print(json.dumps([kernel.namespace_refusal(), sorted(n for _, n in socket.if_nameindex())]))")
    done = subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), "--", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": kit_and_room_path()})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == ["", ["lo"]]
    # The same check in a process on the box's namespaces: refused.
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    refusal = json.loads(plain.stdout.splitlines()[-1])[0]
    assert "box's namespaces" in refusal, refusal


def test_a_kernel_not_in_its_own_namespaces_runs_no_cell_and_each_says_why(tmp_path, monkeypatch):
    """As a learner would meet it: the kernel starts, and each cell answers with one line, the code
    unrun (the file it would write is not there)."""
    pytest.importorskip("ipykernel", reason="the room's kernel is ipykernel's (the lab extra)")
    spec = tmp_path / "data" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({  # the kernel without its launcher
        "argv": [sys.executable, "-m", "labkit_room.kernel", "-f", "{connection_file}"],
        "display_name": "room kernel, no launcher", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "data"))
    # The learner's IPython profile: Python the kernel's app would run at its start, off their network.
    planted = tmp_path / "ran"
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(f"open({str(planted)!r}, 'w').write('config ran')\n")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    scratch = tmp_path / "tmp"  # the kernel's temporary folder: its empty profile goes there, and goes
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    with room_kernel(tmp_path) as session:
        reply = session.run(f"open({str(planted)!r}, 'w').write('ran')")
    out = session.printed
    assert not planted.exists(), planted.read_text()  # neither the cell nor the learner's configuration ran
    assert list(scratch.iterdir()) == []
    assert reply["content"]["status"] == "error"
    lines = "".join(out).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(kernel.REFUSAL_LINE) and "box's namespaces" in lines[0], lines
