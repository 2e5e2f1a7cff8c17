"""`make lab`'s token is on no command line: `python -m labkit lab` (what make lab runs, both
editions) started for real, then every process's command line read as another user of the box
(nobody), as anyone logged in could: the token is in none, the lab answers with it, and the lab's
environment, where the token is, is closed to that user. Needs root (to read as nobody); skips
without, saying so."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from other_user import command_lines, secrets_seen

ROOT = Path(__file__).resolve().parents[1]

if os.geteuid() != 0:
    pytest.skip("reading the processes as another user (nobody) needs root; CI runs as root", allow_module_level=True)
pytest.importorskip("jupyterlab", reason="the lab extra is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The student edition's folder goes to a temporary one (the checkout's student/ is a learner's own).
_START = ("import sys; from pathlib import Path; from labkit.tools import lab; "
          "lab.LEARNER_FOLDER = Path(sys.argv[1]); from labkit.__main__ import main; "
          "sys.exit(main(['lab', '--edition', sys.argv[2], '--port', sys.argv[3]]))")


@pytest.mark.parametrize("edition", ["student", "instructor"])
def test_the_labs_token_is_on_no_command_line(tmp_path, edition):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "JUPYTER_TOKEN")}
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    out = tmp_path / "lab.out"
    with open(out, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", _START, str(tmp_path / "student"), edition, str(port)],
                                cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        token = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            found = re.search(r"\?token=([0-9a-f]{48})", out.read_text())
            if found:
                token = found.group(1)
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5):
                        break
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(0.5)
        assert token and proc.poll() is None, out.read_text()[-2000:]
        lines = command_lines()
        assert proc.pid in lines and "jupyter" in lines[proc.pid][0], lines.get(proc.pid)
        assert not lines[proc.pid][1], "another user reads the lab's environment"
        assert secrets_seen([token]) == []
        with pytest.raises(urllib.error.HTTPError):  # and the token is what guards it
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernels", timeout=10)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)
