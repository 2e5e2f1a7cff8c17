"""A learner's side of the hub, over real HTTP: log in, start the server, run cells in a kernel.

What a browser does, without one: the login form (with its XSRF token), the hub's REST API to
start the server and get an API token, JupyterLab's REST API to start a kernel, and the kernel's
websocket (Jupyter's messaging protocol, JSON over ``/api/kernels/<id>/channels``) to execute
code and collect what it prints. tests/test_hub.py and scripts/bench_hub.py use it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

import requests
import websocket


class HubClientError(RuntimeError):
    pass


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
                                    timeout=self.timeout_s, **kwargs)

    def new_token(self) -> str:
        resp = self.hub_api("POST", f"/users/{self.name}/tokens", json={"note": "labkit hub client"})
        if resp.status_code not in (200, 201):
            raise HubClientError(f"{self.name}: no API token ({resp.status_code} {resp.text[:200]})")
        self.token = resp.json()["token"]
        return self.token

    def start_server(self, timeout_s: float = 240) -> float:
        """Ask the hub to start this learner's server and wait until it answers; returns seconds."""
        t0 = time.monotonic()
        resp = self.hub_api("POST", f"/users/{self.name}/server")
        if resp.status_code not in (201, 202, 400):  # 400: already running
            raise HubClientError(f"{self.name}: server not started ({resp.status_code} {resp.text[:200]})")
        while time.monotonic() - t0 < timeout_s:
            user = self.hub_api("GET", f"/users/{self.name}").json()
            server = (user.get("servers") or {}).get("", {})
            if server.get("ready"):
                return time.monotonic() - t0
            if not server.get("pending") and not server.get("ready") and time.monotonic() - t0 > 5:
                raise HubClientError(f"{self.name}: the server stopped while starting (hub log says why)")
            time.sleep(0.5)
        raise HubClientError(f"{self.name}: server not ready after {timeout_s:.0f} s")

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


class KernelSession:
    """Execute code in a kernel through its websocket, one cell at a time."""

    def __init__(self, ws):
        self.ws = ws
        self.session = uuid.uuid4().hex

    def close(self) -> None:
        self.ws.close()

    def execute(self, code: str, timeout_s: float = 300) -> CellResult:
        msg_id = uuid.uuid4().hex
        msg = {"header": {"msg_id": msg_id, "username": "labkit", "session": self.session,
                          "msg_type": "execute_request", "version": "5.3", "date": ""},
               "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
               "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
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
