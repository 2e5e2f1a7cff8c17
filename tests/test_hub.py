"""A room on one server, for real: `python -m labkit hub start` with 2 learners on this machine.

Real JupyterHub, real configurable-http-proxy (Node's where Node is, as in CI), real system users,
real HTTP and the kernels' websockets (labkit_room.client), real Chromium. Each learner logs in
through the login form, starts their server, and runs notebook 00's cells from their own student
edition in their own kernel, one of them after allocating past the room's memory limit; then the
learners' isolation from each other is checked against the running hub, each as the attack it
stops: a learner's page opened by the instructor and by the other learner in Chromium, tokens
read from every command line as another user, a file planted where the other's torch looks, a
noisy neighbour (busy processes, forks, memory, disk) beside the other's notebook 00, a learner
who ends their own server to listen on its port, a process that re-forks every millisecond when
the room closes. The room is closed with Ctrl-C (SIGINT) as an instructor would.

Teardown even on failure: the room fixture's finalizer stops the hub process and then removes,
by the room's mark, any user it left (labkit_room.accounts refuses users without that mark). Needs
root (it creates system users); without root it skips, saying so.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

if os.geteuid() != 0:
    pytest.skip("the hub test creates system users (one per learner) and needs root; CI runs it as root",
                allow_module_level=True)
pytest.importorskip("jupyterhub", reason="the room is not installed (pip install -e room/)")

import warnings  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

from other_user import command_lines, pids_ever, secrets_seen  # noqa: E402

import neighbour  # noqa: E402  (room/bench/, on the tests' path: pyproject.toml)
from labkit_room import (  # noqa: E402
    accounts,
    control,
    groups,
    learner_server,
    room,
    runtime,
    sandbox,
    view,
)
from labkit_room.client import HubClientError, Learner, RoomProcess, notebook_cells  # noqa: E402

# The learners' servers run as other users: they must reach the kit's packages. A checkout under a
# closed folder (/root is mode 0700) cannot be served to them; the hub refuses it with this reason.
_closed = next((p for p in runtime.site_dirs() + [str(Path(__file__).resolve().parents[1])]
                if runtime.first_unreachable(Path(p)) is not None), None)
if _closed is not None:
    pytest.skip(f"the learners' users cannot reach {_closed} ({runtime.first_unreachable(Path(_closed))} is closed to "
                "other users): run the hub test from a checkout and environment outside /root", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
if sandbox.hidden_by_private_folders(ROOT) and not sandbox.can_mount():
    pytest.skip(f"this checkout is under {sandbox.hidden_by_private_folders(ROOT)}, which each learner's server "
                "replaces with its own: the room refuses to start from here; run the hub test from a checkout "
                "elsewhere", allow_module_level=True)
# Two learners: each isolation check needs one learner and another to reach for; a third would
# add a server, a kernel and a user to start and remove, and check nothing the two do not.
LEARNERS = 2
# The smallest per-process limit a room allows with this machine's torch build
# (labkit_room.room.MIN_MEMORY_GIB, set from what a kernel was measured to need:
# room/labkit_room/data/kernel_memory.json), and the learner's memory that gives it.
MEMORY_GIB = room.min_memory_gib()
MEMORY = f"{MEMORY_GIB + room.SERVER_ALLOWANCE_GIB:g}G"
DISK = "256M"
LIMITS = room.limits_for(LEARNERS, memory=MEMORY, disk=DISK)
# Each kernel's share of a GPU's memory in this room, as the room gives it (the kit prints it).
SHARE = LIMITS.gpu_memory_fraction
START_PAGE = room.start_url(runtime.has_lab())  # JupyterLab on 00, or 00 as a file where there is no JupyterLab


def _cuda_here() -> bool:
    import torch

    return torch.cuda.is_available()


def _room_users() -> list[str]:
    return sorted(e.pw_name for e in pwd.getpwall() if e.pw_gecos.startswith(accounts.MARK_PREFIX))


def _log_in_and_start(hub) -> list[Learner]:
    """Each learner logged in over HTTP, with a token and a started server."""
    people = [Learner(hub.url, name, hub.passwords[name]) for name in room.learner_names(LEARNERS)]
    errors = []

    def up(person):
        try:
            person.login()
            person.new_token()
            person.start_server()
        except Exception as err:  # noqa: BLE001 (reported below, with the learner's name)
            errors.append(f"{person.name}: {err}")

    threads = [threading.Thread(target=up, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    return people


def _own_notebook_00(name: str) -> Path:
    return room_home(name) / room.LEARNER_FOLDER / room.START_NOTEBOOK


def room_home(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


def _run_notebook_00(person: Learner, before: tuple[str, ...] = ()) -> list:
    """A CellResult for each cell: `before`, then notebook 00's, in a new kernel of `person`'s."""
    kernel = person.new_kernel()
    try:
        return [kernel.execute(cell) for cell in [*before, *notebook_cells(_own_notebook_00(person.name))]]
    finally:
        kernel.close()


# What the greedy learner runs first: a buffer half again the room's limit.
HOARD = ("import labkit", f"hoard = bytearray({int(1.5 * MEMORY_GIB * 2**30)})")


def check_each_learner_runs_notebook_00_while_one_goes_past_the_memory_limit(hub, learners):
    """Both run notebook 00 in their own kernels at once; the greedy one first allocates past the
    room's memory limit, gets a clear MemoryError, and then runs notebook 00 in that same kernel, while
    the other runs theirs undisturbed (points 3 and 4 of the room: one run of notebook 00 each)."""
    greedy = learners[0]
    results, errors = {}, []

    def work(person):
        try:
            results[person.name] = _run_notebook_00(person, HOARD if person is greedy else ())
        except Exception as err:  # noqa: BLE001
            errors.append(f"{person.name}: {err}")

    threads = [threading.Thread(target=work, args=(p,)) for p in learners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors
    too_much = results[greedy.name][len(HOARD) - 1]
    assert too_much.error is not None and too_much.error["ename"] == "MemoryError", too_much.text()
    assert f"memory limit is {MEMORY_GIB:.1f} GiB" in too_much.text() and "other learners" in too_much.text()
    results[greedy.name] = results[greedy.name][len(HOARD):]  # its notebook 00, after the MemoryError
    assert sorted(results) == sorted(p.name for p in learners)
    for name, cells in results.items():
        failed = [(c.source[:60], c.error["ename"], c.error["evalue"]) for c in cells if c.error]
        assert not failed, f"{name}: {failed}"  # the greedy kernel lives on, and the other kept working
        described = cells[0].text()
        # The kernel applied the room's limits at its start and labkit.describe() names them (cell 1 prints it).
        # With CUDA the kernel holds itself to the share; without, it says the share holds nothing here.
        share = (f"gpu_memory_share: {SHARE:.3f} of each GPU's memory" if _cuda_here() else
                 f"gpu_memory_share: no GPU (LABKIT_GPU_MEMORY_FRACTION={SHARE:.3f} holds nothing here)")
        assert share in described, described
        assert (f"memory_limit: {LIMITS.memory_bytes / 2**30:.1f} GiB for all of this learner's processes (MEM_LIMIT), "
                f"{MEMORY_GIB:.1f} GiB per process") in described, described
        # The routing table of notebook 00 (an NBVAL_CHECK_OUTPUT cell) printed what the instructor run stored.
        assert any("live requests -> graph of" in c.text() for c in cells), name


def check_a_learner_opens_their_own_lab_on_notebook_00(hub, learners):
    person = learners[0]
    page = person.session.get(person.server_url() + "/", timeout=60)  # through the hub's OAuth, as a browser
    assert page.status_code == 200, (page.status_code, page.url, [r.url for r in page.history], page.text[:300])
    assert page.url == person.server_url() + START_PAGE, page.url
    if runtime.has_lab():
        assert "JupyterLab" in page.text
    else:  # a box without JupyterLab's web app (the GPU box) serves the learner's own notebook 00 as a file
        assert json.loads(page.text)["cells"], page.text[:300]
    folder = room_home(person.name) / room.LEARNER_FOLDER
    assert folder.stat().st_uid == pwd.getpwnam(person.name).pw_uid
    # A fresh student edition: the placeholders are there, the instructor's solutions are not.
    from labkit.workshop.editions.student import PLACEHOLDER_TAG, learner_name

    exercises = json.loads((folder / learner_name("07_exercises.ipynb")).read_text())
    tags = [t for c in exercises["cells"] for t in c.get("metadata", {}).get("tags", [])]
    assert PLACEHOLDER_TAG in tags and "solution" not in tags
    # The status bar's memory gauge reads the server's metrics against the learner's limit.
    metrics = person.server_api("GET", "/metrics/v1")
    assert metrics.status_code == 200, (metrics.status_code, metrics.text[:300])
    assert metrics.json()["limits"]["memory"]["rss"] == LIMITS.memory_bytes, metrics.text[:300]
    assert 0 < metrics.json()["rss"] < LIMITS.memory_bytes


def check_no_login_reaches_no_server(hub, learners):
    import requests

    target = learners[1].name
    for path in ("/api/kernels", "/api/contents", START_PAGE):
        resp = requests.get(f"{hub.url}/user/{target}{path}", timeout=30, allow_redirects=False)
        assert resp.status_code in (302, 403), (path, resp.status_code)
        if resp.status_code == 302:
            assert "/hub/" in resp.headers["Location"], resp.headers["Location"]
    followed = requests.get(f"{hub.url}/user/{target}{START_PAGE}", timeout=30)
    assert "/hub/login" in followed.url
    assert requests.get(f"{hub.url}/hub/api/users", timeout=30).status_code == 403


def check_a_learners_login_opens_nothing_of_another(hub, learners):
    import websocket

    a, b = learners[0], learners[1]
    b_kernel = b.start_kernel()
    # A's token: B's server's API, B's kernel's websocket, B's entry and server in the hub's API.
    for path in ("/kernels", f"/kernels/{b_kernel}", "/contents", "/sessions"):
        assert a.server_api("GET", path, user=b.name).status_code in (302, 403, 404), path
    assert a.server_api("POST", "/kernels", user=b.name, json={"name": "python3"}).status_code in (302, 403, 404)
    with pytest.raises((websocket.WebSocketBadStatusException, HubClientError)):
        a.kernel(b_kernel, user=b.name).execute("print('inside B')", timeout_s=20)
    for method, path in (("GET", f"/users/{b.name}"), ("DELETE", f"/users/{b.name}/server"),
                         ("POST", f"/users/{b.name}/tokens")):
        assert a.hub_api(method, path).status_code in (403, 404), (method, path)
    # A's cookie, as a browser would send it: B's start page does not open.
    page = a.session.get(f"{hub.url}/user/{b.name}{START_PAGE}", timeout=60)
    assert not (page.status_code == 200 and page.url.startswith(f"{hub.url}/user/{b.name}/")), page.url
    # A's password is not B's, and no password opens another's account.
    with pytest.raises(HubClientError):
        Learner(hub.url, b.name, a.password).login()
    with pytest.raises(HubClientError):
        Learner(hub.url, b.name, "").login()
    assert b.server_api("GET", f"/kernels/{b_kernel}").status_code == 200  # B still reaches it


def check_a_learners_kernel_cannot_touch_another_learners_files(hub, learners):
    a, b = learners[0], learners[1]
    b_home = room_home(b.name)
    assert stat.S_IMODE(b_home.stat().st_mode) == 0o700
    kernel = a.new_kernel()
    try:
        probe = kernel.execute(
            "import os\n"
            "def attempt(fn):\n"
            "    try:\n"
            "        fn(); return 'allowed'\n"
            "    except PermissionError:\n"
            "        return 'denied'\n"
            f"B = {str(b_home)!r}\n"
            f"print(os.getuid(), attempt(lambda: os.listdir(B)),\n"
            f"      attempt(lambda: open(B + '/{room.LEARNER_FOLDER}/{room.START_NOTEBOOK}').read()),\n"
            f"      attempt(lambda: open(B + '/from-a.txt', 'w').write('x')),\n"
            f"      attempt(lambda: open(os.path.expanduser('~/mine.txt'), 'w').write('x')))")
    finally:
        kernel.close()
    assert probe.error is None, probe.error
    uid, listing, reading, writing, own = probe.text().split()
    assert int(uid) == pwd.getpwnam(a.name).pw_uid != pwd.getpwnam(b.name).pw_uid
    assert (listing, reading, writing) == ("denied", "denied", "denied")
    assert own == "allowed"
    assert not (b_home / "from-a.txt").exists()


def _server_of(name: str) -> tuple[int, str]:
    """(pid, internal URL) of a learner's running server, read as root from its environment."""
    for pid in accounts.pids_of(pwd.getpwnam(name).pw_uid):
        try:
            raw = Path(f"/proc/{pid}/environ").read_text().split("\0")
            env = dict(item.split("=", 1) for item in raw if "=" in item)
        except OSError:
            continue
        command = Path(f"/proc/{pid}/cmdline").read_text()
        if "-m\0jupyterhub.singleuser" in command and "reaper.py" not in command and "JUPYTERHUB_SERVICE_URL" in env:
            return pid, env["JUPYTERHUB_SERVICE_URL"]
    raise AssertionError(f"no running server of {name}")


def check_a_learners_kernel_cannot_go_around_the_proxy(hub, learners):
    """From inside A's kernel: B's server on its own loopback port, B's processes' environment, the
    hub's secrets in A's environment."""
    a, b = learners[0], learners[1]
    pid, url = _server_of(b.name)
    kernel = a.new_kernel()
    try:
        probe = kernel.execute(
            "import os, urllib.request, urllib.error\n"
            "class NoRedirect(urllib.request.HTTPRedirectHandler):\n"
            "    def redirect_request(self, *args, **kwargs):\n"
            "        return None\n"
            "def status(url):\n"
            "    try:\n"
            "        return urllib.request.build_opener(NoRedirect).open(url, timeout=20).status\n"
            "    except urllib.error.HTTPError as err:\n"
            "        return err.code\n"
            "    except urllib.error.URLError:\n"
            "        return 'unreachable'\n"
            "def environ(pid):\n"
            "    try:\n"
            "        open(f'/proc/{pid}/environ').read(); return 'read'\n"
            "    except PermissionError:\n"
            "        return 'denied'\n"
            "secret = [k for k in os.environ if 'TOKEN' in k or 'SECRET' in k or 'PASSWORD' in k]\n"
            f"print(status({url + 'api/contents'!r}), status({url + 'api/kernels'!r}), environ({pid}),\n"
            "      ','.join(sorted(secret)))")
    finally:
        kernel.close()
    assert probe.error is None, probe.error
    contents, kernels, env, secret = probe.text().split()
    assert contents in ("302", "403", "unreachable") and kernels in ("302", "403", "unreachable"), probe.text()
    assert env == "denied", probe.text()
    # Only A's own API token (under its two names); no proxy token, cookie secret or password.
    assert set(secret.split(",")) <= {"JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN"}, secret


def check_only_the_instructor_reaches_the_admin_page(hub, learners):
    person = learners[-1]
    assert person.session.get(f"{hub.url}/hub/admin", timeout=30).status_code == 403
    instructor = Learner(hub.url, room.ADMIN_USER, hub.passwords[room.ADMIN_USER])
    instructor.login()
    admin = instructor.session.get(f"{hub.url}/hub/admin", timeout=30)
    assert admin.status_code == 200 and "/hub/admin" in admin.url
    # The idle culler runs as a hub service with the instructor's timeout (30 minutes here).
    instructor.new_token()
    services = instructor.hub_api("GET", "/services").json()
    culler = services["idle-culler"]
    assert "--timeout=1800" in " ".join(culler.get("command") or []), culler


VIEW = f"/services/{view.SERVICE_NAME}/"
# A learner's kernel posting to the view's socket by hand, as a learner trying to forge or read would.
FORGE = r"""
import json, os, socket
def post(body, token, path="/report", method="POST"):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(os.environ["LABKIT_ROOM_REPORT"])
    data = b"" if body is None else json.dumps(body).encode()
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: token {token}\r\n"
              f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    out = b""
    while chunk := s.recv(4096):
        out += chunk
    print(out.decode(errors="replace").split("\r\n")[0], out.decode(errors="replace").rsplit("\r\n", 1)[-1].strip())
"""


def _solution_cell(function: str) -> str:
    """The solution cell of notebook 07 (the instructor's edition) that defines `function`."""
    import re

    nb = json.loads((ROOT / "notebooks" / "07_exercises.ipynb").read_text())
    for cell in nb["cells"]:
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and "solution" in (cell.get("metadata", {}).get("tags") or []) \
                and re.search(rf"^def {function}\(", text, re.M):
            return text
    raise AssertionError(f"no solution cell defines {function}")


def _setup_cell_07(person: Learner) -> str:
    """The first cell of the learner's own notebook 07 that imports the checkers (as ex)."""
    (path,) = (room_home(person.name) / room.LEARNER_FOLDER).glob("*07_exercises.ipynb")
    return next(cell for cell in notebook_cells(path) if "checkers as ex" in cell)


def _board(instructor: Learner, hub) -> dict:
    resp = instructor.session.get(f"{hub.url}{VIEW}api/board", timeout=60)
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("application/json"), \
        (resp.status_code, resp.url, resp.text[:300])
    return {row["learner"]: row["cells"] for row in resp.json()["rows"]}


def _wait_for_board(instructor: Learner, hub, wanted, timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        board = _board(instructor, hub)
        if wanted(board) or time.monotonic() > deadline:
            return board
        time.sleep(0.5)


def check_the_instructor_sees_who_is_stuck_in_the_room_view(hub, learners):
    """The room view, as the room uses it: A fails exercise (a), reads a hint, solves it; B fails it
    twice; all through the real checkers in their own kernels. The instructor's board says so, and
    Chromium shows the instructor's page change, without a reload, when B solves it too. B cannot read
    the board (with their login or their token), cannot report for A (naming A, or with A's token
    leaked to them), and reads nothing through the reports' socket. The instructor collects A's
    folder as a zip download, never a page, without A's planted link."""
    from labkit.workshop.exercises import record
    from labkit.workshop.exercises.reveal import learner_names

    a, b = learners[0], learners[1]
    instructor = Learner(hub.url, room.ADMIN_USER, hub.passwords[room.ADMIN_USER])
    instructor.login()
    before = _board(instructor, hub)
    assert set(before) == {a.name, b.name}
    assert all(cell["state"] == "none" for row in before.values() for cell in row.values()), before
    check = record.exercise("a").check_name
    function = learner_names("a")[0]
    wrong = f"def {function}(*args):\n    raise ValueError('not yet')\n"
    ka, kb = a.new_kernel(), b.new_kernel()
    try:
        for kernel, person in ((ka, a), (kb, b)):
            done = kernel.execute(_setup_cell_07(person), timeout_s=600)
            assert done.error is None, done.text()
        assert "False" in ka.execute(f"print(bool(ex.{check}({{}})))").text()  # nothing defined yet: a try
        assert "Hint 1/" in ka.execute("ex.hint('a')").text()
        assert ka.execute(_solution_cell(function)).error is None
        assert "True" in ka.execute(f"print(bool(ex.{check}({function})))").text()
        assert kb.execute(wrong).error is None
        for _ in range(2):
            assert "False" in kb.execute(f"print(bool(ex.{check}({function})))").text()
        board = _wait_for_board(instructor, hub, lambda bd: bd[a.name]["a"]["state"] == "solved"
                                and bd[b.name]["a"]["tries"] == 2)
        assert (board[a.name]["a"]["state"], board[a.name]["a"]["hint"], board[a.name]["a"]["tries"]) == \
            ("solved", 1, 2), board[a.name]
        assert (board[b.name]["a"]["state"], board[b.name]["a"]["tries"]) == ("tried", 2), board[b.name]

        # B forges and reads: refused, one line each; the board unchanged.
        token_a = ka.execute("import os; print(os.environ['JUPYTERHUB_API_TOKEN'])").text().strip()
        assert token_a and kb.execute(FORGE).error is None
        naming_a = kb.execute(f"post({{'exercise': 'c', 'verdict': 'solved', 'learner': {a.name!r}}}, "
                              "os.environ['JUPYTERHUB_API_TOKEN'])").text()
        assert naming_a.startswith("HTTP/1.1 400") and "takes your name from your token" in naming_a, naming_a
        leaked = kb.execute(f"post({{'exercise': 'c', 'verdict': 'solved'}}, {token_a!r})").text()
        assert leaked.startswith("HTTP/1.1 403") and f"not {a.name}'s" in leaked, leaked
        for path in ("/api/board", "/report"):
            read = kb.execute(f"post(None, os.environ['JUPYTERHUB_API_TOKEN'], {path!r}, 'GET')").text()
            assert read.startswith(("HTTP/1.1 404", "HTTP/1.1 405")) and a.name not in read, read
        import requests

        for attempt in (b.session.get(f"{hub.url}{VIEW}api/board", timeout=60),
                        requests.get(f"{hub.url}{VIEW}api/board", timeout=60,
                                     headers={"Authorization": f"token {b.token}"}),
                        b.session.get(f"{hub.url}{VIEW}collect/{a.name}.zip", timeout=60)):
            assert attempt.status_code == 403 and a.name not in attempt.text, (attempt.status_code, attempt.url)
        after = _board(instructor, hub)
        assert after[a.name]["c"]["state"] == "none" and after[b.name]["c"]["state"] == "none", after

        # The instructor collects A's folder: a zip to save, with no link A planted in it.
        assert ka.execute("import os; os.symlink('/etc/passwd', os.path.expanduser("
                          f"'~/{room.LEARNER_FOLDER}/passwd-link'))").error is None
        got = instructor.session.get(f"{hub.url}{VIEW}collect/{a.name}.zip", timeout=120)
        assert got.status_code == 200, got.text[:300]
        assert got.headers["Content-Type"] == "application/zip"
        assert got.headers["Content-Disposition"].startswith(f'attachment; filename="{a.name}-')
        assert got.headers["X-Content-Type-Options"] == "nosniff"
        assert got.headers["Content-Security-Policy"] == "sandbox"
        import io
        import zipfile

        names = zipfile.ZipFile(io.BytesIO(got.content)).namelist()
        assert room.START_NOTEBOOK in names and "passwd-link" not in names, names

        _instructor_sees_b_solve_in_chromium(hub, kb, b, function, check)
    finally:
        ka.close()
        kb.close()


def _instructor_sees_b_solve_in_chromium(hub, kb, b: Learner, function: str, check: str) -> None:
    import room_browser

    missing = room_browser.missing_requirements()
    if missing:
        if os.environ.get("LABKIT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"the room view's browser check needs {', '.join(missing)}")
        warnings.warn(f"the room view's browser check did not run: this machine lacks {', '.join(missing)}",
                      stacklevel=2)
        return
    from playwright.sync_api import sync_playwright

    cell = f'tr[data-learner="{b.name}"] td[data-exercise="a"]'
    with sync_playwright() as playwright:
        chromium = room_browser.browser(playwright)
        try:
            context = chromium.new_context()
            tab = room_browser.log_in(context, hub.url, room.ADMIN_USER, hub.passwords[room.ADMIN_USER])
            violations: list[str] = []
            tab.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
            tab.goto(f"{hub.url}{VIEW}", timeout=60_000)
            tab.wait_for_selector(f'{cell}[data-state="tried"]', timeout=30_000)
            tab.evaluate("window.__same_page = true")
            assert kb.execute(_solution_cell(function)).error is None
            assert "True" in kb.execute(f"print(bool(ex.{check}({function})))").text()
            tab.wait_for_selector(f'{cell}[data-state="solved"]', timeout=30_000)
            assert tab.evaluate("window.__same_page") is True  # changed in place, no reload
            assert violations == [], violations
        finally:
            chromium.close()


def check_no_secret_lands_where_a_learner_reads(hub, learners):
    for name in ("hub.log", "credentials.txt", "passwords.json", "room.json"):
        path = hub.state / name
        info = path.stat()
        assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o600, (name, oct(info.st_mode))
    assert stat.S_IMODE(hub.state.stat().st_mode) == 0o700
    log = (hub.state / "hub.log").read_text()
    secrets = [p for p in hub.passwords.values()] + [p.token for p in learners]
    assert all(s and s not in log for s in secrets), "a password or token is in the hub's log"
    printed = "".join(hub.output)
    assert all(hub.passwords[n] in printed for n in hub.passwords)  # the logins went to the terminal


def _state(hub) -> dict:
    return json.loads((hub.state / "state.json").read_text())


def _hierarchy(hub) -> groups.Hierarchy:
    return groups.Hierarchy.from_json(_state(hub)["hierarchy"])


def check_the_room_says_what_this_box_enforces(hub, learners):
    """One line per limit at start, the same in the state folder; where this machine lets root make
    control groups (CI's does), memory, processes, CPU and the close are enforced by them."""
    enforced = json.loads((hub.state / "enforced.json").read_text())
    printed = " ".join("".join(hub.output).split())
    whats = [line["what"] for line in enforced]
    assert whats == ["memory", "processes", "CPU", "disk", "shared folders", "kernel sockets", "pages",
                     "server's parent", "close",
                     "GPU memory"], whats
    for line in enforced:
        said = ("enforced " if line["enforced"] else "NOT enforced ") + f"{line['what']}: {line['how']}"
        assert " ".join(said.split()) in printed, said
    if groups.detect().enforces:
        by_what = {line["what"]: line["enforced"] for line in enforced}
        assert all(by_what[w] for w in ("memory", "processes", "CPU", "close")), enforced


def check_each_learner_is_one_control_group(hub, learners):
    """Each learner's server (and so their kernels) in their own group, with the room's limits."""
    hierarchy = _hierarchy(hub)
    if not hierarchy.enforces:
        warnings.warn(f"no control groups on this machine ({hierarchy.why_not}): per-learner groups not checked",
                      stacklevel=2)
        return
    for person in learners:
        pid, _ = _server_of(person.name)
        assert pid in hierarchy.pids(hub.room_id, person.name), (person.name, pid)
        folders = hierarchy.folders(hub.room_id, person.name)
        if hierarchy.version == "v1":
            written = {"memory": (folders["memory"] / "memory.limit_in_bytes").read_text(),
                       "tasks": (folders["pids"] / "pids.max").read_text(),
                       "cpu": (folders["cpu"] / "cpu.shares").read_text()}
            want_cpu = groups.CPU_SHARES_V1
        else:
            group = folders["unified"]
            written = {"memory": (group / "memory.max").read_text(), "tasks": (group / "pids.max").read_text(),
                       "cpu": (group / "cpu.weight").read_text()}
            want_cpu = groups.CPU_WEIGHT_V2
        # v1 rounds a memory limit down to whole pages
        assert 0 <= LIMITS.memory_bytes - int(written["memory"]) < 4096 * 16, written
        assert int(written["tasks"]) == LIMITS.tasks and int(written["cpu"]) == want_cpu, written


def check_no_token_is_on_any_command_line(hub, learners):
    """Every secret of the room -- each server's and the culler's API token, the proxy's auth token,
    the cookie secret, each kernel's connection key, the learners' tokens and passwords -- read
    here as root, then every process's command line read as another user (nobody): none holds one.
    And no room process's environment, where the tokens are, is open to that user."""
    secret_names = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "CONFIGPROXY_AUTH_TOKEN", "JUPYTER_TOKEN")
    secrets = [*hub.passwords.values(), *(p.token for p in learners),
               (hub.state / "jupyterhub_cookie_secret").read_text().strip()]
    holders = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = dict(x.split("=", 1) for x in (entry / "environ").read_text().split("\0") if "=" in x)
        except OSError:
            continue
        found = [env[k] for k in secret_names if env.get(k)]
        if found:
            holders.append(int(entry.name))
            secrets += found
    for person in learners:
        runtime_dir = room_home(person.name) / ".local" / "share" / "jupyter" / "runtime"
        secrets += [json.loads(f.read_text())["key"] for f in runtime_dir.glob("kernel-*.json")]
    assert len(holders) >= LEARNERS + 2, holders  # the servers, the proxy and the culler at least
    assert secrets_seen(secrets) == []
    lines = command_lines()
    opened = [pid for pid in holders if pid in lines and lines[pid][1]]
    assert opened == [], f"another user reads the environment of {opened}"


def _plant(person: Learner, files: dict[str, str]) -> None:
    """Write `files` ({path under the home: text}) from the learner's own kernel."""
    kernel = person.new_kernel()
    try:
        done = kernel.execute("import os, json\n"
                              f"for path, text in json.loads({json.dumps(json.dumps(files))}).items():\n"
                              "    full = os.path.expanduser('~/' + path)\n"
                              "    os.makedirs(os.path.dirname(full), exist_ok=True)\n"
                              "    open(full, 'w').write(text)\n")
        assert done.error is None, done.text()
    finally:
        kernel.close()


def check_a_learners_page_runs_no_script_for_anyone(hub, learners):
    """The issue's attack, in Chromium: learner A writes a hostile page where a Jupyter server would
    serve it -- a user-level JupyterLab extension, a kernel spec, their notebook folder -- and the
    instructor and learner B open every address of it while logged in. The page reports to a sink
    outside the room at every step; the sink hears nothing (it does hear the same page served from
    an origin of its own), A is not made admin, the instructor gets no new token, B's files and
    kernels are as they were. A's own HTML does not run script even for A (the sandbox on every
    response but JupyterLab's page), and JupyterLab itself, under its policy, still runs a cell."""
    import room_browser

    missing = room_browser.missing_requirements()
    if missing:
        if os.environ.get("LABKIT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"the room's browser check needs {', '.join(missing)}")
        warnings.warn(f"the room's browser check did not run: this machine lacks {', '.join(missing)}", stacklevel=2)
        return
    from playwright.sync_api import sync_playwright

    a, b = learners[0], learners[1]
    instructor = Learner(hub.url, room.ADMIN_USER, hub.passwords[room.ADMIN_USER])
    instructor.login()
    instructor.new_token()
    tokens_before = _token_ids(instructor)
    kernels_before = sorted(k["id"] for k in b.server_api("GET", "/kernels").json())
    sink = room_browser.Sink()
    page = sink.page = sink.page_for(a.name, b.name, room.ADMIN_USER)
    _plant(a, {".local/share/jupyter/labextensions/evil/static/evil.html": page,
               ".local/share/jupyter/labextensions/evil/package.json": '{"name": "evil", "version": "1.0.0"}',
               ".local/share/jupyter/kernels/evil/kernel.json": '{"argv": ["true"], "display_name": "evil"}',
               ".local/share/jupyter/kernels/evil/evil.html": page,
               ".jupyter/custom/custom.js": page,
               f"{room.LEARNER_FOLDER}/evil.html": page})
    base = f"{hub.url}/user/{a.name}"
    addresses = [f"{base}/lab/extensions/evil/static/evil.html", f"{base}/kernelspecs/evil/evil.html",
                 f"{base}/custom/custom.js", f"{base}/files/evil.html", f"{base}/view/evil.html"]
    # Without a login, none of them serves the page (before the room turned user config off, the
    # first one did, to anyone).
    import requests

    for url in addresses:
        assert "a learner's page" not in requests.get(url, timeout=30).text, url
    seen = {}
    with sync_playwright() as playwright:
        chromium = room_browser.browser(playwright)
        try:
            heard = room_browser.calibrate(chromium, sink)
            assert any('"ran": "true"' in line for line in heard), heard  # where it may run, the sink hears it
            for person, password in ((room.ADMIN_USER, hub.passwords[room.ADMIN_USER]), (b.name, b.password),
                                     (a.name, a.password)):
                context = chromium.new_context()
                try:
                    tab = room_browser.log_in(context, hub.url, person, password)
                    # The instructor and B open every address; A, their own file (served, sandboxed).
                    for url in addresses if person != a.name else [f"{base}/files/evil.html"]:
                        seen[(person, url)] = room_browser.visit(tab, url)
                    if person == a.name:
                        _run_a_cell_in_jupyterlab(tab, a)
                finally:
                    context.close()
        finally:
            chromium.close()
    sink.close()
    assert sink.heard() == [], f"a learner's page ran script: {sink.heard()}"
    assert seen[(a.name, f"{base}/files/evil.html")] == 200, seen  # served to its owner, as a file
    assert a.hub_api("GET", f"/users/{a.name}").json().get("admin") is False
    assert _token_ids(instructor) == tokens_before
    assert not (room_home(b.name) / room.LEARNER_FOLDER / "pwned.txt").exists()
    assert sorted(k["id"] for k in b.server_api("GET", "/kernels").json()) == kernels_before
    # The headers that hold it: the sandbox on a learner's file, JupyterLab's own policy, and the hub's.
    own_file = a.session.get(f"{base}/files/evil.html", timeout=30)
    assert own_file.status_code == 200
    assert own_file.headers["Content-Security-Policy"] == learner_server.SANDBOXED_POLICY
    lab_page = a.session.get(f"{base}{START_PAGE}", timeout=60)
    assert lab_page.headers["Content-Security-Policy"] == learner_server.LAB_PAGE_POLICY, lab_page.headers
    login = requests.get(f"{hub.url}/hub/login", timeout=30)
    assert login.headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "frame-ancestors 'none'" in login.headers["Content-Security-Policy"]
    xsrf = [c for c in login.cookies if c.name == "_xsrf"]
    assert xsrf and all(c.has_nonstandard_attr("HttpOnly") for c in xsrf), login.headers.get("Set-Cookie")


def _token_ids(instructor: Learner) -> list[tuple[str, str]]:
    """(id, note) of every token the instructor holds."""
    tokens = instructor.hub_api("GET", f"/users/{room.ADMIN_USER}/tokens").json()["api_tokens"]
    return sorted((t["id"], t.get("note") or "") for t in tokens)


def _run_a_cell_in_jupyterlab(tab, person: Learner) -> None:
    """JupyterLab under the room's policy still works: open the learner's notebook 00 once its kernel
    is idle, Run All Cells, see what labkit.describe() prints; and no policy violation on the way."""
    if not runtime.has_lab():
        return
    violations = []
    tab.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    tab.goto(f"{person.server_url()}{START_PAGE}", timeout=120_000)
    tab.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell", timeout=180_000)
    deadline = time.monotonic() + 180

    def kernel_idle() -> bool:
        sessions = person.server_api("GET", "/sessions").json()
        return any(s["path"].endswith(room.START_NOTEBOOK) and s["kernel"]["execution_state"] == "idle"
                   for s in sessions)

    while not kernel_idle():
        assert time.monotonic() < deadline, "notebook 00's kernel did not start in JupyterLab"
        tab.wait_for_timeout(500)
    tab.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    entry = tab.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first
    entry.wait_for(state="visible", timeout=10_000)
    entry.click()
    tab.locator(".jp-OutputArea-output", has_text="gpu_memory_share").first.wait_for(timeout=300_000)
    assert violations == [], violations


def check_the_gpu_share_is_what_the_room_says(hub, learners):
    """On a GPU box the room says the GPU memory share is not enforced beyond a learner's reach (each
    kernel holds itself to it; no MIG instance per learner here): a learner's own code can lift it.
    The check makes the room's word true or fails: a kernel lifts its share and allocates past it."""
    import torch

    line = next(line for line in json.loads((hub.state / "enforced.json").read_text()) if line["what"] == "GPU memory")
    if not torch.cuda.is_available():
        assert line["enforced"] and "no NVIDIA GPU" in line["how"], line
        return
    assert not line["enforced"] and f"{SHARE:.3f}" in line["how"], line
    with learners[0].new_kernel() as kernel:
        lifted = kernel.execute(
            "import labkit, torch\n"
            "total = torch.cuda.get_device_properties(0).total_memory\n"
            f"past = int(total * {SHARE}) + 2**30\n"
            "try:\n"
            "    torch.empty(past, dtype=torch.uint8, device='cuda'); held = 'held'\n"
            "except torch.OutOfMemoryError:\n"
            "    held = 'refused'\n"
            "torch.cuda.empty_cache(); torch.cuda.set_per_process_memory_fraction(1.0)\n"
            "x = torch.empty(past, dtype=torch.uint8, device='cuda')\n"
            "print(held, 'lifted')\n")
    assert lifted.error is None and lifted.text().split() == ["refused", "lifted"], lifted.text()


def check_nothing_of_a_learner_is_shared(hub, learners):
    """A plants a pickle where B's torch.compile would look by default (/tmp/torchinductor_<B>) and
    writes a forged line into every file its kernel holds open; B's temporary and cache folders are
    in B's home and B does not see A's file; the hub's log holds no forged line, each learner's
    server writes to a log of its own."""
    a, b = learners[0], learners[1]
    forged = f"FORGED-{os.getpid()}-{time.monotonic_ns()}"
    kernel = a.new_kernel()
    try:
        done = kernel.execute(
            "import os, stat\n"
            f"os.makedirs('/tmp/torchinductor_{b.name}', exist_ok=True)\n"
            f"open('/tmp/torchinductor_{b.name}/evil.pkl', 'w').write('x')\n"
            "for fd in map(int, os.listdir('/proc/self/fd')):\n"
            "    try:\n"
            "        if stat.S_ISREG(os.fstat(fd).st_mode):\n"
            f"            os.write(fd, b'\\n{forged}\\n')\n"
            "    except OSError:\n"
            "        pass\n")
        assert done.error is None, done.text()
    finally:
        kernel.close()
    kernel = b.new_kernel()
    try:
        seen = kernel.execute(
            "import os, tempfile, json\n"
            f"print(json.dumps([os.path.exists('/tmp/torchinductor_{b.name}/evil.pkl'), tempfile.gettempdir(), "
            "os.environ.get('TORCHINDUCTOR_CACHE_DIR'), os.environ.get('TRITON_CACHE_DIR'), os.path.expanduser('~')]))")
    finally:
        kernel.close()
    planted, tmp, inductor, triton, home = json.loads(seen.text())
    assert planted is False
    assert all(path.startswith(home + "/") for path in (tmp, inductor, triton)), (tmp, inductor, triton, home)
    assert forged not in (hub.state / "hub.log").read_text()
    for person in learners:
        log = hub.state / "logs" / f"{person.name}.log"
        assert log.stat().st_uid == 0 and stat.S_IMODE(log.stat().st_mode) == 0o600, log
    assert "ServerApp" in (hub.state / "logs" / f"{b.name}.log").read_text()


def _timed_notebook_00(person: Learner) -> tuple[float, list]:
    t0 = time.monotonic()
    cells = _run_notebook_00(person)
    return time.monotonic() - t0, [(c.source[:60], c.error["ename"]) for c in cells if c.error]


def check_a_noisy_neighbour_leaves_the_other_learner_working(hub, learners):
    """B runs notebook 00 in an idle room, then again while A runs busy processes, fills memory past
    A's cap, fills /dev/shm and the home, and forks until refused (neighbour). B
    meets no failure; each of A's attempts stopped at A's own limit. B's time against the idle run
    is printed (the room's bench records it: python -m labkit hub bench --neighbour), not asserted:
    this machine's 2 cores are shared with other work."""
    a, b = learners[0], learners[1]
    idle_s, idle_errors = _timed_notebook_00(b)
    assert idle_errors == [], idle_errors
    home = room_home(a.name)
    out, stop = home / ".room" / "neighbour.json", home / ".room" / "neighbour.stop"
    kernel = a.new_kernel()
    try:
        started = kernel.execute(neighbour.start_cell(str(out), str(stop)))
        assert started.error is None, started.text()
    finally:
        kernel.close()
    pid = int(started.text().split()[-1])
    try:
        summary = neighbour.wait_for(out, pid, "holding", 300)
        usage = _hierarchy(hub).usage(hub.room_id, a.name)
        busy_s, busy_errors = _timed_notebook_00(b)
    finally:
        stop.touch()
    summary = neighbour.wait_for(out, pid, "ended", 60)
    print(f"\nB's notebook 00: {idle_s:.1f} s in an idle room, {busy_s:.1f} s beside the noisy neighbour "
          f"(x{busy_s / idle_s:.2f}); neighbour: {summary}; A's group then: {usage}")
    assert busy_errors == [], busy_errors
    assert summary["forks"]["refused"] and summary["forks"]["started"] < LIMITS.tasks, summary["forks"]
    assert any(code != 0 for code in summary["memory_process_exits"]), summary  # killed, or a MemoryError
    for fill in ("shm", "home"):
        assert summary[fill]["error"] and summary[fill]["bytes"] <= LIMITS.disk_bytes, (fill, summary[fill])
    if _hierarchy(hub).enforces:
        assert usage["tasks"] <= LIMITS.tasks and usage["oom_kills"] > 0, usage


def check_a_learner_cannot_replace_their_server(hub, learners):
    """A ends their own server from their kernel and listens on its port with a page of their own,
    in a process that outlives the kernel. A's page never reaches the hub's address: the kernel's
    network is its own. A's kernel cannot read the server's memory or environment either."""
    a = learners[0]
    pid, url = _server_of(a.name)
    port = urlsplit(url).port
    kernel = a.new_kernel()
    try:
        probe = kernel.execute(
            "import os, subprocess, sys\n"
            "def tried(path, mode):\n"
            "    try:\n"
            "        open(path, mode).read(1); return 'read'\n"
            "    except OSError as err:\n"
            "        return 'refused'\n"
            f"print(os.getppid() == {pid}, tried('/proc/{pid}/environ', 'r'), tried('/proc/{pid}/mem', 'rb'))\n"
            "replace = ('import os, signal, socket, time\\n'\n"
            f"           'time.sleep(1); os.kill({pid}, signal.SIGKILL); time.sleep(1)\\n'\n"
            "           's = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\\n'\n"
            f"           's.bind((\"127.0.0.1\", {port})); s.listen()\\n'\n"
            "           'while True:\\n'\n"
            "           '    c, _ = s.accept(); c.recv(65536)\\n'\n"
            "           '    c.sendall(b\"HTTP/1.0 200 OK\\\\r\\\\n\\\\r\\\\nREPLACED BY A\"); c.close()\\n')\n"
            "_replacer = subprocess.Popen([sys.executable, '-c', replace], start_new_session=True,\n"
            "                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n")
    finally:
        kernel.close()
    assert probe.error is None, probe.text()
    assert probe.text().split() == ["True", "refused", "refused"], probe.text()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and neighbour.running(pid):
        time.sleep(0.2)
    assert not neighbour.running(pid), "A's kernel could not end A's server"  # it may: the same user
    time.sleep(2)
    import requests

    for target in (f"{hub.url}/user/{a.name}/lab", f"{hub.url}/user/{a.name}/"):
        try:
            body = requests.get(target, timeout=30).text
        except requests.RequestException:
            body = ""
        assert "REPLACED BY A" not in body, target
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def _box_namespaces() -> dict[str, str]:
    return {kind: os.readlink(f"/proc/self/ns/{kind}") for kind in ("user", "net", "ipc")}


def check_each_kernel_has_namespaces_of_its_own_and_the_reaper_is_out_of_reach(hub, learners):
    """A's kernel is in a user, network and IPC namespace of its own (loopback alone: it can neither
    reach another's sockets nor listen on the box), on every box the room opens on; the reaper above
    A's server is root's, and nothing of A's may signal, trace or read it."""
    a = learners[0]
    server, _url = _server_of(a.name)
    reaper = int(Path(f"/proc/{server}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert Path(f"/proc/{reaper}").stat().st_uid == 0 and "reaper.py" in Path(f"/proc/{reaper}/cmdline").read_text()
    with a.new_kernel() as kernel:
        probe = kernel.execute(
            "import ctypes, json, os, signal, socket\n"
            "def tried(step):\n"
            "    try:\n"
            "        step(); return 'allowed'\n"
            "    except OSError:\n"
            "        return 'refused'\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"print(json.dumps([{{k: os.readlink(f'/proc/self/ns/{{k}}') for k in ('user', 'net', 'ipc')}},\n"
            "    sorted(n for _, n in socket.if_nameindex()),\n"
            f"    tried(lambda: os.kill({reaper}, signal.SIGTERM)),\n"
            f"    tried(lambda: open('/proc/{reaper}/environ').read()),\n"
            f"    'allowed' if libc.ptrace(16, {reaper}, 0, 0) == 0 else 'refused']))")
    assert probe.error is None, probe.text()
    namespaces, interfaces, signalled, environ, traced = json.loads(probe.text().strip().splitlines()[-1])
    box = _box_namespaces()
    assert all(namespaces[k] != box[k] for k in box), (namespaces, box)
    assert interfaces == ["lo"], interfaces
    assert (signalled, environ, traced) == ("refused", "refused", "refused")
    assert neighbour.running(reaper)


def _may_raise_priority() -> bool:
    """Whether root may raise a process's priority on this box (tried in a child)."""
    return subprocess.run([sys.executable, "-c", f"import os; os.setpriority(os.PRIO_PROCESS, 0, {room.HUB_NICE})"],
                          capture_output=True, timeout=60).returncode == 0


def check_the_room_runs_ahead_of_its_learners_and_they_cannot_catch_up(hub, learners):
    """The hub, and its proxy with it, run at room.HUB_NICE where root may raise a priority (so 30
    learners starting at once do not slow every page through them); A's server and kernel run at the
    box's default, and A's kernel cannot raise its own."""
    hub_pid = _state(hub)["hub_pid"]
    proxy = [pid for pid, _start in control._children_of(hub_pid)
             if "proxy" in Path(f"/proc/{pid}/cmdline").read_text()]
    wanted = room.HUB_NICE if _may_raise_priority() else 0
    assert proxy and [os.getpriority(os.PRIO_PROCESS, pid) for pid in [hub_pid, *proxy]] == [wanted] * (1 + len(proxy))
    a = learners[0]
    server, _url = _server_of(a.name)
    assert os.getpriority(os.PRIO_PROCESS, server) == 0
    with a.new_kernel() as kernel:
        probe = kernel.execute("import os\nprint(os.getpriority(os.PRIO_PROCESS, 0))\n"
                               "try:\n    os.setpriority(os.PRIO_PROCESS, 0, -1); print('raised')\n"
                               "except OSError:\n    print('refused')")
    assert probe.error is None and probe.text().split() == ["0", "refused"], probe.text()


def check_the_instructor_never_opens_a_learners_server(hub, learners):
    """A signs a notebook whose output would run script; the instructor, who could once open any
    server through JupyterHub's admin access, cannot open A's at all, nor make A admin, nor take a
    token in A's name: the instructor's role has the admin page and no more."""
    a = learners[0]
    instructor = Learner(hub.url, room.ADMIN_USER, hub.passwords[room.ADMIN_USER])
    instructor.login()
    instructor.new_token()
    assert instructor.session.get(f"{hub.url}/hub/admin", timeout=30).status_code == 200
    for path in (START_PAGE, "/api/contents", "/files/" + room.START_NOTEBOOK):
        page = instructor.session.get(f"{hub.url}/user/{a.name}{path}", timeout=60)
        assert not (page.status_code == 200 and page.url.startswith(f"{hub.url}/user/{a.name}/")), (path, page.url)
    assert instructor.server_api("GET", "/contents", user=a.name).status_code in (302, 403, 404)
    assert instructor.hub_api("PATCH", f"/users/{a.name}", json={"admin": True}).status_code == 403
    assert instructor.hub_api("POST", f"/users/{a.name}/tokens", json={"note": "x"}).status_code in (403, 404)
    assert a.hub_api("GET", f"/users/{a.name}").json()["admin"] is False
    users = instructor.hub_api("GET", "/users")
    assert users.status_code == 200 and {u["name"] for u in users.json()} >= {p.name for p in learners}


def check_a_learners_own_config_changes_nothing_and_the_kit_is_not_theirs_to_write(hub, learners):
    """A writes ~/.jupyter/labconfig/page_config.json (what JupyterLab's page would run with) and a
    server config: A's lab page carries none of it. Nothing in the kit's checkout, its environment
    included (.venv/.lock), is writable by A's kernel."""
    a = learners[0]
    with a.new_kernel() as kernel:
        planted = kernel.execute(
            "import json, os\n"
            "d = os.path.expanduser('~/.jupyter/labconfig'); os.makedirs(d, exist_ok=True)\n"
            "json.dump({'labkitPlantedByA': 'yes', 'disabledExtensions': {'@jupyterlab/apputils-extension': True}},\n"
            "          open(d + '/page_config.json', 'w'))\n"
            "open(os.path.expanduser('~/.jupyter/jupyter_server_config.json'), 'w').write(\n"
            "    json.dumps({'ServerApp': {'terminals_enabled': True}}))\n"
            f"root = {str(ROOT)!r}\n"
            "writable = []\n"
            "for top, dirs, files in os.walk(root):\n"
            "    dirs[:] = [d for d in dirs if d != '.git' or top != root]\n"
            "    paths = [os.path.join(top, n) for n in dirs + files]\n"
            "    writable += [p for p in paths if not os.path.islink(p) and os.access(p, os.W_OK)]\n"
            "print(json.dumps(writable[:20]))")
    assert planted.error is None, planted.text()
    assert json.loads(planted.text().strip().splitlines()[-1]) == [], planted.text()
    if runtime.has_lab():
        page = a.session.get(a.server_url() + "/lab", timeout=60)
        assert page.status_code == 200 and "JupyterLab" in page.text, page.status_code
        assert "labkitPlantedByA" not in page.text, "A's page_config.json reached A's lab page"


def check_a_swapped_private_folder_is_refused_and_a_link_is_not_followed(hub, learners):
    """A swaps ~/.room/tmp for a link to B's folder (and ~/.room for a link to B's), and leaves links
    and a hard link among their notebooks for the close to copy: A's server does not start over a
    swapped folder, saying why in one line; the instructor's log names A. A's own folders back, it
    starts."""
    a, b = learners[0], learners[1]
    b_folder = room_home(b.name) / room.LEARNER_FOLDER
    with a.new_kernel() as kernel:
        planted = kernel.execute(
            "import os\n"
            "room = os.path.expanduser('~/.room')\n"
            "os.rename(room + '/tmp', room + '/tmp-mine')\n"
            f"os.symlink({str(b_folder)!r}, room + '/tmp')\n"
            f"lab = os.path.expanduser('~/{room.LEARNER_FOLDER}')\n"
            f"os.symlink({str(b_folder / room.START_NOTEBOOK)!r}, lab + '/b-00.ipynb')\n"
            f"os.symlink({str(b_folder)!r}, lab + '/b-folder')\n"
            "open(lab + '/mine.txt', 'w').write('A wrote this')\n"
            "os.link(lab + '/mine.txt', lab + '/mine-again.txt')\n")
    assert planted.error is None, planted.text()
    assert a.hub_api("DELETE", f"/users/{a.name}/server").status_code in (202, 204)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and a.hub_api("GET", f"/users/{a.name}").json()["servers"]:
        time.sleep(0.5)
    home = room_home(a.name)
    for swap in ("tmp", ".room"):
        if swap == ".room":  # the whole folder above, a link to B's
            (home / ".room" / "tmp").unlink()
            (home / ".room").rename(home / ".room-mine")
            (home / ".room").symlink_to(room_home(b.name) / ".room")
        started = a.hub_api("POST", f"/users/{a.name}/server")
        assert started.status_code >= 400, (swap, started.status_code, started.text[:300])
        message = started.json().get("message", "")
        assert "refused" in message and "\n" not in message, (swap, message)
        assert not _servers_of(a.name), swap
    log = (hub.state / "hub.log").read_text()
    assert f"refused {a.name}'s server" in log
    (home / ".room").unlink()
    (home / ".room-mine").rename(home / ".room")
    (home / ".room" / "tmp-mine").rename(home / ".room" / "tmp")
    a.start_server()
    with a.new_kernel() as kernel:
        assert kernel.execute("print(1)").error is None


def _servers_of(name: str) -> list[int]:
    uid = pwd.getpwnam(name).pw_uid
    return [pid for pid in accounts.pids_of(uid) if "jupyterhub.singleuser" in Path(f"/proc/{pid}/cmdline").read_text()]


def check_a_fork_and_exit_load_leaves_the_room_open(hub, learners):
    """B's processes fork and exit by the thousand for 20 s, below the hub the room watches: the room
    stays open (once, a process that went between two reads of it closed the room, deleting every
    learner's home)."""
    b = learners[1]
    with b.new_kernel() as kernel:
        storm = ("import os, random, time\n"
                 "end, alive = time.monotonic() + 20, 0\n"
                 "while time.monotonic() < end:\n"
                 "    if alive >= 24:\n"
                 "        os.wait(); alive -= 1\n"
                 "    try:\n"
                 "        if os.fork() == 0:\n"
                 "            time.sleep(random.uniform(0.002, 0.01)); os._exit(0)\n"
                 "        alive += 1\n"
                 "    except OSError:\n"
                 "        time.sleep(0.001)\n")
        started = kernel.execute(
            "import subprocess, sys\n"
            f"_storm = [subprocess.Popen([sys.executable, '-c', {storm!r}]) for _ in range(4)]\n")
        assert started.error is None, started.text()
        # The kernel stays open meanwhile: ipykernel ends its children when it shuts down.
        uid, seen, deadline = pwd.getpwnam(b.name).pw_uid, set(), time.monotonic() + 22
        while time.monotonic() < deadline:
            seen |= pids_ever(uid)
            time.sleep(0.2)
    assert len(seen) > 500, f"the load did not run: {len(seen)} pids of B seen"
    assert hub.proc.poll() is None, "".join(hub.output[-20:])
    assert not any("closing the room" in line for line in hub.output), "".join(hub.output[-20:])
    assert all(room_home(p.name).is_dir() for p in learners)


def _ipc_of(uids) -> list[str]:
    """System V IPC objects on the box's table that `uids` own or made, read here from /proc."""
    found = []
    for kind in ("shm", "sem", "msg"):
        header, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        for row in rows:
            fields = dict(zip(header.split(), row.split(), strict=False))
            if {int(fields["uid"]), int(fields["cuid"])} & set(uids):
                found.append(f"{kind} {row.split()[1]}")
    return found


def check_a_learners_ipc_is_their_kernels_own(hub, learners):
    """A's kernel makes System V shared memory: it lives in the kernel's IPC namespace, never in the
    box's table, where another learner (or a later room's learner given A's uid) would find it."""
    a = learners[0]
    with a.new_kernel() as kernel:
        made = kernel.execute("import ctypes\nlibc = ctypes.CDLL(None)\nprint(libc.shmget(0, 4096, 0o1000 | 0o600))")
    assert made.error is None and int(made.text().split()[-1]) >= 0, made.text()
    uid = pwd.getpwnam(a.name).pw_uid
    assert _ipc_of([uid]) == [], "A's segment is in the box's IPC namespace"


def check_a_reforking_process_runs_when_the_room_closes(hub, learners):
    """B leaves a process that forks a new copy of itself and exits, every millisecond: killing its
    pids one by one never catches it. The close must (check_ctrl_c_closes_the_room_and_leaves_nothing)."""
    b = learners[1]
    with b.new_kernel() as kernel:
        started = kernel.execute(
            "import subprocess, sys\n"
            "code = ('import os, time\\nwhile True:\\n    try:\\n        if os.fork(): os._exit(0)\\n'\n"
            "        '    except OSError:\\n        pass\\n    time.sleep(0.001)\\n')\n"
            "_reforking = subprocess.Popen([sys.executable, '-c', code], start_new_session=True)\n"
            # Its first process ends at its first fork: from then on no process of it is the kernel's
            # child, which ipykernel would end as the kernel shuts down (a slow start once lost it so).
            "print('first fork', _reforking.wait(timeout=120))\n")
        assert started.error is None and "first fork 0" in started.text(), started.text()
    uid = pwd.getpwnam(b.name).pw_uid
    time.sleep(1)
    first = pids_ever(uid)
    # New pids within seconds: a fork refused for a moment (B's ended processes not yet read by the reaper
    # on a busy box) leaves it on one pid until the next one succeeds.
    deadline = time.monotonic() + 15
    while not pids_ever(uid) - first and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids_ever(uid) - first, f"the re-forking process is not re-forking; B's processes: {_described(first)}"


def _described(pids) -> list[str]:
    """Each pid's state and command, as /proc has them now (for a failure's message)."""
    out = []
    for pid in sorted(pids):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
            out.append(f"{pid} {' '.join(state)} {command}")
        except OSError:
            out.append(f"{pid} gone")
    return out


# What a learner's process on the box's IPC namespace would leave (a room on a box without IPC
# namespaces, or one of an earlier kit): a segment, a semaphore set and a queue, made here as B.
_MAKE_IPC = ("import ctypes, sys\nlibc = ctypes.CDLL(None)\n"
             "ids = [libc.shmget(0, 4096, 0o1000 | 0o600), libc.semget(0, 1, 0o1000 | 0o600),"
             " libc.msgget(0, 0o1000 | 0o600)]\nprint(*ids)\nsys.exit(min(ids) < 0)")


def check_ctrl_c_closes_the_room_and_leaves_nothing(hub, learners):
    uids = [pwd.getpwnam(p.name).pw_uid for p in learners]
    homes = [room_home(p.name) for p in learners]
    spec = json.loads((hub.state / "room.json").read_text())  # the learners' Python, which B may run
    ipc = subprocess.run([spec["learner_python"], "-c", _MAKE_IPC], user=uids[1], group=uids[1], extra_groups=[],
                         cwd="/", capture_output=True, text=True, timeout=60, env=spec["learner_env"])
    assert ipc.returncode == 0 and _ipc_of([uids[1]]), ipc.stderr
    hub.proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any("closing the room" in line for line in hub.output):
        time.sleep(0.1)
    hub.proc.send_signal(signal.SIGINT)  # an impatient second Ctrl-C does not cut the teardown short
    assert hub.close() == 0, "".join(hub.output[-20:])
    assert any("still closing the room" in line for line in hub.output), "".join(hub.output[-20:])
    assert f"closed: removed {LEARNERS} learner(s)" in "".join(hub.output)
    assert not any(accounts.exists(p.name) for p in learners)
    assert not any(h.exists() for h in homes)
    assert not any(accounts.pids_of(uid) for uid in uids)
    assert _ipc_of(uids) == [], "a learner's IPC object outlived the close"
    # Each learner's work, saved before their home went, where the guide says: links and hard links left out.
    room_id = json.loads((hub.state / "state.json").read_text())["room_id"]
    saved = hub.state.with_name(hub.state.name + "-work") / room_id
    for person in learners:
        assert (saved / person.name / room.START_NOTEBOOK).is_file(), sorted(saved.glob("*/*"))
    a_saved = saved / learners[0].name
    assert not [p for p in a_saved.rglob("*") if p.is_symlink()]
    assert not (a_saved / "b-00.ipynb").exists() and not (a_saved / "b-folder").exists()
    assert not (a_saved / "mine.txt").exists()  # two links to it: either name might have been another's
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700 and saved.parent.stat().st_uid == 0
    assert any(f"saved {learners[0].name}'s work" in line for line in hub.output)
    seen = {uid: pids_ever(uid) for uid in uids}
    time.sleep(1)
    assert not any(pids_ever(uid) - seen[uid] for uid in uids), "a learner's process still forks after the close"
    leftovers = subprocess.run("getent passwd | grep -iE 'learner|jupyter-' || true", shell=True,
                               capture_output=True, text=True).stdout
    assert leftovers == ""
    hub_pid = json.loads((hub.state / "state.json").read_text())["hub_pid"]
    assert hub_pid == 0
    for name in ("credentials.txt", "passwords.json"):
        assert not (hub.state / name).exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", hub.port), timeout=2).close()
    hierarchy = _hierarchy(hub)
    assert not any(folder.exists() for folder in hierarchy.folders(hub.room_id).values()), "a group is left"
    return uids


def check_an_idle_server_is_culled_and_a_killed_hub_still_leaves_nothing(tmp_path, earlier_uid: int):
    """A second room of one, with the shortest idle timeout a room takes (10 s): its learner does not
    get `earlier_uid` back while a file of that uid is left in a shared folder (planted here, as a
    room that was killed could leave one); the idle culler stops the learner's unused server. Then
    its JupyterHub dies (SIGKILL) under it: closing the room still ends the proxy and the culler the
    hub had started (each in a session of its own), and the user."""
    leftover = Path("/var/tmp") / f"labkit-test-leftover-{os.getpid()}"
    leftover.write_text("left by a learner of an earlier room")
    os.chown(leftover, earlier_uid, earlier_uid)
    small = RoomProcess(tmp_path / "state-killed", 1, "--memory", MEMORY, "--disk", DISK, "--idle-timeout",
                        f"{room.MIN_IDLE_TIMEOUT_S / 60:.3f}", cwd=ROOT)
    try:
        passwords = small.wait_open()
        person = Learner(small.url, room.learner_names(1)[0], passwords[room.learner_names(1)[0]])
        uid = pwd.getpwnam(person.name).pw_uid
        assert uid != earlier_uid, "a new learner got the uid that still owns a file in /var/tmp"
        leftover.unlink()
        person.login()
        person.new_token()
        person.start_server()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and person.hub_api("GET", f"/users/{person.name}").json()["servers"]:
            time.sleep(2)
        assert person.hub_api("GET", f"/users/{person.name}").json()["servers"] == {}, "the idle server was not culled"
        assert not accounts.pids_of(uid), "the culled server's processes are still running"
        hub_pid = json.loads((small.state / "state.json").read_text())["hub_pid"]
        below = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _is_below(int(p.name), hub_pid)]
        assert len(below) >= 2, below  # the proxy and the culler, at least
        os.kill(hub_pid, signal.SIGKILL)
    finally:
        small.close()
    assert not accounts.exists(person.name) and not accounts.pids_of(uid)
    assert not [pid for pid in below if Path(f"/proc/{pid}").exists()], "a process the hub started is still running"


def _is_below(pid: int, ancestor: int) -> bool:
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid == ancestor:
            return True
    return False


CHECKS = [check_the_room_says_what_this_box_enforces, check_each_learner_is_one_control_group,
          check_each_learner_runs_notebook_00_while_one_goes_past_the_memory_limit,
          check_a_learner_opens_their_own_lab_on_notebook_00,
          check_no_login_reaches_no_server, check_a_learners_login_opens_nothing_of_another,
          check_a_learners_kernel_cannot_touch_another_learners_files,
          check_a_learners_kernel_cannot_go_around_the_proxy, check_only_the_instructor_reaches_the_admin_page,
          check_the_instructor_sees_who_is_stuck_in_the_room_view,
          check_no_secret_lands_where_a_learner_reads, check_no_token_is_on_any_command_line,
          check_a_learners_page_runs_no_script_for_anyone, check_the_gpu_share_is_what_the_room_says,
          check_nothing_of_a_learner_is_shared,
          check_each_kernel_has_namespaces_of_its_own_and_the_reaper_is_out_of_reach,
          check_the_room_runs_ahead_of_its_learners_and_they_cannot_catch_up,
          check_the_instructor_never_opens_a_learners_server,
          check_a_learners_own_config_changes_nothing_and_the_kit_is_not_theirs_to_write,
          check_a_learners_ipc_is_their_kernels_own,
          check_a_fork_and_exit_load_leaves_the_room_open,
          check_a_noisy_neighbour_leaves_the_other_learner_working,
          check_a_swapped_private_folder_is_refused_and_a_link_is_not_followed,
          # last before the close: one ends a learner's server, the other leaves a process for the close
          check_a_learner_cannot_replace_their_server, check_a_reforking_process_runs_when_the_room_closes]


def test_a_room_of_two_learners_on_a_real_hub(tmp_path):
    """One hub for the whole file's checks, in one test so that any test scheduler (xdist's
    worksteal in make test) keeps them in one process, in order; each check names what failed."""
    before = _room_users()
    if before:
        pytest.fail(f"users of an earlier room are still on this machine: {before} (python -m labkit hub stop)")
    # Started with SIGINT ignored, as a child of a launcher or test worker that ignores it inherits it:
    # Ctrl-C must close the room all the same (hub start installs its own handler).
    inherited = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        hub = RoomProcess(tmp_path / "state", LEARNERS, "--memory", MEMORY, "--disk", DISK, "--idle-timeout", "30",
                          cwd=ROOT)
    finally:
        signal.signal(signal.SIGINT, inherited)
    try:
        hub.wait_open()
        learners = _log_in_and_start(hub)
        for check in CHECKS:
            t0 = time.monotonic()
            check(hub, learners)
            print(f"{check.__name__}: {time.monotonic() - t0:.1f} s", flush=True)  # where the test's time goes
        uids = check_ctrl_c_closes_the_room_and_leaves_nothing(hub, learners)
        check_an_idle_server_is_culled_and_a_killed_hub_still_leaves_nothing(tmp_path, min(uids))
    finally:
        hub.close()
        for name in _room_users():  # only users carrying a room's mark; remove_learner checks it again
            mark = pwd.getpwnam(name).pw_gecos
            accounts.remove_learner(name, mark.removeprefix(accounts.MARK_PREFIX))
    assert _room_users() == []


def _in_a_few_minutes() -> list[str]:
    """--session-start for three minutes from now, where that is still today."""
    later = time.localtime(time.time() + 180)
    return [] if later.tm_yday != time.localtime().tm_yday else ["--session-start", time.strftime("%H:%M", later)]


def test_a_warm_room_has_each_learners_kernel_ready_on_notebook_00_and_culls_from_the_session(tmp_path):
    """hub start --warm: before anyone logs in, the learner's server runs and a kernel on notebook 00
    has the kit imported, silently (the learner's first cell is still [1]); the warm-up's token
    reaches the learners and no one else; the culler waits for the session's start."""
    if _room_users():
        pytest.fail(f"users of an earlier room are still on this machine: {_room_users()}")
    hub = RoomProcess(tmp_path / "state", 1, "--memory", MEMORY, "--disk", DISK, "--warm", *_in_a_few_minutes(),
                      cwd=ROOT)
    try:
        hub.wait_open(timeout_s=600)
        assert any("warmed 1 of 1 learner(s)" in line for line in hub.output), "".join(hub.output[-20:])
        person = Learner(hub.url, room.learner_names(1)[0], hub.passwords[room.learner_names(1)[0]])
        person.login()
        person.new_token()
        sessions = person.server_api("GET", "/sessions").json()
        assert [s["path"] for s in sessions] == [room.START_NOTEBOOK], sessions
        probe = "import sys\nprint('labkit' in sys.modules, 'torch' in sys.modules, get_ipython().execution_count)"
        with person.kernel(sessions[0]["kernel"]["id"]) as kernel:
            warm = kernel.execute(probe)
        with person.new_kernel() as kernel:  # a kernel as a learner's first cell meets it unwarmed
            cold = kernel.execute(probe)
        assert warm.error is None and cold.error is None, (warm.text(), cold.text())
        # The kit is there, and the warm-up left no trace in the count a learner's first cell shows.
        assert warm.text().split() == ["True", "True", cold.text().split()[2]], (warm.text(), cold.text())
        token = json.loads((hub.state / "room.json").read_text())["warmer_token"]
        import requests

        def as_warmer(path):
            return requests.get(f"{hub.url}/hub/api{path}", headers={"Authorization": f"token {token}"}, timeout=30)

        assert as_warmer(f"/users/{person.name}").status_code == 200
        assert as_warmer(f"/users/{room.ADMIN_USER}").status_code in (403, 404)
        if _in_a_few_minutes():
            log = (hub.state / "hub.log").read_text()
            assert "culling starts at the session's start" in log, log[-2000:]
    finally:
        hub.close()
    assert not _room_users()


def test_the_guard_refuses_a_user_the_room_did_not_create(tmp_path):
    # root exists on every machine and carries no room's mark: the guard must refuse it.
    with pytest.raises(accounts.AccountError, match="refusing"):
        accounts.remove_learner("root", "0")
    with pytest.raises(accounts.AccountError, match="refusing"):
        accounts.create_learner("root", "0", 0)
    # A learner's name without this room's mark (made here by hand, as another tool might): refused too.
    name = room.learner_names(room.MAX_LEARNERS)[-1]
    if accounts.exists(name):
        pytest.skip(f"{name} exists on this machine already; the guard test needs that name free")
    subprocess.run(["useradd", "--no-create-home", "--comment", "someone else", name], check=True)
    try:
        with pytest.raises(accounts.AccountError, match="not created by this room"):
            accounts.remove_learner(name, "0")
        assert accounts.exists(name)
    finally:
        subprocess.run(["userdel", name], check=True)
