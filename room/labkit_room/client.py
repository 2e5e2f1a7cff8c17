"""A learner's side of the hub, over real HTTP: log in, start the server, run cells in a kernel.

What a browser does, without one: the login form (with its XSRF token), the hub's REST API to
start the server and get an API token, JupyterLab's REST API to start a kernel, and the kernel's
websocket (Jupyter's messaging protocol, JSON over ``/api/kernels/<id>/channels``) to execute
code and collect what it prints. tests/test_hub.py and `python -m labkit hub bench` use it.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import requests
import websocket

from labkit import paths


class HubClientError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RoomProcess:
    """`python -m labkit hub start` in a child process, as an instructor runs it in a terminal:
    wait until it says the room is open, read the logins from its root-only file, close it with
    Ctrl-C (SIGINT). The instructor's side of tests/test_hub.py and `python -m labkit hub bench`."""

    def __init__(self, state: Path, learners: int, *extra: str, cwd: Path | None = None):
        from labkit_room.room import ADMIN_USER

        self.admin = ADMIN_USER
        self.state = Path(state)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.output: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labkit", "hub", "start", "--learners", str(learners), "--port", str(self.port),
             "--state", str(self.state), *extra],
            cwd=cwd or paths.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, stdin=subprocess.DEVNULL)
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.output.append(line)
            if "the room is open" in line:
                self._ready.set()
        self._ready.set()

    def wait_open(self, timeout_s: float = 300) -> dict[str, str]:
        """Block until the room is open; returns {user: password}, the instructor's included."""
        self._ready.wait(timeout_s)
        if self.proc.poll() is not None or not any("the room is open" in line for line in self.output):
            raise HubClientError("the hub did not open:\n" + "".join(self.output[-40:]))
        self.room_id = json.loads((self.state / "state.json").read_text())["room_id"]
        text = (self.state / "credentials.txt").read_text()
        self.passwords = dict(re.findall(r"^(\S+)  password (\S+)$", text, re.M))
        self.passwords[self.admin] = re.search(rf"user {self.admin}  password (\S+)", text).group(1)
        return self.passwords

    def close(self, timeout_s: float = 120) -> int:
        """Ctrl-C, and wait for the room to tear itself down (`hub stop` if it does not)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            deadline = time.monotonic() + timeout_s
            while True:
                # A second Ctrl-C here does not cut the wait short: the caller's next step may remove the
                # state folder the room is closing from (the bench's is a temporary one).
                try:
                    self.proc.wait(max(0.0, deadline - time.monotonic()))
                    break
                except KeyboardInterrupt:
                    print("still closing the room: its learners' servers and users go first", file=sys.stderr)
                except subprocess.TimeoutExpired:
                    subprocess.run([sys.executable, "-m", "labkit", "hub", "stop", "--state", str(self.state)],
                                   timeout=timeout_s)
                    self.proc.kill()
                    self.proc.wait()
                    break
        return self.proc.returncode


@dataclass
class CellResult:
    source: str
    outputs: list[dict] = field(default_factory=list)
    error: dict | None = None
    first_output_s: float | None = None  # from sending the request to its first output
    seconds: float = 0.0

    def text(self) -> str:
        parts = []
        for out in self.outputs:
            if out.get("name") in ("stdout", "stderr"):
                parts.append(out.get("text", ""))
            elif "data" in out:
                parts.append(out["data"].get("text/plain", ""))
        if self.error:
            parts.append(f"{self.error.get('ename')}: {self.error.get('evalue')}")
        return "".join(parts)


class Learner:
    """One person's browser: a cookie session on the hub, a token for the APIs."""

    def __init__(self, hub_url: str, name: str, password: str, timeout_s: float = 60):
        self.hub_url = hub_url.rstrip("/")
        self.name = name
        self.password = password
        self.session = requests.Session()
        self.timeout_s = timeout_s
        self.token: str | None = None

    # -- the hub ---------------------------------------------------------------------------------
    def _xsrf(self) -> str:
        return self.session.cookies.get("_xsrf", path="/hub/") or self.session.cookies.get("_xsrf") or ""

    def login(self) -> requests.Response:
        """Log in through the hub's login form; returns the response (raises if refused)."""
        self.session.get(f"{self.hub_url}/hub/login", timeout=self.timeout_s)
        resp = self.session.post(f"{self.hub_url}/hub/login?next=", timeout=self.timeout_s, allow_redirects=False,
                                 data={"username": self.name, "password": self.password, "_xsrf": self._xsrf()})
        if resp.status_code != 302:
            raise HubClientError(f"{self.name}: login refused ({resp.status_code})")
        return resp

    def hub_api(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"X-XSRFToken": self._xsrf(), "Referer": f"{self.hub_url}/hub/"}
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        return self.session.request(method, f"{self.hub_url}/hub/api{path}", headers=headers,
                                    **{"timeout": self.timeout_s, **kwargs})

    def new_token(self) -> str:
        resp = self.hub_api("POST", f"/users/{self.name}/tokens", json={"note": "labkit hub client"})
        if resp.status_code not in (200, 201):
            raise HubClientError(f"{self.name}: no API token ({resp.status_code} {resp.text[:200]})")
        self.token = resp.json()["token"]
        return self.token

    def start_server(self, timeout_s: float = 240) -> float:
        """Ask the hub to start this learner's server and wait until it answers; returns seconds.
        Waited for as the hub's spawn page waits in a browser: on the server's progress stream
        (server-sent events), which says "ready" the moment the hub knows, with no polling that would
        add its own interval to every start and a request a second per learner to the hub's load."""
        t0 = time.monotonic()
        resp = self.hub_api("POST", f"/users/{self.name}/server")
        if resp.status_code not in (201, 202, 400):  # 400: already running
            raise HubClientError(f"{self.name}: server not started ({resp.status_code} {resp.text[:200]})")
        last = "no progress event"
        with self.hub_api("GET", f"/users/{self.name}/server/progress", stream=True,
                          timeout=(self.timeout_s, timeout_s)) as stream:
            if stream.status_code != 200:
                raise HubClientError(f"{self.name}: no progress stream ({stream.status_code} {stream.text[:200]})")
            for line in stream.iter_lines(decode_unicode=True):
                if not line or not line.startswith("data:"):
                    continue
                event = json.loads(line[len("data:"):])
                last = event.get("message") or last
                if event.get("ready"):
                    return time.monotonic() - t0
                if event.get("failed"):
                    raise HubClientError(f"{self.name}: the server stopped while starting: {last}")
                if time.monotonic() - t0 > timeout_s:
                    break
        raise HubClientError(f"{self.name}: server not ready after {time.monotonic() - t0:.0f} s ({last})")

    # -- the learner's server ---------------------------------------------------------------------
    def server_url(self, user: str | None = None) -> str:
        return f"{self.hub_url}/user/{user or self.name}"

    def server_api(self, method: str, path: str, user: str | None = None, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {self.token}"} if self.token else {}
        return requests.request(method, f"{self.server_url(user)}/api{path}", headers=headers,
                                timeout=self.timeout_s, allow_redirects=False, **kwargs)

    def start_kernel(self, user: str | None = None) -> str:
        resp = self.server_api("POST", "/kernels", user=user, json={"name": "python3"})
        if resp.status_code != 201:
            raise HubClientError(f"{self.name}: no kernel on {user or self.name}'s server ({resp.status_code})")
        return resp.json()["id"]

    def kernel(self, kernel_id: str, user: str | None = None) -> KernelSession:
        url = self.server_url(user).replace("http://", "ws://", 1) + f"/api/kernels/{kernel_id}/channels"
        ws = websocket.create_connection(url, header=[f"Authorization: token {self.token}"],
                                         timeout=self.timeout_s)
        return KernelSession(ws)

    def new_kernel(self) -> KernelSession:
        """A kernel of this learner's own that is shut down when the session closes (``with``): a
        learner's kernels share their memory, and one left idle holds its part of it."""
        kernel_id = self.start_kernel()
        session = self.kernel(kernel_id)
        session.on_close = lambda: self.server_api("DELETE", f"/kernels/{kernel_id}")
        return session


class KernelSession:
    """Execute code in a kernel through its websocket, one cell at a time."""

    def __init__(self, ws):
        self.ws = ws
        self.session = uuid.uuid4().hex
        self.on_close = None

    def close(self) -> None:
        self.ws.close()
        if self.on_close is not None:
            self.on_close()

    def __enter__(self) -> KernelSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def kernel_info(self, timeout_s: float = 300) -> dict:
        """Ask the kernel who it is and wait for its answer (the kernel has started once it answers, as
        JupyterLab takes it); returns the reply's content."""
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({"header": {"msg_id": msg_id, "username": "labkit", "session": self.session,
                                            "msg_type": "kernel_info_request", "version": "5.3", "date": ""},
                                 "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                                 "content": {}}))
        t0 = time.monotonic()
        while True:
            left = timeout_s - (time.monotonic() - t0)
            if left <= 0:
                raise HubClientError(f"no kernel_info reply in {timeout_s:.0f} s")
            self.ws.settimeout(max(1.0, left))
            reply = json.loads(self.ws.recv())
            if reply.get("parent_header", {}).get("msg_id") == msg_id and reply["msg_type"] == "kernel_info_reply":
                return reply["content"]

    def execute(self, code: str, timeout_s: float = 300, silent: bool = False) -> CellResult:
        """Run `code` and collect what it sends back. `silent`: as Jupyter's protocol means it, no
        output, no execution count, no history (a room's warm-up runs so in a learner's kernel)."""
        msg_id = uuid.uuid4().hex
        msg = {"header": {"msg_id": msg_id, "username": "labkit", "session": self.session,
                          "msg_type": "execute_request", "version": "5.3", "date": ""},
               "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
               "content": {"code": code, "silent": silent, "store_history": not silent, "user_expressions": {},
                           "allow_stdin": False, "stop_on_error": True}}
        result = CellResult(code)
        t0 = time.monotonic()
        self.ws.send(json.dumps(msg))
        idle = replied = False
        while not (idle and replied):
            if time.monotonic() - t0 > timeout_s:
                raise HubClientError(f"cell did not finish in {timeout_s:.0f} s: {code[:60]!r}")
            self.ws.settimeout(max(1.0, timeout_s - (time.monotonic() - t0)))
            reply = json.loads(self.ws.recv())
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = reply["msg_type"]
            content = reply["content"]
            if kind in ("stream", "execute_result", "display_data", "error"):
                if result.first_output_s is None:
                    result.first_output_s = time.monotonic() - t0
                if kind == "error":
                    result.error = content
                else:
                    result.outputs.append(content)
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
            elif kind == "execute_reply":
                replied = True
        result.seconds = time.monotonic() - t0
        return result


def notebook_cells(path) -> list[str]:
    """The code cells of a notebook, in order (magics and all: the kernel runs them as JupyterLab would)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and c.source.strip()]
