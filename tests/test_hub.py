"""A room on one server, for real: `python -m labkit hub start` with 2 learners on this machine.

Real JupyterHub, real configurable-http-proxy (Node's where Node is, as in CI), real system users,
real HTTP and the kernels' websockets (labkit.classroom.client). Each learner logs in through the login
form, starts their server, and runs notebook 00's cells from their own student edition in their
own kernel, one of them after allocating past the room's memory limit; then the learners'
isolation from each other is checked against the running hub, and the room is closed with
Ctrl-C (SIGINT) as an instructor would.

Teardown even on failure: the room fixture's finalizer stops the hub process and then removes,
by the room's mark, any user it left (labkit.classroom.accounts refuses users without that mark). Needs
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
import threading
import time
from pathlib import Path

import pytest

if os.geteuid() != 0:
    pytest.skip("the hub test creates system users (one per learner) and needs root; CI runs it as root",
                allow_module_level=True)
pytest.importorskip("jupyterhub", reason="the hub extra is not installed (pip install -e '.[hub]')")

from labkit.classroom import (
    accounts,  # noqa: E402
    room,  # noqa: E402
    runtime,  # noqa: E402
)
from labkit.classroom.client import HubClientError, Learner, RoomProcess, notebook_cells  # noqa: E402

# The learners' servers run as other users: they must reach the kit's packages. A checkout under a
# closed folder (/root is mode 0700) cannot be served to them; the hub refuses it with this reason.
_closed = next((p for p in runtime.site_dirs() + [str(Path(__file__).resolve().parents[1])]
                if runtime.first_unreachable(Path(p)) is not None), None)
if _closed is not None:
    pytest.skip(f"the learners' users cannot reach {_closed} ({runtime.first_unreachable(Path(_closed))} is closed to "
                "other users): run the hub test from a checkout and environment outside /root", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
# Two learners: each isolation check needs one learner and another to reach for; a third would
# add a server, a kernel and a user to start and remove, and check nothing the two do not.
LEARNERS = 2
# The smallest per-process limit a room allows with this machine's torch build
# (labkit.classroom.room.MIN_MEMORY_GIB, set from what a kernel was measured to need:
# labkit/data/hub/kernel_memory.json), and the learner's memory that gives it.
MEMORY_GIB = room.min_memory_gib()
MEMORY = f"{MEMORY_GIB + room.SERVER_ALLOWANCE_GIB:g}G"
DISK = "256M"
LIMITS = room.limits_for(LEARNERS, memory=MEMORY, disk=DISK)
# Each kernel's share of a GPU's memory in this room, as the room gives it (the kit prints it).
SHARE = LIMITS.gpu_memory_fraction
START_PAGE = room.start_url(runtime.has_lab())  # JupyterLab on 00, or 00 as a file where there is no JupyterLab


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
    kernel = person.kernel(person.start_kernel())
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
        assert f"gpu_memory_share: {SHARE:.3f}" in described, described
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
    kernel = a.kernel(a.start_kernel())
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
        if "jupyterhub.singleuser" in Path(f"/proc/{pid}/cmdline").read_text() and "JUPYTERHUB_SERVICE_URL" in env:
            return pid, env["JUPYTERHUB_SERVICE_URL"]
    raise AssertionError(f"no running server of {name}")


def check_a_learners_kernel_cannot_go_around_the_proxy(hub, learners):
    """From inside A's kernel: B's server on its own loopback port, B's processes' environment, the
    hub's secrets in A's environment."""
    a, b = learners[0], learners[1]
    pid, url = _server_of(b.name)
    kernel = a.kernel(a.start_kernel())
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


def check_ctrl_c_closes_the_room_and_leaves_nothing(hub, learners):
    uids = [pwd.getpwnam(p.name).pw_uid for p in learners]
    homes = [room_home(p.name) for p in learners]
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
    leftovers = subprocess.run("getent passwd | grep -iE 'learner|jupyter-' || true", shell=True,
                               capture_output=True, text=True).stdout
    assert leftovers == ""
    hub_pid = json.loads((hub.state / "state.json").read_text())["hub_pid"]
    assert hub_pid == 0
    for name in ("credentials.txt", "passwords.json"):
        assert not (hub.state / name).exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", hub.port), timeout=2).close()


def check_an_idle_server_is_culled_and_a_killed_hub_still_leaves_nothing(tmp_path):
    """A second room of one, with the shortest idle timeout a room takes (10 s): the idle culler
    stops the learner's unused server. Then its JupyterHub dies (SIGKILL) under it: closing the room
    still ends the proxy and the culler the hub had started (each in a session of its own), and the user."""
    small = RoomProcess(tmp_path / "state-killed", 1, "--memory", MEMORY, "--disk", DISK, "--idle-timeout",
                         f"{room.MIN_IDLE_TIMEOUT_S / 60:.3f}", cwd=ROOT)
    try:
        passwords = small.wait_open()
        person = Learner(small.url, room.learner_names(1)[0], passwords[room.learner_names(1)[0]])
        person.login()
        person.new_token()
        person.start_server()
        uid = pwd.getpwnam(person.name).pw_uid
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


CHECKS = [check_each_learner_runs_notebook_00_while_one_goes_past_the_memory_limit,
          check_a_learner_opens_their_own_lab_on_notebook_00,
          check_no_login_reaches_no_server, check_a_learners_login_opens_nothing_of_another,
          check_a_learners_kernel_cannot_touch_another_learners_files,
          check_a_learners_kernel_cannot_go_around_the_proxy, check_only_the_instructor_reaches_the_admin_page,
          check_no_secret_lands_where_a_learner_reads]


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
            check(hub, learners)
        check_ctrl_c_closes_the_room_and_leaves_nothing(hub, learners)
        check_an_idle_server_is_culled_and_a_killed_hub_still_leaves_nothing(tmp_path)
    finally:
        hub.close()
        for name in _room_users():  # only users carrying a room's mark; remove_learner checks it again
            mark = pwd.getpwnam(name).pw_gecos
            accounts.remove_learner(name, mark.removeprefix(accounts.MARK_PREFIX))
    assert _room_users() == []


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
