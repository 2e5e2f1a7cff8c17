"""Past one box: the Zero to JupyterHub values and the GPU time-slicing config that
room/deploy/ ships parse, are labkit_room.room's rendering, and name the same image,
limits and start notebook as the one-box hub's own JupyterHub configuration
(room/labkit_room/jupyterhub_config.py, loaded here as JupyterHub loads it); only the learners log
in, each with their own password, through the room's authenticator mounted into the chart's hub
(never the chart's default DummyAuthenticator). No root needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
from traitlets.config import Config  # noqa: E402

from labkit_room import cli, groups, room  # noqa: E402
from labkit_room.limits import GPU_SHARE_ENV  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "room" / "deploy" / "z2jh-values.yaml"
SLICING = ROOT / "room" / "deploy" / "nvidia-time-slicing.yaml"


def _one_box_config(tmp_path, learners: int, **changes) -> Config:
    """The one-box hub's configuration for a room of `learners`, as labkit_room.control starts it."""
    limits = room.limits_for(learners, host_memory=learners * 8 * 2**30, cores=learners)
    spec = {"state_dir": str(tmp_path), "room_id": "r1", "learners": room.learner_names(learners),
            "bind_url": "http://127.0.0.1:8000", "public_url": "http://127.0.0.1:8000", "subdomains": False,
            "tls": {"cert": None, "key": None}, "hub_port": 8081, "proxy_api_port": 8001,
            "proxy_command": ["configurable-http-proxy"], "learner_python": "python3", "hub_python": "python3",
            "limits": limits.to_json(), "hierarchy": groups.Hierarchy("none").to_json(), "private_folders": False,
            "log_dir": str(tmp_path), "learner_env": {}, "view_port": 8002,
            "view_socket": str(tmp_path / "room-view" / "report.sock"), **changes}
    (tmp_path / "room.json").write_text(json.dumps(spec))
    config = Config()
    code = (ROOT / "room" / "labkit_room" / "jupyterhub_config.py").read_text()
    import os

    os.environ["LABKIT_HUB_ROOM"] = str(tmp_path / "room.json")
    try:
        exec(compile(code, "jupyterhub_config.py", "exec"), {"get_config": lambda: config})
    finally:
        del os.environ["LABKIT_HUB_ROOM"]
    return config


def _bytes(text: str) -> int:
    return room.parse_memory(text)


def test_the_shipped_files_are_the_rooms_rendering():
    assert (cli.VALUES_FILE, cli.TIME_SLICING_FILE) == (VALUES, SLICING)  # where `hub values --write` writes
    assert VALUES.read_text() == cli.render_values(), "python -m labkit hub values --write"
    assert SLICING.read_text() == cli.render_time_slicing(), "python -m labkit hub values --write"


def test_the_chart_values_match_the_one_box_hub(tmp_path):
    values = yaml.safe_load(VALUES.read_text())
    one_box = _one_box_config(tmp_path, room.Z2JH_LEARNERS_PER_GPU)
    single = values["singleuser"]
    # The image binder/ describes (repo2docker builds it from binder/environment.yml and postBuild).
    assert single["image"] == {"name": room.IMAGE_NAME, "tag": room.IMAGE_TAG}
    assert (ROOT / "binder" / "environment.yml").is_file()
    assert "pip install" in (ROOT / "binder" / "postBuild").read_text()
    build = next(line for line in VALUES.read_text().splitlines() if "repo2docker --no-run" in line)
    assert f"--image-name {room.IMAGE_NAME}:{room.IMAGE_TAG} ." in build and room.IMAGE_REPO_DIR in build
    # The same start notebook, in the same learner folder.
    assert single["defaultUrl"] == one_box.Spawner.default_url == f"/lab/tree/{room.START_NOTEBOOK}"
    notebook_dir = values["hub"]["config"]["KubeSpawner"]["notebook_dir"]
    assert Path(notebook_dir).name == Path(one_box.Spawner.notebook_dir).name == room.LEARNER_FOLDER
    assert room.LEARNER_FOLDER in single["lifecycleHooks"]["postStart"]["exec"]["command"][-1]
    # The same limits: memory, GPU share, idle culling.
    assert _bytes(single["memory"]["limit"]) == one_box.Spawner.mem_limit
    assert single["extraEnv"][GPU_SHARE_ENV] == one_box.Spawner.environment[GPU_SHARE_ENV]
    culler = " ".join(one_box.JupyterHub.services[0]["command"])
    assert values["cull"]["enabled"] and f"--timeout={values['cull']['timeout']}" in culler
    assert values["hub"]["config"]["Authenticator"]["admin_users"] == sorted(one_box.Authenticator.admin_users)


def test_one_gpu_per_node_is_time_sliced_among_the_learners_and_their_shares_fit():
    values = yaml.safe_load(VALUES.read_text())
    config = yaml.safe_load(SLICING.read_text())
    plugin = yaml.safe_load(config["data"]["any"])
    (resource,) = plugin["sharing"]["timeSlicing"]["resources"]
    assert resource == {"name": "nvidia.com/gpu", "replicas": room.Z2JH_LEARNERS_PER_GPU}
    assert values["singleuser"]["extraResource"]["limits"] == {"nvidia.com/gpu": "1"}  # one replica per learner
    share = float(values["singleuser"]["extraEnv"][GPU_SHARE_ENV])
    assert share * resource["replicas"] <= 1.0  # every learner's share fits in one GPU's memory at once


def test_bad_room_settings_get_one_line_errors():
    from labkit.errors import LabkitInputError

    for kwargs, words in (({"memory": "lots"}, "give a size"), ({"gpu_share": 1.5}, "(0, 1]"),
                          ({"idle_timeout_s": 5}, "at least 10 seconds"),
                          ({"memory": "100M", "build": "cpu"}, "cpu build of torch a kernel needs at least 1 GiB"),
                          ({"memory": "1.5G", "build": "cuda"}, "cuda build of torch a kernel needs at least 2 GiB")):
        with pytest.raises(LabkitInputError, match=words.replace("(", r"\(").replace("]", r"\]")):
            room.limits_for(4, **kwargs)
    assert room.limits_for(4, memory="1.5G", build="cpu").memory_bytes == int(1.5 * 2**30)
    with pytest.raises(LabkitInputError, match="1 to 99"):
        room.learner_names(0)


def test_the_hub_without_root_says_so_in_one_line(monkeypatch, capsys):
    from labkit.__main__ import main

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["hub", "start", "--learners", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs root" in err and "system user per learner" in err, err
    assert main(["hub", "stop"]) == 2
    assert "needs root" in capsys.readouterr().err


def test_each_learner_gets_a_share_of_the_cores_and_one_blas_thread():
    env = room.limits_for(30, host_memory=30 * 8 * 2**30, cores=16).env()
    assert (env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"], env["OPENBLAS_NUM_THREADS"]) == ("1", "1", "1")
    env = room.limits_for(3, host_memory=3 * 8 * 2**30, cores=16).env()
    assert (env["OMP_NUM_THREADS"], env["OPENBLAS_NUM_THREADS"]) == ("5", "1")
    assert room.limits_for(1, host_memory=8 * 2**30, cores=2).env()["OMP_NUM_THREADS"] == "2"


def test_the_torch_build_is_read_right_without_importing_torch():
    import torch

    assert room.torch_build() == ("cuda" if torch.version.cuda else "cpu")


def test_each_builds_memory_floor_covers_what_a_kernel_was_measured_to_need():
    """The floors of labkit_room.room against room/labkit_room/data/kernel_memory.json: one learner's
    notebooks 00, 01 and repro passed under a data limit of 0.9 of the floor or less, at every
    thread count measured; and on the CUDA box the one BLAS thread a room sets is what keeps it so."""
    import kernel_memory

    record = json.loads(kernel_memory.RECORD.read_text())
    assert sorted(record) == sorted(room.MIN_MEMORY_GIB)  # every build a room knows was measured
    for build, entry in record.items():
        assert entry["build"] == build and entry["threads"]
        needs = max(row["smallest_limit_mib"] for row in entry["threads"]) * 2**20
        assert needs <= 0.9 * room.min_memory_gib(build) * 2**30, (build, needs / 2**30)
        assert {1, max(row["threads"] for row in entry["threads"])} <= {row["threads"] for row in entry["threads"]}
    most = max(record["cuda"]["threads"], key=lambda row: row["threads"])
    assert record["cuda"]["threads_left_alone_peak_vmdata_mib"] > most["peak_vmdata_mib"]
    assert min(row["smallest_limit_mib"] for row in record["cuda"]["threads"]) > 1024  # CUDA torch: over 1 GiB
    guide = (ROOT / "docs" / "INSTRUCTOR_GUIDE.md").read_text()
    said = " ".join(guide.split())
    assert (f"{room.MIN_MEMORY_GIB['cpu']:g} GiB with the CPU build, {room.MIN_MEMORY_GIB['cuda']:g} GiB with the "
            "CUDA build, which holds more than 1 GiB") in said


@pytest.mark.parametrize("needs_mib,peak_mib", [(1536, 1538), (1424, 1412), (700, 300), (288, 600)])
def test_the_memory_bisection_finds_the_smallest_limit_that_passes(monkeypatch, needs_mib, peak_mib):
    """kernel_memory's search, against a stand-in workload that passes exactly from
    `needs_mib` on and reports a sampled peak of `peak_mib`: below, at and far from the need."""
    import kernel_memory as km

    runs = []

    def run_once(cells, env, limit):
        runs.append(limit)
        if limit is None:
            return {"ok": True, "peak_vmdata": peak_mib * km.MIB}
        return {"ok": True} if limit >= needs_mib * km.MIB else {"ok": False, "error": "over the limit"}

    monkeypatch.setattr(km, "run_once", run_once)
    found = km.smallest_limit([], {}, say=lambda _: None)
    step = km.RESOLUTION_MIB
    assert found["peak_vmdata_mib"] == peak_mib
    assert needs_mib <= found["smallest_limit_mib"] < needs_mib + step, found
    assert found["smallest_limit_mib"] % step == 0 and len(runs) < 20


def test_a_zombie_hub_start_counts_as_gone_so_hub_stop_does_not_wait_on_it():
    import os
    import subprocess
    import sys
    import time

    from labkit_room import control

    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc here: _alive has only the signal's answer, and a zombie answers it")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        # exited, not yet waited for: a zombie, as a `hub start` is while its parent blocks on `hub stop`
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.05)
        os.kill(child.pid, 0)  # the signal alone still finds it
        assert not control._alive(child.pid)
    finally:
        child.wait()
    assert control._alive(os.getpid())


def test_the_rooms_state_is_replaced_whole_so_a_reader_never_sees_it_half_written(tmp_path, monkeypatch):
    """The open room rewrites state.json while `hub stop` (or the hub test) may be reading it: a reader
    holding the file sees one whole version, old or new, never an emptied one, and a write that fails
    leaves the old record (the users to remove) in place, with no stray file beside it."""
    import os

    from labkit_room import control

    room_state = control.Room(state_dir=tmp_path, room_id="r1", learners=["a"], public_url="http://x")
    room_state.save()
    with open(room_state.state_file) as reader:  # opened before the rewrite, read after it
        room_state.hub_pid = 4242
        room_state.save()
        assert json.loads(reader.read())["hub_pid"] == 0, "the rewrite emptied the file under its reader"
    assert control.Room.load(tmp_path).hub_pid == 4242
    assert room_state.state_file.stat().st_mode & 0o777 == 0o600

    def refuse(*_):
        raise OSError("disk full")

    monkeypatch.setattr(control.os, "replace", refuse)
    room_state.hub_pid = 7
    with pytest.raises(OSError, match="disk full"):
        room_state.save()
    assert control.Room.load(tmp_path).hub_pid == 4242
    assert sorted(os.listdir(tmp_path)) == ["state.json"]


# -- who logs in past one box ------------------------------------------------------------------------

# The chart's default authenticator and its other names: any name, any password.
DUMMY = {"dummy", "dummyauthenticator", "jupyterhub.auth.dummyauthenticator"}
# Authenticators the chart's hub image ships (jupyterhub/k8s-hub), besides the kit's own, mounted.
CHART_IMAGE_AUTHENTICATORS = {"oauthenticator.", "ldapauthenticator.", "nativeauthenticator.",
                              "ltiauthenticator.", "firstuseauthenticator.", "tmpauthenticator."}


def authenticator_problems(values: dict) -> list[str]:
    """What in the chart's values would let a stranger in (empty: nothing)."""
    config = (values.get("hub") or {}).get("config") or {}
    chosen = ((config.get("JupyterHub") or {}).get("authenticator_class") or "dummy").lower()
    problems = []
    if chosen in DUMMY or chosen.endswith(".dummyauthenticator"):
        problems.append(f"authenticator_class {chosen!r}: the chart's DummyAuthenticator takes any password")
    kits = f"{room.Z2JH_AUTH_MODULE}."
    if not (chosen.startswith(kits) or any(chosen.startswith(p) for p in CHART_IMAGE_AUTHENTICATORS)):
        problems.append(f"authenticator_class {chosen!r} is neither the kit's (mounted) nor one the hub image ships")
    if chosen.startswith(kits):
        mounted = [f for f in ((values.get("hub") or {}).get("extraFiles") or {}).values()
                   if f.get("mountPath", "").endswith(f"/{room.Z2JH_AUTH_MODULE}.py")]
        if not mounted:
            problems.append(f"{room.Z2JH_AUTH_MODULE} is not mounted into the hub")
    allowed = sorted((config.get("Authenticator") or {}).get("allowed_users") or [])
    learners = [name for name in allowed if name != room.ADMIN_USER]
    if room.ADMIN_USER not in allowed or learners != room.learner_names(len(learners or [1])):
        problems.append(f"allowed_users {allowed!r}: the learners and the instructor, and only them")
    return problems


def test_past_one_box_only_the_learners_log_in_each_with_their_own_password(tmp_path):
    import asyncio
    import copy
    import importlib.util

    values = yaml.safe_load(VALUES.read_text())
    assert authenticator_problems(values) == []
    # The check bites: the chart's default, left in place or named, is refused.
    for bad in (None, "dummy", "jupyterhub.auth.DummyAuthenticator"):
        changed = copy.deepcopy(values)
        changed["hub"]["config"]["JupyterHub"]["authenticator_class"] = bad
        assert authenticator_problems(changed), bad
    changed = copy.deepcopy(values)
    changed["hub"]["config"]["Authenticator"]["allowed_users"].append("mallory")
    assert authenticator_problems(changed)
    # The mounted file is the kit's own authenticator, it needs nothing of the kit in the hub image...
    source = values["hub"]["extraFiles"]["labkit-room-auth"]["stringData"]
    assert source == (ROOT / "room" / "labkit_room" / "auth.py").read_text()
    assert "labkit" not in " ".join(line for line in source.splitlines() if line.startswith(("import", "from")))
    # ... and, loaded from that file alone, lets each in with their password and nobody with another.
    path = tmp_path / f"{room.Z2JH_AUTH_MODULE}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(room.Z2JH_AUTH_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = tmp_path / room.LOGINS_FILE
    table.write_text(json.dumps({room.ADMIN_USER: module.hash_password("right-one"),
                                 "labkit-learner01": module.hash_password("learner-one")}))
    authenticator = module.RoomAuthenticator(table_file=str(table))

    def login(name, password):
        return asyncio.run(authenticator.authenticate(None, {"username": name, "password": password}))

    assert login(room.ADMIN_USER, "right-one") == room.ADMIN_USER
    assert login("labkit-learner01", "learner-one") == "labkit-learner01"
    assert login(room.ADMIN_USER, "anything") is None and login(room.ADMIN_USER, "") is None
    assert login("labkit-learner01", "right-one") is None and login("labkit-learner02", "learner-one") is None
    mount = values["hub"]["config"]["RoomAuthenticator"]["table_file"]
    assert mount == f"{room.LOGINS_DIR}/{room.LOGINS_FILE}"
    assert {"name": room.LOGINS_SECRET, "mountPath": room.LOGINS_DIR, "readOnly": True} in \
        values["hub"]["extraVolumeMounts"]


def test_hub_logins_writes_the_hashes_and_the_credentials_for_the_owner_alone(tmp_path):
    from labkit_room import control

    said = control.write_logins(2, tmp_path / "logins")
    hashes = json.loads((tmp_path / "logins" / room.LOGINS_FILE).read_text())
    text = (tmp_path / "logins" / "credentials.txt").read_text()
    assert sorted(hashes) == sorted([room.ADMIN_USER, *room.learner_names(2)]) and "password" not in json.dumps(hashes)
    assert all(name in text for name in hashes) and "wrote" in said
    for path in ((tmp_path / "logins"), *(tmp_path / "logins").iterdir()):
        assert path.stat().st_mode & 0o077 == 0, path
    with pytest.raises(control.HubError, match="exists"):
        control.write_logins(2, tmp_path / "logins")


def test_the_measured_workload_is_read_from_a_learners_own_folder_and_from_notebooks(tmp_path):
    """The bench runs notebooks 00 and 01 from each learner's folder, where they carry the learner's
    names, and kernel-memory runs them from notebooks/: the same cells either way."""
    import workload
    from labkit import paths
    from labkit_room import runtime

    folder = tmp_path / room.LEARNER_FOLDER
    runtime.build_learner_folder(folder)
    learner, instructor = workload.cells(folder), workload.cells(paths.NOTEBOOKS)
    assert learner[-1] == instructor[-1] == workload.REPRO
    assert len(learner) > 5 and len(learner) == len(instructor)


def test_a_session_start_is_a_time_of_day_still_to_come_in_one_line():
    import time

    from labkit.errors import LabkitInputError

    now = time.mktime((2026, 12, 4, 8, 30, 0, 0, 0, -1))
    at = cli.session_start("09:00", now=now)
    assert at - now == 30 * 60
    assert cli.session_start(None) is None
    for bad, words in (("9", "not a time of day"), ("25:00", "not a time of day"), ("08:00", "has passed")):
        with pytest.raises(LabkitInputError, match=words):
            cli.session_start(bad, now=now)


def test_the_culler_waits_for_the_session_marks_running_servers_active_then_becomes_the_culler(monkeypatch):
    """room/labkit_room/culler.py against a stand-in hub API over real HTTP: it sleeps until the
    session's start, posts activity for each user with a running server (not the others), then
    execs jupyterhub-idle-culler with its arguments."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from labkit_room import culler

    posted = []

    class Hub(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            assert self.path == "/users?state=active" and self.headers["Authorization"] == "token T"
            body = json.dumps([{"name": "labkit-learner01", "servers": {"": {}}}, {"name": "idle", "servers": {}}])
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def do_POST(self):  # noqa: N802
            posted.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("JUPYTERHUB_API_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "T")
    execs = []

    def exec_instead(path, args):
        execs.append(args)
        raise SystemExit(0)

    monkeypatch.setattr(culler.os, "execv", exec_instead)
    started = time.time()
    with pytest.raises(SystemExit):
        culler.main(["--not-before", str(started + 0.5), "--", "--timeout=60"])
    server.shutdown()
    assert time.time() - started >= 0.5
    assert [path for path, _ in posted] == ["/users/labkit-learner01/activity"]
    body = posted[0][1]
    assert set(body["servers"]) == {""} and body["servers"][""]["last_activity"] == body["last_activity"]
    assert execs[0][1:] == ["-m", "jupyterhub_idle_culler", "--timeout=60"]


# Every key the values set, as the chart's release room.Z2JH_CHART_VERSION documents it (its
# values.yaml and schema): a path, or a path whose whole subtree is free-form (hub.config is traitlets
# configuration, passed to JupyterHub as it is; loadRoles, extraFiles and extraEnv are maps of the
# operator's names).
CHART_KEYS = {
    "hub.config": "free", "hub.loadRoles": "free", "hub.extraFiles": "free", "hub.extraVolumes": "free",
    "hub.extraVolumeMounts": "free", "singleuser.image.name": "", "singleuser.image.tag": "",
    "singleuser.defaultUrl": "", "singleuser.memory.limit": "", "singleuser.memory.guarantee": "",
    "singleuser.cpu.limit": "", "singleuser.cpu.guarantee": "", "singleuser.extraResource.limits": "free",
    "singleuser.extraEnv": "free", "singleuser.lifecycleHooks": "free", "singleuser.networkPolicy.enabled": "",
    **{f"singleuser.networkPolicy.egressAllowRules.{rule}": "" for rule in (
        "cloudMetadataServer", "dnsPortsCloudMetadataServer", "dnsPortsKubeSystemNamespace", "dnsPortsPrivateIPs",
        "nonPrivateIPs", "privateIPs")},
    "cull.enabled": "", "cull.timeout": "", "cull.every": "", "scheduling.userScheduler.enabled": "",
}


def undocumented_keys(values: dict, prefix: str = "") -> list[str]:
    found = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if CHART_KEYS.get(path) == "free" or (path in CHART_KEYS and not isinstance(value, dict)):
            continue
        if isinstance(value, dict) and any(k.startswith(path + ".") for k in CHART_KEYS):
            found += undocumented_keys(value, path + ".")
        else:
            found.append(path)
    return found


def test_the_chart_values_name_their_release_and_set_only_keys_it_documents():
    text = VALUES.read_text()
    assert f"--version {room.Z2JH_CHART_VERSION}" in text and f"release {room.Z2JH_CHART_VERSION}" in text
    values = yaml.safe_load(text)
    assert undocumented_keys(values) == []
    values["singleuser"]["notebookDir"] = "/home/jovyan"  # not a key of the chart: the check bites
    assert undocumented_keys(values) == ["singleuser.notebookDir"]


def test_the_chart_values_carry_the_one_box_rooms_defences(tmp_path):
    values = yaml.safe_load(VALUES.read_text())
    config = values["hub"]["config"]
    one_box = _one_box_config(tmp_path, room.Z2JH_LEARNERS_PER_GPU)
    # Nobody is admin; the instructor's role is the one-box room's: the admin page, never a learner's server.
    assert config["Authenticator"]["admin_users"] == [] == sorted(one_box.Authenticator.admin_users)
    role = values["hub"]["loadRoles"][room.ADMIN_USER]
    one_box_role = next(r for r in one_box.JupyterHub.load_roles if r["name"] == room.ADMIN_USER)
    assert role["scopes"] == one_box_role["scopes"] and role["users"] == [room.ADMIN_USER]
    assert "admin-ui" in role["scopes"] and not set(role["scopes"]) & set(room.INSTRUCTOR_NEVER)
    # No user configuration; every page but JupyterLab's sandboxed (the kit's extension); no terminal.
    spawner = config["KubeSpawner"]
    assert spawner["disable_user_config"] is True and one_box.Spawner.disable_user_config is True
    args = " ".join(spawner["args"])
    assert "'labkit_room.learner_server': True" in args and "--ServerApp.terminals_enabled=False" in args
    def split(args):  # (the extensions enabled, the other arguments)
        import ast

        flag = "--ServerApp.jpserver_extensions="
        extensions = [ast.literal_eval(a[len(flag):]) for a in args if a.startswith(flag)]
        return set().union(*extensions), {a for a in args if not a.startswith(flag)}

    (chart_extensions, chart_args), (box_extensions, box_args) = split(spawner["args"]), split(one_box.Spawner.args)
    assert chart_extensions <= box_extensions and chart_args <= box_args, (spawner["args"], one_box.Spawner.args)
    # A NetworkPolicy: a learner's pod reaches no other pod (private addresses) nor the cloud's metadata.
    policy = values["singleuser"]["networkPolicy"]
    assert policy["enabled"] is True
    rules = policy["egressAllowRules"]
    assert rules["privateIPs"] is False and rules["cloudMetadataServer"] is False
    assert rules["dnsPortsPrivateIPs"] is False
