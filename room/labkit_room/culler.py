"""The room's idle culler, from the session's start: a hub service that waits until then, marks every
running server active at that moment, and becomes jupyterhub-idle-culler.

A room warmed before the session (``hub start --warm --session-start HH:MM``) has servers nobody has
used yet; culled by their idleness, they would stop before the learners sit down. So culling starts
at the session's start, and counts idleness from there. Without ``--not-before`` in the past the
culler starts at once, as it would alone.

Run as a script by the hub (a managed service: JUPYTERHUB_API_URL and JUPYTERHUB_API_TOKEN come
from the hub), never imported by the kit; it needs the standard library alone (importing the kit
would import torch)::

    python .../room/labkit_room/culler.py --not-before EPOCH -- --timeout=1800 --cull-every=300
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from datetime import datetime, timezone


def _api(method: str, path: str, body: dict | None = None):
    request = urllib.request.Request(
        os.environ["JUPYTERHUB_API_URL"].rstrip("/") + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"token {os.environ['JUPYTERHUB_API_TOKEN']}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read().decode()
    return json.loads(text) if text else None


def mark_running_servers_active() -> list[str]:
    """Set the last activity of every running server (and its user) to now; the users marked."""
    now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    marked = []
    for user in _api("GET", "/users?state=active") or []:
        servers = {name: {"last_activity": now} for name in (user.get("servers") or {})}
        if servers:
            _api("POST", f"/users/{user['name']}/activity", {"last_activity": now, "servers": servers})
            marked.append(user["name"])
    return marked


def main(argv: list[str]) -> int:
    not_before = 0.0
    if argv[:1] == ["--not-before"]:
        not_before, argv = float(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    wait = not_before - time.time()
    if wait > 0:
        print(f"culling starts at the session's start, in {wait / 60:.0f} min", flush=True)
        time.sleep(wait)
        marked = mark_running_servers_active()
        print(f"the session starts: {len(marked)} server(s) marked active now; culling from here", flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "jupyterhub_idle_culler", *argv])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
