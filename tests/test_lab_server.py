"""labkit.tools.lab_server: a browser that drops a kernel's websocket during its handshake leaves no
traceback in the server's log. Real servers, real HTTP, a real kernel: the socket is closed while
the server still waits for the kernel's first reply, as a reload does."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from labkit.tools import lab, lab_server

pytest.importorskip("jupyter_server")
ROOT = Path(__file__).resolve().parents[1]
TOKEN = "labkit-test-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def _drop_during_handshake(port: int, kernel: str) -> None:
    """Send a kernel channel's websocket upgrade and hang up before the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall((f"GET /api/kernels/{kernel}/channels?token={TOKEN}&session_id=s1 HTTP/1.1\r\n"
                     f"Host: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Protocol: v1.kernel.websocket.jupyter.org\r\n\r\n").encode())
        time.sleep(0.05)


def server_log_after_a_dropped_socket(tmp_path: Path, patched: bool) -> str:
    port = _free_port()
    log_path = tmp_path / f"server-{int(patched)}.log"
    cmd = [sys.executable, "-m", "jupyter_server", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           f"--ServerApp.root_dir={tmp_path}", "--no-browser",
           "--ServerApp.port_retries=0", *(["--allow-root"] if hasattr(__import__("os"), "geteuid") else []),
           *([lab_server.CLI_FLAG] if patched else [])]
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=lab.lab_env(TOKEN))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/api/status?token={TOKEN}")
                break
            except OSError as err:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise AssertionError("the Jupyter server did not start:\n" + log_path.read_text()[-2000:]) from err
                time.sleep(0.2)
        request = urllib.request.Request(f"{base}/api/kernels?token={TOKEN}", data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=30) as answer:
            kernel = json.load(answer)["id"]
        _drop_during_handshake(port, kernel)
        # The handler goes on once the kernel has answered: wait for what it logs then (either way).
        while not any(line in log_path.read_text() for line in ("kernel_ws_protocol", lab_server.DROPPED_LINE)):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return log_path.read_text()


def test_a_socket_dropped_during_its_handshake_leaves_no_traceback(tmp_path):
    bare = server_log_after_a_dropped_socket(tmp_path, patched=False)
    # Without the patch this jupyter_server logs the traceback (so the test reaches the race); the day
    # it does not, jupyter-server#1265 is fixed in the pinned version and labkit.tools.lab_server can go.
    assert "'NoneType' object has no attribute 'kernel_ws_protocol'" in bare, bare[-1500:]
    quiet = server_log_after_a_dropped_socket(tmp_path, patched=True)
    # The race's own traceback and its 500 are gone (a kernel process's own output is not this test's).
    assert "kernel_ws_protocol" not in quiet and " 500 GET" not in quiet, quiet[-1500:]
    assert lab_server.DROPPED_LINE in quiet  # it reached the race, and said so in one line


def test_the_patch_is_applied_once_and_leaves_live_connections_to_jupyter_server():
    class Handler:
        connection = None
        log = type("Log", (), {"info": staticmethod(lambda *_: None)})()

        def select_subprotocol(self, subprotocols):
            return "live:" + subprotocols[0]

        def on_close(self):
            return "closed"

        async def open(self, kernel_id):
            return "opened " + kernel_id

        def close(self):
            self.closed = True

    assert lab_server.patch_kernel_websocket(Handler) and not lab_server.patch_kernel_websocket(Handler)
    dropped, live = Handler(), Handler()
    live.connection = object()
    import asyncio

    assert dropped.select_subprotocol(["v1"]) is None and dropped.on_close() is None
    assert asyncio.run(dropped.open("k")) is None and dropped.closed
    assert live.select_subprotocol(["v1"]) == "live:v1" and live.on_close() == "closed"
    assert asyncio.run(live.open("k")) == "opened k"


def test_the_lab_the_kit_starts_and_binders_server_load_the_extension():
    assert lab.QUIET_SOCKETS_FLAG == lab_server.CLI_FLAG
    assert lab_server.CLI_FLAG in lab.lab_command("127.0.0.1", 1, as_root=False, open_browser=False)
