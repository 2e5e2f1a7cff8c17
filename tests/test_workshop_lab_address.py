"""`make lab` prints the lab's address once the server answers on it, not while JupyterLab starts.

`python -m labkit lab` (what make lab runs) is started for real, on a temporary learner's folder; the
moment the address appears in its output, one request to it, with no retry, must be answered.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("jupyterlab", reason="the lab extra is not installed")

ROOT = Path(__file__).resolve().parents[1]
# The student edition's folder goes to a temporary one (the checkout's student/ is a learner's own).
_START = ("import sys; from pathlib import Path; from labkit.tools import lab; "
          "lab.LEARNER_FOLDER = Path(sys.argv[1]); from labkit.__main__ import main; "
          "sys.exit(main(['lab', '--edition', 'student', '--port', sys.argv[2]]))")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_address_is_printed_once_the_lab_answers_on_it(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "JUPYTER_TOKEN")}
    env.update(JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-c", _START, str(tmp_path / "student"), str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    seen = []
    try:
        deadline = time.monotonic() + 180
        for line in proc.stdout:
            seen.append(line)
            found = re.search(r"(http://127\.0\.0\.1:\d+)/lab/tree/\S+\?token=([0-9a-f]{48})", line)
            if found:
                base, token = found.groups()
                # At once, no retry: the address printed must already answer.
                request = urllib.request.Request(f"{base}/api/status", headers={"Authorization": f"token {token}"})
                with urllib.request.urlopen(request, timeout=10) as answer:
                    assert answer.status == 200
                break
            assert time.monotonic() < deadline, "".join(seen)
        else:
            pytest.fail("the lab printed no address:\n" + "".join(seen))
        starting = next(i for i, line in enumerate(seen) if "JupyterLab is starting" in line)
        assert starting < len(seen) - 1 and "JupyterLab answers" in "".join(seen[starting:]), "".join(seen)
        assert sum("?token=" in line for line in seen) == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
