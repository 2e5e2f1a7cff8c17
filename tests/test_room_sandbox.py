"""A learner's sandbox piece by piece, without a hub: private shared folders in a mount namespace,
a tmpfs home that refuses past its size, what a removed learner owned swept from the shared folders
(links removed, never followed), a uid that owns anything never handed out, a learner with a
re-forking process removed whole, the priority a server starts at, the lines the room prints of what
a box enforces, the policy a learner's server puts on each response, a kernel that listens on no TCP
port, and the room's bad settings answered in one line. The parts that make users or mounts need
root and skip otherwise, saying so."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest
from other_user import pids_ever
from room_kernel_session import room_kernel

from labkit_room import accounts, enforcement, groups, learner_server, room, sandbox

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="makes mounts or users: needs root (CI runs as root)")
_MOUNTS = sandbox.can_mount() if os.geteuid() == 0 else "not root"
CAN_MOUNT = pytest.mark.skipif(bool(_MOUNTS), reason=f"root may not mount here: {_MOUNTS}")


@ROOT_ONLY
@CAN_MOUNT
def test_a_servers_shared_folders_are_its_learners_own(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    sandbox.make_private_folders(home, 0, 0)
    name = f"labkit-private-{os.getpid()}"
    code = (f"from labkit_room import sandbox; from pathlib import Path\n"
            f"sandbox.enter_private_folders(Path({str(home)!r}), 0)\n"
            f"for shared in ('/tmp', '/var/tmp', '/dev/shm'):\n"
            f"    Path(shared, {name!r}).write_text('mine')\n"
            f"print(sorted(p.name for p in Path('/tmp').iterdir()))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.replace("'", '"')) == [name]  # the box's /tmp is not in view
    for shared in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not Path(shared, name).exists()  # nothing reached the box's folder
        assert (sandbox.private_folder(home, shared) / name).read_text() == "mine"


@ROOT_ONLY
@CAN_MOUNT
def test_a_tmpfs_home_refuses_past_its_size_and_goes_with_its_files(tmp_path):
    home = tmp_path / "learner"
    sandbox.mount_home(home, 4 * 2**20, 65534, 65534)
    try:
        assert os.path.ismount(home) and oct(home.stat().st_mode)[-3:] == "700" and home.stat().st_uid == 65534
        assert sandbox.private_folder(home, "/tmp").is_dir()
        with pytest.raises(OSError, match="No space left"):
            (home / "fill").write_bytes(bytes(8 * 2**20))
    finally:
        assert sandbox.unmount_home(home)
    assert not os.path.ismount(home) and not (home / "fill").exists()


@ROOT_ONLY
def test_what_a_removed_uid_owned_leaves_the_shared_folders_and_nothing_else_does(tmp_path):
    shared = tmp_path / "tmp"
    (shared / "theirs" / "deep").mkdir(parents=True)
    (shared / "theirs" / "deep" / "f").write_text("x")
    (shared / "others").mkdir()
    (shared / "others" / "theirs.txt").write_text("x")
    (shared / "others" / "kept.txt").write_text("x")
    outside = tmp_path / "outside.txt"
    outside.write_text("root's, kept")
    (shared / "others" / "link").symlink_to(outside)
    uid = 4242424
    for path in (shared / "theirs", shared / "theirs" / "deep", shared / "theirs" / "deep" / "f",
                 shared / "others" / "theirs.txt"):
        os.chown(path, uid, uid)
    os.lchown(shared / "others" / "link", uid, uid)
    removed = accounts.remove_owned({uid}, folders=[str(shared)])
    assert sorted(p.name for p in removed) == ["link", "theirs", "theirs.txt"]
    assert (shared / "others" / "kept.txt").exists() and outside.read_text() == "root's, kept"
    (shared / "left").write_text("x")
    os.chown(shared / "left", uid, uid)
    assert uid in accounts.owned_ids(folders=[str(shared)], home_root=tmp_path / "no-home")


def test_a_file_that_goes_while_the_shared_folders_are_walked_is_passed_over(tmp_path, monkeypatch):
    """Other work writes and deletes in /tmp while a room closes (a test run, a build): an entry
    listed and gone before it is looked at is skipped, not an error that stops the close."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    for name in ("gone", "kept"):
        (shared / name).write_text("x")
    listed = os.scandir

    def listing_then_deleting(folder):
        entries = list(listed(folder))
        if Path(folder) == shared:
            (shared / "gone").unlink()  # between the listing and the look at each entry
        return iter(entries)

    monkeypatch.setattr(os, "scandir", listing_then_deleting)
    assert accounts.remove_owned({4242424}, folders=[str(shared)]) == []
    (shared / "gone").write_text("x")
    assert os.getuid() in accounts.owned_ids(folders=[str(shared)], home_root=tmp_path / "no-home")


def test_a_new_learner_never_gets_a_uid_that_owns_something():
    taken = {e.pw_uid for e in pwd.getpwall()}
    first = accounts.free_id(set())
    assert first not in taken
    assert accounts.free_id({first}) != first  # a uid that owns a file is passed over


@ROOT_ONLY
def test_a_learner_with_a_reforking_process_is_removed_whole(tmp_path):
    name = room.learner_names(room.MAX_LEARNERS)[-2]
    if accounts.exists(name) or (accounts.HOME_ROOT / name).exists():
        pytest.skip(f"{name} exists on this machine already; this test needs that name free")
    uid = accounts.free_id(accounts.owned_ids())
    account = accounts.create_learner(name, "test", uid)
    try:
        assert pwd.getpwnam(name).pw_uid == uid and oct(account.home.stat().st_mode)[-3:] == "700"
        code = ("import os, time\nwhile True:\n    try:\n        if os.fork(): os._exit(0)\n    except OSError:\n"
                "        pass\n    time.sleep(0.001)\n")
        subprocess.Popen(["/bin/sh", "-c", f"exec python3 -c '{code}'"], user=uid, group=uid, extra_groups=[],
                         cwd="/", start_new_session=True).wait()
        seen = pids_ever(uid)
        time.sleep(0.5)
        assert pids_ever(uid) - seen, "the re-forking process does not re-fork"  # new pids: it lives on
        assert accounts.remove_learner(name, "test")
        seen = pids_ever(uid)
        time.sleep(1)
        assert not pids_ever(uid) - seen, "a process of the removed learner still forks"
    finally:
        if accounts.exists(name):
            accounts.remove_learner(name, "test")
    assert not accounts.exists(name) and not accounts.pids_of(uid) and not account.home.exists()


def _limits():
    return room.limits_for(2, memory="3G", host_memory=8 * 2**30, cores=2, build="cpu")


@ROOT_ONLY
def test_a_learners_server_starts_at_the_default_priority_though_the_hub_runs_ahead(tmp_path):
    """The spawner's step in the hub's child (sandbox.enter) puts the hub's priority, room.HUB_NICE,
    back to the box's default: the learner's server and kernels never run ahead of the others. The
    guide says the hub's priority as the room sets it."""
    guide = " ".join((Path(__file__).resolve().parents[1] / "docs" / "INSTRUCTOR_GUIDE.md").read_text().split())
    assert f"(nice {room.HUB_NICE}, where the box lets root raise a priority)" in guide
    plan = sandbox.Plan(room_id="test", learner="nobody", home=str(tmp_path), private_folders=False,
                        hierarchy=groups.Hierarchy("none", why_not="a test").to_json(),
                        process_bytes=2**40, tasks=4096, file_bytes=2**40)
    pid = os.fork()
    if pid == 0:  # the hub's child, as the spawner forks it
        try:
            try:
                os.setpriority(os.PRIO_PROCESS, 0, room.HUB_NICE)
            except OSError:
                os._exit(3)  # this box does not let root raise a priority
            sandbox.enter(plan)
            os._exit(10 + os.getpriority(os.PRIO_PROCESS, 0))
        except BaseException:
            os._exit(2)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code == 3:
        pytest.skip("root may not raise a priority on this box: the hub runs at the default, as the learners")
    assert code == 10, code


def test_the_room_says_in_one_line_each_what_a_box_enforces():
    full = enforcement.survey(_limits(), groups.Hierarchy("v1", ("memory", "pids", "cpu", "freezer")), "", "", "",
                              "http://127.0.0.1:8000", False)
    assert [line.what for line in full] == ["memory", "processes", "CPU", "disk", "shared folders", "kernel sockets",
                                           "pages", "server's parent", "close", "GPU memory"]
    assert all(line.enforced for line in full) and all("\n" not in line.text() for line in full)
    bare = {line.what: line for line in enforcement.survey(
        _limits(), groups.Hierarchy("none", why_not="not root"), "mounts refused here", "Operation not permitted",
        "GPU 0: NVIDIA H200 (UUID: GPU-x)", "http://127.0.0.1:8000", False)}
    assert not bare["memory"].enforced and "RLIMIT_DATA" in bare["memory"].how
    assert bare["processes"].enforced and "RLIMIT_NPROC" in bare["processes"].how
    assert not bare["CPU"].enforced and not bare["disk"].enforced and not bare["shared folders"].enforced
    assert not bare["pages"].enforced and "--domain" not in bare["pages"].how and "--subdomains" in bare["pages"].how
    assert not bare["GPU memory"].enforced and "0.450" in bare["GPU memory"].how
    assert bare["GPU memory"].text().startswith("  NOT enforced")
    subdomains = {line.what: line for line in enforcement.survey(
        _limits(), groups.Hierarchy("v2", ("memory", "pids", "cpu")), "", "refused", "", "https://room.example.org",
        True)}
    assert subdomains["pages"].enforced and "origin of its own" in subdomains["pages"].how


def test_a_learners_server_sandboxes_every_response_but_jupyterlabs_page():
    pytest.importorskip("jupyterlab_server", reason="JupyterLab's server is not installed here (the lab extra): "
                        "its page is the one response the policy tells apart")
    from jupyter_server.base.handlers import APIHandler, AuthenticatedFileHandler, FileFindHandler
    from jupyterlab_server.handlers import LabHandler

    class Lab(LabHandler):
        def __init__(self):  # a handler without a request: only its class matters to the policy
            pass

    assert learner_server.policy_for(Lab()) == learner_server.LAB_PAGE_POLICY
    for cls in (APIHandler, AuthenticatedFileHandler, FileFindHandler):
        assert learner_server.policy_for(cls.__new__(cls)) == learner_server.SANDBOXED_POLICY
    assert "allow-scripts" not in learner_server.SANDBOXED_POLICY
    assert "allow-popups" not in learner_server.LAB_PAGE_POLICY

    class Handler:
        headers: dict = {}

        def set_default_headers(self):
            self.headers = {"Content-Security-Policy": "frame-ancestors 'none'"}

        def set_header(self, name, value):
            self.headers[name] = value

    assert learner_server.sandbox_every_response(Handler) and not learner_server.sandbox_every_response(Handler)
    handler = Handler()
    handler.set_default_headers()
    assert handler.headers["Content-Security-Policy"] == learner_server.SANDBOXED_POLICY


def _listening_tcp_inodes(pid: int | str = "self") -> set[str]:
    """Listening TCP sockets in the network `pid` runs on (the kernel's own, in a room)."""
    inodes = set()
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def test_a_rooms_kernel_listens_on_no_tcp_port(tmp_path, monkeypatch):
    """ipykernel's pipe for forked processes' output is a unix socket in the room: no other user can
    send it frames to hold (over TCP anyone on the box could), not even on the kernel's own
    loopback. The kernel starts as the room starts it: through its launcher, with ipc channels."""
    pytest.importorskip("ipykernel", reason="the room's kernel is ipykernel's (the lab extra)")
    from labkit_room import kernel_launcher, runtime

    monkeypatch.setenv("JUPYTER_PATH", str(runtime.room_kernel_spec(tmp_path, sys.executable,
                                                                     Path(kernel_launcher.__file__))))
    with room_kernel(tmp_path) as session:
        session.run("import os\nif os.fork() == 0:\n    print('from a forked child'); os._exit(0)\nos.wait()")
        pid = session.pid
        listening = _listening_tcp_inodes(pid)
        sockets = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
                   if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")}
    assert "from a forked child" in "".join(session.printed)  # the pipe still carries the child's output
    assert not sockets & listening, "the kernel listens on a TCP port"


@pytest.mark.parametrize("args,words", [
    (["--public-url", "ftp://x"], "--public-url"),
    (["--subdomains", "--public-url", "https://10.0.0.5"], "needs a name"),
    (["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"], "no such file"),
    (["--tls-cert", "/etc/hostname"], "go together"),
    (["--disk", "2G", "--memory", "3G"], "half of it at most"),
    (["--processes", "4"], "between 16 and 100000"),
    (["--processes", "many"], "must be a number"),
])
def test_bad_room_settings_are_one_line_and_exit_2(monkeypatch, capsys, args, words):
    from labkit.__main__ import main
    from labkit_room import control

    def started(*_args, **_kwargs):
        raise AssertionError("the room went on to start")

    monkeypatch.setattr(control, "_require_root", lambda what: None)
    monkeypatch.setattr(control.Room, "load", started)  # the first step past the settings' checks
    assert main(["hub", "start", "--learners", "2", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and words in err and "Traceback" not in err, err


def test_subdomains_give_each_learner_an_origin_and_lock_the_hubs_cookies(tmp_path):
    from test_hub_values import _one_box_config

    https = _one_box_config(tmp_path, 2, subdomains=True, public_url="https://room.example.org",
                            bind_url="http://127.0.0.1:8000")
    assert https.JupyterHub.subdomain_host == "https://room.example.org"
    assert https.JupyterHub.cookie_host_prefix_enabled is True
    one_origin = _one_box_config(tmp_path, 2)
    assert "subdomain_host" not in one_origin.JupyterHub
    assert one_origin.Spawner.disable_user_config is True
    assert one_origin.JupyterHub.tornado_settings["xsrf_cookie_kwargs"] == {"httponly": True}
    assert one_origin.JupyterHub.tornado_settings["headers"]["Cross-Origin-Opener-Policy"] == "same-origin"
    # The server under the kit's reaper, each Python reading nothing of the learner's (-P -s); the reaper,
    # root, nothing of the environment's nor any site-packages (-I -S).
    python, reaper = one_origin.Spawner.cmd[0], Path(__file__).resolve().parents[1] / "room/labkit_room/reaper.py"
    assert one_origin.Spawner.cmd == [python, "-I", "-S", str(reaper), "--",
                                      python, "-P", "-s", "-m", "jupyterhub.singleuser"]
    assert "--ServerApp.terminals_enabled=False" in one_origin.Spawner.args
    assert room.addresses("127.0.0.1", 8000) == ("http://127.0.0.1:8000", "http://127.0.0.1:8000")


def test_a_path_under_a_shared_folder_is_named_as_hidden_from_a_learners_server(tmp_path):
    assert sandbox.hidden_by_private_folders(Path("/tmp/a/checkout/build/hub-runtime")) == "/tmp"
    assert sandbox.hidden_by_private_folders(Path("/opt/labkit/build/hub-runtime")) is None
