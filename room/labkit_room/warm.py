"""A room warmed before the session: every learner's server started, and a kernel for their first
notebook with the kit already imported, so that a learner's first cell needs no server start, no
kernel start and no ``import torch``.

    warm_room(hub_url, token, names) -> {name: Warmed}    what `hub start --warm` runs once the hub is open

The room's own service token (a ``warmer`` service of the hub, whose role reaches the learners'
servers and no one else's) starts each server through the hub's REST API, opens a session on
notebook 00 through the server's sessions API (the session JupyterLab finds and reuses when the
learner opens that notebook), and runs :data:`WARM_CODE` in its kernel silently: no output, no
execution count, nothing in the notebook. A few learners at a time (:func:`parallel_default`): the
room opens minutes before the session, and 30 kernels importing torch at once would only queue on
the cores.

The culler would stop a warmed server once it has been idle for the room's timeout; with
``--session-start HH:MM`` the room starts culling at the session's start, and first marks every
server active then (room/labkit_room/culler.py).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from labkit_room import room

# What notebook 00's first cell needs and takes longest to load: the kit, and with it torch and the
# backend choice (Triton's interpreter on a CPU, the GPU's runtime on a GPU), and matplotlib, which
# its `%matplotlib inline` imports (the kernel's default backend is that same inline one; 0.4 s of a
# warm first cell alone, 2 s with 8 learners on 2 cores, measured by the hub bench's split).
WARM_CODE = "import labkit\nimport matplotlib.pyplot"


@dataclass
class Warmed:
    name: str
    server_s: float | None = None
    kernel_s: float | None = None
    kernel_id: str | None = None
    error: str | None = None


def parallel_default() -> int:
    """Learners warmed at a time: half the cores (each warm-up is a server start, then one process
    importing torch), at least 1, at most 8."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cores // 2))


def warm_learner(hub_url: str, token: str, name: str, notebook: str = room.START_NOTEBOOK) -> Warmed:
    """Start `name`'s server, open a session on `notebook`, import the kit in its kernel (silently)."""
    from labkit_room.client import HubClientError, Learner

    as_room = Learner(hub_url, name, password="")
    as_room.token = token
    warmed = Warmed(name)
    try:
        warmed.server_s = round(as_room.start_server(), 2)
        t0 = time.monotonic()
        resp = as_room.server_api("POST", "/sessions", json={"path": notebook, "name": notebook, "type": "notebook",
                                                             "kernel": {"name": "python3"}})
        if resp.status_code not in (200, 201):
            raise HubClientError(f"no session on {notebook} ({resp.status_code} {resp.text[:200]})")
        warmed.kernel_id = resp.json()["kernel"]["id"]
        with as_room.kernel(warmed.kernel_id) as kernel:
            result = kernel.execute(WARM_CODE, timeout_s=600, silent=True)
        if result.error:
            raise HubClientError(f"{WARM_CODE!r} failed: {result.error.get('ename')}: {result.error.get('evalue')}")
        warmed.kernel_s = round(time.monotonic() - t0, 2)
    except (HubClientError, OSError, ValueError, KeyError) as err:
        warmed.error = f"{type(err).__name__}: {err}"[:300]
    return warmed


def warm_room(hub_url: str, token: str, names: list[str], parallel: int | None = None, log=print) -> dict[str, Warmed]:
    """Warm every learner in `names`, `parallel` at a time, printing progress; {name: Warmed}."""
    parallel = parallel or parallel_default()
    started = time.monotonic()
    done: dict[str, Warmed] = {}
    log(f"warming {len(names)} learner(s), {parallel} at a time: server, kernel on {room.START_NOTEBOOK}, "
        f"{WARM_CODE!r} ...")
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(warm_learner, hub_url, token, name) for name in names]
        for future in as_completed(futures):
            warmed = future.result()
            done[warmed.name] = warmed
            state = (f"FAILED: {warmed.error}" if warmed.error else
                     f"server {warmed.server_s:.1f} s, kernel and kit {warmed.kernel_s:.1f} s")
            log(f"   {len(done):>2}/{len(names)} {warmed.name}: {state}")
    failed = [w.name for w in done.values() if w.error]
    log(f"warmed {len(names) - len(failed)} of {len(names)} learner(s) in {time.monotonic() - started:.0f} s"
        + (f"; not warmed (they start cold): {', '.join(sorted(failed))}" if failed else ""))
    return done
