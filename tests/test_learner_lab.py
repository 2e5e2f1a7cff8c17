"""`make lab` opens the learner's edition: the edition switch and the port, checked in one line; the
learner's folder; trust; the server Binder starts (binder/postBuild); the Windows route.

Nothing here starts a server (``os.execve`` is replaced); the browser stage (tests/browser) opens the lab.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit.__main__ import main
from labkit.tools import lab, setup
from labkit.workshop.editions.secrecy import STUDENT_PATH

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "INSTRUCTOR_GUIDE.md"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def started(tmp_path, monkeypatch):
    """`python -m labkit lab` as `make lab` runs it, with the learner's folder and the lab's state in tmp_path."""
    monkeypatch.setattr(lab, "LEARNER_FOLDER", tmp_path / "student")
    monkeypatch.setattr(lab, "LAB_STATE", tmp_path / "lab-state")
    monkeypatch.setenv("JUPYTERLAB_DIR", str(tmp_path / "jupyterlab"))
    commands = []
    monkeypatch.setattr(lab.os, "execve", lambda path, cmd, env: commands.append(cmd))
    monkeypatch.setattr(lab.os, "fork", lambda: 1)  # the parent's side alone: no watcher polls a lab never started
    monkeypatch.setattr(lab.os, "chdir", lambda path: None)
    return commands


def _flag(cmd, name):
    return next(arg.split("=", 1)[1] for arg in cmd if arg.startswith(f"--{name}="))


def test_make_lab_opens_the_student_edition_in_the_learners_folder_trusted(started, tmp_path, capsys):
    from nbformat.sign import NotebookNotary

    assert main(["lab", "--port", "0"]) == 0
    (cmd,) = started
    root = Path(_flag(cmd, "ServerApp.root_dir"))
    assert root == tmp_path / "student" and cmd[-1] == "A_00_setup.ipynb"
    assert (root / cmd[-1]).is_file() and not (root / "conftest.py").exists()
    out = capsys.readouterr().out
    assert "student edition" in out and "its address follows once it answers" in out
    # The address, once the server answers (the watcher prints it), says how to switch edition.
    assert "make lab EDITION=instructor" in lab._banner("http://127.0.0.1:1/lab", "student", "127.0.0.1", 1)
    notary = NotebookNotary(db_file=_flag(cmd, "NotebookNotary.db_file"),
                            secret_file=_flag(cmd, "NotebookNotary.secret_file"))
    shipped = sorted(root.glob("*.ipynb"))
    assert len(shipped) == len(STUDENT_PATH)
    assert all(notary.check_signature(nbformat.read(p, as_version=4)) for p in shipped)
    # A second start keeps the learner's work.
    first = root / cmd[-1]
    first.write_text(first.read_text().replace("# 00", "# 00 (mine)", 1))
    assert main(["lab", "--port", "0"]) == 0
    assert "(mine)" in first.read_text()


def test_the_instructor_edition_opens_with_the_switch(started):
    assert main(["lab", "--edition", "instructor", "--port", "0"]) == 0
    (cmd,) = started
    assert Path(_flag(cmd, "ServerApp.root_dir")) == REPO and cmd[-1] == lab.FIRST_NOTEBOOK


def _one_line_exit_2(capsys, *argv) -> str:
    assert main(["lab", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("python -m labkit lab: error: "), err
    return err


@pytest.mark.parametrize("value", ["teacher", "", "Student edition"])
def test_a_bad_edition_is_one_line_naming_it_and_the_choices(started, capsys, value):
    err = _one_line_exit_2(capsys, "--edition", value, "--check-only")
    assert repr(value) in err and "student" in err and "instructor" in err
    assert not started


@pytest.mark.parametrize("value", ["x", "70000", "-5", "80.5"])
def test_a_bad_port_is_one_line_naming_it_and_the_choices(started, capsys, value):
    err = _one_line_exit_2(capsys, "--port", value)
    assert repr(value) in err and "1 to 65535" in err and "0 for a free one" in err


def test_a_port_in_use_is_one_line(started, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = _one_line_exit_2(capsys, "--port", str(port))
    assert str(port) in err and "choose another" in err


def test_make_checks_the_edition_before_the_set_up(tmp_path):
    env = dict(os.environ, EDITION="teacher")
    done = subprocess.run(["make", "-s", "lab-check", f"PYTHON={sys.executable}"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    ours = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert ours == [ours[0]] and "'teacher'" in ours[0] and "Traceback" not in done.stderr
    order = subprocess.run(["make", "-n", "lab"], cwd=REPO, capture_output=True, text=True, timeout=60).stdout
    assert order.index("-m labkit lab --check-only") < order.index("-m labkit lab --edition")


def test_binder_opens_the_student_edition(tmp_path, monkeypatch):
    postbuild = (REPO / "binder" / "postBuild").read_text()
    assert re.search(r"^python -m labkit setup server-config student$", postbuild, re.M)
    monkeypatch.setattr(lab, "LEARNER_FOLDER", tmp_path / "student")
    monkeypatch.setattr(lab, "LAB_STATE", tmp_path / "lab-state")
    path = setup.write_server_config("student", tmp_path / "jupyter_server_config.d")
    config = json.loads(path.read_text())
    assert config["ServerApp"]["root_dir"] == str(tmp_path / "student")
    assert config["ServerApp"]["default_url"] == "/lab/tree/A_00_setup.ipynb"
    assert config["NotebookNotary"]["db_file"].startswith(str(tmp_path / "lab-state"))


def test_the_windows_route_opens_the_student_edition():
    windows = GUIDE.read_text().split("### Windows", 1)[1].split("###", 1)[0]
    assert ".venv\\Scripts\\python -m labkit lab" in windows and "jupyter lab notebooks" not in windows
    readme = (REPO / "README.md").read_text()
    assert ".venv\\Scripts\\python -m labkit lab" in readme


def test_the_browser_stage_finds_a_server_traceback_in_the_lab_log(tmp_path):
    driver = _load("lab_driver_for_learner_tests", REPO / "tests" / "browser" / "lab_driver.py")
    server = driver.LabServer(REPO / "notebooks", tmp_path)
    server.log_path.write_text("[I 10:00] Kernel started\n[E 10:01] Uncaught exception\n"
                               "Traceback (most recent call last):\n  File \"websocket.py\", line 87\n"
                               "AttributeError: 'NoneType' object has no attribute 'kernel_ws_protocol'\n"
                               "[E 10:01] 500 GET /api/kernels/abc/channels (127.0.0.1) 2.00ms\n")
    found = server.server_tracebacks()
    assert len(found) == 2 and "kernel_ws_protocol" in found[0]
    server.log_path.write_text("[I 10:00] Kernel started\n[I 10:01] 101 GET /api/kernels/abc/channels\n")
    assert server.server_tracebacks() == []
