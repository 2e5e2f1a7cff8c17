"""Setting up a room: what `make lab` installs and from where, JupyterLab without its news prompt,
and -- as the `room` stage of `make test` -- binder/ built offline from `make wheelhouse`.

The first part runs in the unit stage: the choice of pip options (`python -m labkit setup pip-source`:
the CPU index on Linux, no index with a wheelhouse), the JupyterLab overrides as JupyterLab's own
settings code reads them, and the wiring of the Makefile and binder/.

The second part needs ``LABKIT_ROOM_WHEELHOUSE`` (the room stage sets it, after `make wheelhouse`
filled that folder): it builds the environment repo2docker would build from binder/ alone, and
runs notebook 00 and the exercise checkers of notebook 07 in it. repo2docker makes a conda
environment from binder/environment.yml (Python and pip) and then runs binder/postBuild in the
repository; there is no conda here, so a fresh ``python -m venv`` with pip upgraded from the
wheelhouse stands in for the conda part (emulated, not conda). postBuild itself runs unchanged,
offline: pip gets no configuration file (``PIP_CONFIG_FILE=/dev/null``), ``PIP_NO_INDEX=1`` and
``PIP_FIND_LINKS=<wheelhouse>``, so the CPU index postBuild names is ignored and every package comes
from the wheelhouse; where ``unshare --net`` works (root), pip runs with no network at all.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from checkout import checkout_files, git

from labkit.__main__ import main
from labkit.errors import LabkitInputError
from labkit.tools import lab, setup

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text()
POSTBUILD = ROOT / "binder" / "postBuild"
BINDER_ENV = ROOT / "binder" / "environment.yml"


def _pin(name: str) -> str:
    for line in (ROOT / "requirements" / "ci.txt").read_text().splitlines():
        match = re.match(rf"\s*{re.escape(name)}\s*==\s*([^\s;#]+)", line)
        if match:
            return match.group(1)
    raise AssertionError(f"requirements/ci.txt pins no {name}")


def _make_dry_run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH", "WHEELHOUSE", "MAKEFLAGS")}
    return subprocess.run(["make", "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True).stdout


# == part 1: the unit stage ======================================================================

# -- where pip takes the pins from ---------------------------------------------------------------

def _never(*_a, **_k):
    raise AssertionError("not expected to be asked")


def test_linux_cpu_adds_the_cpu_index_when_pip_has_no_cpu_torch_on_disk():
    args = setup.pip_source_args("cpu", platform="linux", installed=lambda: None, available=lambda pin: None,
                               unreachable=lambda url: None)
    assert args == ["--extra-index-url", setup.TORCH_CPU_INDEX]
    # PyPI's build on disk (a wheelhouse made with TORCH=cuda) is not the CPU build: the index still.
    args = setup.pip_source_args("cpu", platform="linux", installed=lambda: None,
                               available=lambda pin: pin, unreachable=lambda url: None)
    assert args == ["--extra-index-url", setup.TORCH_CPU_INDEX]


def test_linux_cpu_adds_no_index_where_the_cpu_build_is_on_disk_or_installed():
    pin = _pin("torch")
    assert setup.pip_source_args("cpu", platform="linux", installed=lambda: None,
                               available=lambda p: p + "+cpu", unreachable=_never) == []
    assert setup.pip_source_args("cpu", platform="linux", installed=lambda: pin + "+cpu",
                               available=_never, unreachable=_never) == []
    # A download ignores what is installed: `make wheelhouse` must still fetch the CPU build.
    assert setup.pip_source_args("cpu", platform="linux", for_download=True, installed=lambda: pin + "+cpu",
                               available=lambda p: None, unreachable=lambda url: None) == [
        "--extra-index-url", setup.TORCH_CPU_INDEX]


def test_an_unreachable_cpu_index_stops_the_set_up_with_the_two_ways_out():
    with pytest.raises(SystemExit) as stop:
        setup.pip_source_args("cpu", platform="linux", installed=lambda: None, available=lambda pin: None,
                            unreachable=lambda url: "Name or service not known")
    message = str(stop.value)
    assert setup.TORCH_CPU_INDEX in message and "Name or service not known" in message
    assert "TORCH=cuda" in message and "WHEELHOUSE=" in message


def test_cuda_and_other_platforms_use_pips_own_configuration():
    for torch, platform in (("cuda", "linux"), ("cpu", "darwin"), ("cpu", "win32")):
        assert setup.pip_source_args(torch, platform=platform, installed=_never, available=_never,
                                   unreachable=_never) == []
    with pytest.raises(SystemExit, match="TORCH='rocm'"):
        setup.pip_source_args("rocm", platform="linux")


def test_a_bad_torch_or_wheelhouse_is_one_line_and_exit_2_from_the_pip_source_question(tmp_path, capsys):
    for args, named in ((["--torch", "rocm"], "TORCH='rocm'"), (["--wheelhouse", str(tmp_path)], "no wheels there"),
                        (["--wheelhouse", str(tmp_path / "nowhere")], "no such folder")):
        assert main(["setup", "pip-source", *args]) == 2
        out = capsys.readouterr()
        assert not out.out and len(out.err.strip().splitlines()) == 1, out.err
        assert out.err.startswith("python -m labkit setup: error: ") and named in out.err
        assert "choose" in out.err


def test_a_wheelhouse_means_no_index_at_all(tmp_path):
    with pytest.raises(SystemExit, match="no wheels there"):
        setup.pip_source_args("cpu", str(tmp_path), platform="linux")
    (tmp_path / "x-1.0-py3-none-any.whl").write_bytes(b"")
    for torch in ("cpu", "cuda"):
        assert setup.pip_source_args(torch, str(tmp_path), platform="linux", installed=_never, available=_never,
                                   unreachable=_never) == ["--no-index", "--find-links", str(tmp_path.resolve())]


def test_uv_gets_the_folders_of_wheels_pips_configuration_names_and_weighs_every_index(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", f"{wheels} {tmp_path / 'not-there'}")
    assert str(wheels) in setup.pip_config_find_links()
    assert str(tmp_path / "not-there") not in setup.pip_config_find_links()
    monkeypatch.setattr(setup, "pip_config_find_links", lambda: [str(wheels)])
    cpu = ["--extra-index-url", setup.TORCH_CPU_INDEX]
    assert setup.uv_source_args(cpu) == cpu + ["--find-links", str(wheels), "--index-strategy", "unsafe-best-match"]
    offline = ["--no-index", "--find-links", str(tmp_path)]  # a wheelhouse: nothing else
    assert setup.uv_source_args(offline) == offline + ["--index-strategy", "unsafe-best-match"]


def test_uv_trusts_the_certificate_bundle_pips_configuration_names(tmp_path, monkeypatch):
    """A network whose TLS a local authority signs: pip is told of its bundle (cert, PIP_CERT), uv reads
    no pip configuration and trusts that bundle only through SSL_CERT_FILE."""
    bundle, own = tmp_path / "local-authority.pem", tmp_path / "own.pem"
    bundle.write_text("")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # this machine's pip configuration files out of it
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("PIP_CERT", str(bundle))
    assert ("cert", str(bundle)) in setup.pip_config()
    assert setup.uv_env()["SSL_CERT_FILE"] == str(bundle)
    monkeypatch.setenv("SSL_CERT_FILE", str(own))  # the caller's own choice stands
    assert setup.uv_env()["SSL_CERT_FILE"] == str(own)
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "not-there.pem"))  # no such bundle: uv's own roots
    assert "SSL_CERT_FILE" not in setup.uv_env()


@pytest.mark.parametrize("uv_exit, installer, expected", [
    (0, "auto", ["uv"]),                    # uv installs: pip never runs
    (1, "auto", ["uv", "pip", "pip"]),      # uv fails: pip upgrades itself and installs the same pins
    (None, "auto", ["pip", "pip"]),         # no uv to be had: pip
    (0, "pip", ["pip", "pip"]),             # INSTALLER=pip: uv is not even fetched
])
def test_the_set_up_installs_with_uv_and_falls_back_to_pip(monkeypatch, tmp_path, uv_exit, installer, expected):
    ran, fetched = [], []
    bundle = tmp_path / "local-authority.pem"
    bundle.write_text("")

    def run(cmd, **kwargs):
        if "compileall" not in cmd:
            ran.append(("uv" if cmd[0] == "/venv/bin/uv" else "pip", cmd))
        if cmd[0] == "/venv/bin/uv":  # uv trusts the bundle pip is configured with
            assert kwargs["env"]["SSL_CERT_FILE"] == str(bundle)
        code = uv_exit if cmd[0] == "/venv/bin/uv" else 0
        return subprocess.CompletedProcess(cmd, code, "", "")

    monkeypatch.setattr(setup, "pip_source_args", lambda torch, wheelhouse: ["--extra-index-url", "X"])
    monkeypatch.setattr(setup, "pip_config", lambda: [("cert", str(bundle))])
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setattr(setup, "_get_uv", lambda source, log: fetched.append(source) or (
        None if uv_exit is None else "/venv/bin/uv"))
    monkeypatch.setattr(setup.subprocess, "run", run)
    assert setup.install("lab", installer=installer, log=lambda line: None) == 0
    assert [who for who, _ in ran] == expected
    assert bool(fetched) == (installer == "auto")
    for _, cmd in ran:
        assert cmd[-2:] == ["-e", ".[lab]"] or cmd[-2:] == ["--upgrade", "pip"], cmd
        assert "X" in cmd  # the same source, whoever installs
        if cmd[-2:] == ["-e", ".[lab]"]:
            assert cmd[cmd.index("-c") + 1] == str(setup.PINS)  # at the pins


def test_what_the_lab_set_up_compiles_first_is_what_this_environment_can_import():
    import importlib.util

    pytest.importorskip("jupyterlab", reason="the lab extra is not installed here (a box that carries the Jupyter "
                        "server alone): the lab's imports are not this environment's")

    missing = [name for name in setup.LAB_IMPORTS
               if not (name.startswith("triton") and not sys.platform.startswith("linux"))
               and importlib.util.find_spec(name) is None]
    assert not missing, f"LAB_IMPORTS names modules the lab extra does not install: {missing}"


def test_a_bad_installer_is_one_line_from_make_and_from_the_command(tmp_path):
    assert setup.installer_problem("pip") is None and setup.installer_problem("auto") is None
    with pytest.raises(LabkitInputError, match="INSTALLER='conda' is not an installer"):
        setup.install("lab", installer="conda")


def _fake_wheel(folder: Path, name: str, version: str) -> Path:
    dist = f"{name}-{version}.dist-info"
    files = {f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for member, text in files.items():
            whl.writestr(member, text)
        whl.writestr(f"{dist}/RECORD", "".join(f"{m},,\n" for m in files) + f"{dist}/RECORD,,\n")
    return path


@pytest.fixture
def only_these_links(tmp_path, monkeypatch):
    """pip with no configuration file and one find-links folder (empty at first)."""
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    links = tmp_path / "links"
    links.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    return links


def test_pip_itself_tells_whether_the_cpu_build_is_on_disk(only_these_links):
    pin = _pin("torch")
    assert setup.cpu_torch_without_index(pin) is None  # nothing there
    _fake_wheel(only_these_links, "torch", pin)  # PyPI's build, as a CUDA wheelhouse holds it
    assert setup.cpu_torch_without_index(pin) == pin
    _fake_wheel(only_these_links, "torch", pin + "+cpu")
    assert setup.cpu_torch_without_index(pin) == pin + "+cpu"  # pip prefers it, as it will when installing


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request lines in the test's output
        pass


def test_reachability_of_an_index_is_told_apart(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert setup.index_unreachable(f"http://127.0.0.1:{server.server_port}/", timeout=5) is None
    finally:
        server.shutdown()
        server.server_close()
    closed = server.server_port  # nothing listens there any more
    started = time.monotonic()
    assert setup.index_unreachable(f"http://127.0.0.1:{closed}/", timeout=5)
    assert time.monotonic() - started < 5


def test_make_passes_the_torch_wheelhouse_and_installer_switches_to_both_set_ups(tmp_path):
    (tmp_path / "x-1.0-py3-none-any.whl").write_bytes(b"")  # make checks WHEELHOUSE holds wheels first
    for stamp, extras in ((".venv/.installed", "lab,test,browser"), (".venv/.installed-lab", "lab")):
        recipe = _make_dry_run("-W", "pyproject.toml", stamp, "TORCH=cuda", f"WHEELHOUSE={tmp_path}", "INSTALLER=pip")
        assert (f'-m labkit setup install "{extras}" --torch "cuda" --wheelhouse "{tmp_path}" --installer "pip"'
                in recipe), recipe
        default = _make_dry_run("-W", "pyproject.toml", stamp)
        assert f'install "{extras}" --torch "cpu" --wheelhouse "" --installer "auto"' in default


def test_make_lab_sets_up_the_lab_extra_alone_and_make_test_every_extra_and_the_room():
    lab, test = _make_dry_run("-W", "pyproject.toml", "lab"), _make_dry_run("-W", "pyproject.toml", "test")
    assert ".venv/.installed-lab" in lab
    assert '"lab,test,browser"' not in lab and "--room" not in lab  # the lesson alone
    assert '"lab,test,browser"' in test and re.search(r'setup install "lab,test,browser" .*--room', test)


def test_make_wheelhouse_writes_where_it_is_told_and_is_gitignored():
    assert '-m labkit setup wheelhouse "wheelhouse"' in _make_dry_run("wheelhouse")
    told = _make_dry_run("wheelhouse", "WHEELHOUSE=/tmp/wh", "TORCH=cuda")
    assert '-m labkit setup wheelhouse "/tmp/wh" --torch "cuda"' in told
    ignored = git("check-ignore", "-q", "wheelhouse/torch.whl")  # None: no git checkout to ask
    assert ignored is None or ignored.returncode == 0


def test_the_room_stage_builds_a_fresh_wheelhouse_and_runs_this_file_in_one_process():
    recipe = _make_dry_run("test-room")
    assert "rm -rf build/room-wheelhouse" in recipe
    assert '-m labkit setup wheelhouse "build/room-wheelhouse" --torch cpu' in recipe
    assert "LABKIT_ROOM_WHEELHOUSE=build/room-wheelhouse" in recipe and "-p no:xdist" in recipe
    assert "tests/test_room_setup.py" in recipe


def test_the_wheelhouse_holds_what_pip_needs_to_build_the_kit():
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert setup.build_requires() == pyproject["build-system"]["requires"]
    installed_extras = re.search(r"^ALL_EXTRAS := (\S+)$", MAKEFILE, re.M).group(1)
    assert setup.WHEELHOUSE_EXTRAS == installed_extras, "the wheelhouse must hold every extra make test installs"


# -- JupyterLab without the news prompt --------------------------------------------------------------

def _jupyterlab():
    return pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here (the lab extra)")


def test_the_prompt_is_asked_exactly_while_fetch_news_is_none():
    """The installed JupyterLab's frontend asks its question when the Notification setting
    `fetchNews` is "none" (the schema's default); the overrides rely on that."""
    jlab = Path(_jupyterlab().__file__).parent
    schema = json.loads((jlab / "schemas/@jupyterlab/apputils-extension/notification.json").read_text())
    fetch = schema["properties"]["fetchNews"]
    assert fetch["default"] == "none" and {"const": "false", "title": "Never"} in fetch["oneOf"]
    assert schema["properties"]["checkForUpdates"]["type"] == "boolean"
    bundles = [p for p in (jlab / "static").glob("*.js") if b"official Jupyter news" in p.read_bytes()]
    assert len(bundles) == 1, bundles
    code = bundles[0].read_text(errors="replace")
    assert "@jupyterlab/apputils-extension:announcements" in code
    assert re.search(r'"none"===\(.{0,60}get\("fetchNews"\)\.composite\)', code), \
        "JupyterLab's announcements plugin no longer asks on fetchNews == 'none': check LAB_OVERRIDES"


def _effective_notification_schema(app_settings_dir: Path, user_dir: Path) -> dict:
    from jupyterlab.commands import get_app_dir
    from jupyterlab_server.settings_utils import get_settings

    result, _ = get_settings(str(app_settings_dir), str(Path(get_app_dir()) / "schemas"), str(user_dir),
                             schema_name=lab.NOTIFICATION_PLUGIN)
    return result["schema"]["properties"]


def test_the_overrides_turn_the_news_prompt_and_update_checks_off_in_jupyterlabs_own_reading(tmp_path):
    _jupyterlab()
    (tmp_path / "user").mkdir()
    before = _effective_notification_schema(tmp_path / "settings", tmp_path / "user")
    assert before["fetchNews"]["default"] == "none"  # without them the prompt comes
    path = lab.write_lab_overrides(tmp_path / "settings")
    assert path == tmp_path / "settings" / "overrides.json"
    after = _effective_notification_schema(tmp_path / "settings", tmp_path / "user")
    assert after["fetchNews"]["default"] == "false" and after["checkForUpdates"]["default"] is False


def test_the_overrides_keep_what_else_the_file_says(tmp_path):
    settings = tmp_path / "settings"
    settings.mkdir()
    (settings / "overrides.json").write_text(json.dumps({
        "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
        lab.NOTIFICATION_PLUGIN: {"doNotDisturbMode": True, "fetchNews": "true"}}))
    lab.write_lab_overrides(settings)
    written = json.loads((settings / "overrides.json").read_text())
    assert written["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert written[lab.NOTIFICATION_PLUGIN] == {"doNotDisturbMode": True, "fetchNews": "false",
                                                "checkForUpdates": False}


def test_the_settings_folder_is_the_one_jupyterlab_reads(monkeypatch):
    _jupyterlab()
    from jupyterlab.commands import get_app_dir

    monkeypatch.delenv("JUPYTERLAB_DIR", raising=False)
    assert lab.lab_settings_dir() == Path(get_app_dir()).resolve() / "settings"
    assert lab.lab_settings_dir() == Path(sys.prefix).resolve() / "share" / "jupyter" / "lab" / "settings"


def test_make_lab_writes_the_overrides_and_starts_the_server_without_news_or_update_checks(tmp_path, monkeypatch,
                                                                                           capsys):
    _jupyterlab()
    from jupyterlab.handlers.announcements import CheckForUpdateABC
    from jupyterlab.labapp import LabApp

    monkeypatch.setenv("JUPYTERLAB_DIR", str(tmp_path))
    started = []
    monkeypatch.setattr(lab.os, "execve", lambda path, cmd, env: started.append((cmd, env)))
    monkeypatch.setattr(lab.os, "chdir", lambda path: None)
    monkeypatch.setattr(lab.os, "fork", lambda: 1)  # the parent's side: no watcher polls a lab never started
    banners = []  # what the watcher prints once the server answers
    real_banner = lab._banner
    monkeypatch.setattr(lab, "_banner", lambda *args: banners.append(real_banner(*args)) or banners[-1])
    monkeypatch.setattr(lab, "LAB_STATE", tmp_path / "lab-state")  # the lab's signature database
    main(["lab", "--edition", "instructor", "--port", "8123"])  # the student edition: tests/test_learner_lab.py
    ((cmd, env),) = started
    assert "its address follows once it answers" in capsys.readouterr().out
    (banner,) = banners
    assert "Open the lab at" in banner
    # The token the address carries reaches the server in its environment, and is on no command line.
    assert f"?token={env[lab.TOKEN_ENV]}" in banner and not any(env[lab.TOKEN_ENV] in word for word in cmd)
    assert json.loads((tmp_path / "settings" / "overrides.json").read_text()) == lab.LAB_OVERRIDES
    assert all(flag in cmd for flag in lab.NO_NEWS_FLAGS) and cmd[-1] == lab.FIRST_NOTEBOOK
    # The flags mean what they say to this JupyterLab: no feed URL at all, a checker that never asks.
    assert LabApp.news_url.from_string("None") is None
    import jupyterlab

    assert issubclass(jupyterlab.NeverCheckForUpdate, CheckForUpdateABC)


# -- binder/ -------------------------------------------------------------------------------------

def test_postbuild_installs_the_kit_and_the_rooms_package_then_checks_and_writes_the_overrides():
    text = POSTBUILD.read_text()
    assert os.access(POSTBUILD, os.X_OK), "repo2docker runs binder/postBuild only if it is executable"
    installs = re.findall(r"^python -m pip install .*$", text, re.M)
    assert installs == ["python -m pip install --no-cache-dir --no-deps -e . -e room/"], installs
    assert re.search(r"^python -m pip check$", text, re.M)
    assert re.search(r"^python -m labkit setup lab-overrides$", text, re.M)


def _binder_python() -> str:
    match = re.search(r"^\s*-\s*python\s*=\s*(\d+\.\d+)\s*$", BINDER_ENV.read_text(), re.M)
    assert match, "binder/environment.yml names no python"
    return match.group(1)


def _binder_pip_list() -> list[str]:
    """The pip section of binder/environment.yml, as conda hands it to pip (a requirements file)."""
    text = BINDER_ENV.read_text().split("- pip:", 1)[1]
    return [m.group(1).strip() for m in re.finditer(r"^\s+-\s+(.+)$", text, re.M)]


def test_binder_environment_holds_every_third_party_package_of_the_lab_at_its_pin():
    deps = re.findall(r"^  -\s*(\S+)\s*$", BINDER_ENV.read_text().split("dependencies:", 1)[1], re.M)
    assert deps == [f"python={_binder_python()}", "pip", "pip:"]  # Python, pip, and pip's own list
    listed = _binder_pip_list()
    assert listed[0] == f"--extra-index-url {setup.TORCH_CPU_INDEX}"
    for name in ("torch", "numpy", "jupyterlab", "ipywidgets", "jupyter-resource-usage", "jsonschema"):
        assert f"{name}=={_pin(name)}" in [item.split(";")[0].strip() for item in listed], name
    assert not any("labkit" in item or item.startswith(("-e", ".")) for item in listed), "the kit is postBuild's"
    # Written from pyproject.toml and the pins: a pin changed there and not here fails.
    assert BINDER_ENV.read_text() == setup.render_binder_env(), "python -m labkit setup binder-env"
    assert main(["setup", "binder-env", "--check"]) == 0


# -- docs/TRITON_MASKS.md ---------------------------------------------------------------------------

def test_the_triton_masks_sheet_covers_its_topics_and_does_not_give_exercise_b_away():
    """Learners read the sheet during exercise 07(b): it teaches masks on generic kernels only. Words
    that belong to the exercise's answer (its buffers, its sentinel, its condition) must not appear."""
    text = (ROOT / "docs" / "TRITON_MASKS.md").read_text()
    giveaways = {"slot": r"\bslots?\b", "idx_mapping": r"idx_mapping", "-1": r"(?<![\w.])-1\b",
                 "padding": r"\bpad", ">= 0": r">=\s*0\b", "request": r"\brequests?\b"}
    found = sorted(word for word, pattern in giveaways.items() if re.search(pattern, text, re.I))
    assert not found, f"docs/TRITON_MASKS.md gives exercise 07(b) away: {found}"
    for topic in ("other=", "mask=", "tl.store", "never dereferenced", "broadcast", "TRITON_INTERPRET=1",
                  "offs < n"):
        assert topic in " ".join(text.split()), topic


# == part 2: the room stage -- binder/ built offline from a wheelhouse ==================================

WHEELHOUSE = os.environ.get("LABKIT_ROOM_WHEELHOUSE", "")
needs_wheelhouse = pytest.mark.skipif(not WHEELHOUSE, reason="the room stage of make test runs these "
                                      "(make test-room: LABKIT_ROOM_WHEELHOUSE names the wheelhouse)")
WORK = ROOT / "build" / "room"


def _say(text: str) -> None:
    print(f"   [room] {text}", flush=True)


def _no_network_prefix() -> list[str]:
    """``unshare --net --`` where this user may make a network namespace (root): no network at all."""
    if shutil.which("unshare") is None:
        return []
    try:
        ok = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return ["unshare", "--net", "--"] if ok else []


@dataclass
class Room:
    repo: Path
    env: Path
    wheelhouse: Path
    environ: dict
    offline: list[str]
    results: dict = field(default_factory=dict)

    @property
    def python(self) -> str:
        return str(self.env / "bin" / "python")

    def run(self, step: str, cmd: list[str], *, no_network: bool = False, extra_env: dict | None = None,
            timeout: float = 1200) -> subprocess.CompletedProcess:
        env = dict(self.environ, **(extra_env or {}))
        full = (self.offline if no_network else []) + cmd
        started = time.monotonic()
        done = subprocess.run(full, cwd=self.repo, env=env, capture_output=True, text=True, timeout=timeout)
        took = time.monotonic() - started
        log = WORK / f"{step}.log"
        log.write_text(f"$ {' '.join(full)}\n{done.stdout}\n{done.stderr}")
        _say(f"{step}: exit {done.returncode} in {took:.0f} s (log: {log.relative_to(ROOT)})")
        self.results[step] = done
        return done

    def python_says(self, code: str, **env) -> str:
        done = subprocess.run([self.python, "-c", code], cwd=self.repo, env=dict(self.environ, **env),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip()


def _tail(done: subprocess.CompletedProcess, n: int = 40) -> str:
    return "\n".join((done.stdout + "\n" + done.stderr).splitlines()[-n:])


def _checkout_files() -> list[str]:
    """The files a commit of this working tree would hold (tracked, and new ones git does not ignore)."""
    return checkout_files(untracked=True)


@pytest.fixture(scope="module")
def room(request):
    wheelhouse = (ROOT / WHEELHOUSE).resolve()
    assert wheelhouse.is_dir() and any(wheelhouse.glob("*.whl")), f"no wheels in {wheelhouse}"
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    started = time.monotonic()

    repo = WORK / "repo"  # repo2docker copies the repository into the image; postBuild runs there
    names = _checkout_files()
    for name in names:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    _say(f"copied the checkout ({len(names)} files) to {repo.relative_to(ROOT)}")

    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("PIP_", "TRITON_", "LABKIT_", "JUPYTER", "CONDA")) and
               k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env_dir = WORK / "env"
    environ.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(env_dir),
                   PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse),
                   PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore", PYTHONNOUSERSITE="1")
    offline = _no_network_prefix()
    room = Room(repo, env_dir, wheelhouse, environ, offline)
    _say("pip runs " + ("with no network at all (unshare --net)" if offline else
                        "with PIP_NO_INDEX=1 only (unshare --net is not allowed here)"))

    # The conda part of repo2docker, emulated: Python (environment.yml's version where the machine
    # has it) and the newest pip, which conda would have installed from `- pip`.
    python = os.environ.get("LABKIT_ROOM_PYTHON") or "python3"
    made = room.run("venv", [python, "-m", "venv", str(env_dir)])
    assert made.returncode == 0, _tail(made)
    version = room.python_says("import sys; print('%d.%d' % sys.version_info[:2])")
    if version != _binder_python():
        _say(f"note: binder/environment.yml asks for Python {_binder_python()}; this stand-in runs {version}")
    upgraded = room.run("pip", [room.python, "-m", "pip", "install", "--upgrade", "pip"], no_network=True)
    assert upgraded.returncode == 0, _tail(upgraded)

    # repo2docker's conda installs binder/environment.yml's pip section (as a requirements file)
    # before it copies the repository: every third-party package, from the wheelhouse here.
    requirements = WORK / "binder-requirements.txt"
    requirements.write_text("\n".join(_binder_pip_list()) + "\n")
    listed = room.run("environment.yml", [room.python, "-m", "pip", "install", "-r", str(requirements)],
                      no_network=True)
    assert listed.returncode == 0, _tail(listed)
    room.run("postBuild", [str(repo / "binder" / "postBuild")], no_network=True)
    _say(f"binder environment ready in {time.monotonic() - started:.0f} s")
    yield room
    if request.session.testsfailed == 0:
        shutil.rmtree(env_dir, ignore_errors=True)  # a few GB; kept after a failure, to look into


@needs_wheelhouse
def test_postbuild_installs_the_lab_from_the_wheelhouse_alone(room):
    done = room.results["postBuild"]
    assert done.returncode == 0, f"binder/postBuild failed offline:\n{_tail(done)}"
    output = done.stdout + done.stderr
    assert "Looking in indexes" not in output and "Retrying" not in output, _tail(done)
    # The split Binder caches by: postBuild installs the kit (and the room's package) and nothing else.
    installed = re.findall(r"^Successfully installed (.+)$", output, re.M)
    kit = room.python_says("import importlib.metadata as m; print(m.version('labkit'))")
    assert [sorted(line.split()) for line in installed] == [[f"labkit-{kit}", f"labkit-room-{kit}"]], installed
    versions = json.loads(room.python_says(
        "import json, importlib.metadata as m; "
        "print(json.dumps({n: m.version(n) for n in ('torch', 'jupyterlab', 'numpy', 'ipywidgets', 'labkit')}))"))
    for name in ("jupyterlab", "numpy", "ipywidgets"):
        assert versions[name] == _pin(name), (name, versions[name])
    assert versions["torch"].split("+")[0] == _pin("torch")
    if sys.platform.startswith("linux"):
        assert versions["torch"] == _pin("torch") + "+cpu", "binder must get the CPU build of torch"
        assert room.python_says("import importlib.metadata as m; print(m.version('triton'))") == _pin("triton")
    where = room.python_says("import labkit; print(labkit.__file__)")
    assert Path(where).resolve().is_relative_to(room.repo.resolve()), "the kit must come from the repository"
    # A room on Kubernetes runs this image: each learner's server loads the room's sandboxing extension.
    extension = room.python_says("from labkit_room import learner_server; print(learner_server.EXTENSION, "
                                 "learner_server._jupyter_server_extension_points()[0]['module'])")
    assert extension.split() == ["labkit_room.learner_server"] * 2, extension
    check = subprocess.run([room.python, "-m", "pip", "check"], env=room.environ, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@needs_wheelhouse
def test_postbuild_turns_the_news_prompt_off_for_the_binder_jupyterlab(room):
    assert room.results["postBuild"].returncode == 0, "postBuild failed (see the test above)"
    props = json.loads(room.python_says(
        "import json, sys, tempfile, pathlib\n"
        "from jupyterlab.commands import get_app_dir\n"
        "from jupyterlab_server.settings_utils import get_settings\n"
        "app = pathlib.Path(get_app_dir())\n"
        "r, _ = get_settings(str(app / 'settings'), str(app / 'schemas'), tempfile.mkdtemp(),\n"
        f"                   schema_name={lab.NOTIFICATION_PLUGIN!r})\n"
        "p = r['schema']['properties']\n"
        "print(json.dumps({k: p[k]['default'] for k in ('fetchNews', 'checkForUpdates')}))"))
    assert props == {"fetchNews": "false", "checkForUpdates": False}


@pytest.fixture(scope="module")
def room_test_tools(room):
    """pytest and nbval, added after postBuild from the wheelhouse (binder itself needs neither).
    They may add packages but must change none that postBuild installed."""
    assert room.results["postBuild"].returncode == 0, "postBuild failed (see the first test)"
    freeze = [room.python, "-m", "pip", "freeze", "--exclude-editable"]
    before = set(subprocess.run(freeze, env=room.environ, capture_output=True, text=True, check=True).stdout.split())
    added = room.run("test-tools", [room.python, "-m", "pip", "install", "-c", "requirements/ci.txt", "pytest",
                                    "nbval"], no_network=True)
    assert added.returncode == 0, _tail(added)
    after = set(subprocess.run(freeze, env=room.environ, capture_output=True, text=True, check=True).stdout.split())
    return before, after


@needs_wheelhouse
def test_notebook_00_runs_under_nbval_in_the_binder_environment(room, room_test_tools):
    before, after = room_test_tools
    assert before <= after, f"installing the test tools changed postBuild's packages: {sorted(before - after)}"
    done = room.run("notebook-00", [room.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                                    "--nbval-current-env", "--nbval-sanitize-with", "notebooks/sanitize.cfg",
                                    "notebooks/00_setup_and_tour.ipynb"])
    assert done.returncode == 0, f"notebook 00 failed in the binder environment:\n{_tail(done, 80)}"
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
    _say(f"notebook 00: {summary}")


# Runs in the binder environment: notebook 07's set-up cell, then for (a), (b) in its torch version
# and (c) the exercise's starting code and its solution, each judged by the notebook's checker.
CHECKERS_07 = r'''
import json, re, sys
nb = json.load(open("notebooks/07_exercises.ipynb"))
code = [c for c in nb["cells"] if c["cell_type"] == "code"]
text = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
solution = lambda c: "solution" in (c.get("metadata", {}).get("tags") or [])

def run(source, space):
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("%"))
    exec(compile(source, "<notebook 07>", "exec"), space)

setup = [c for c in code if "checkers as ex" in text(c)]
assert len(setup) == 1, "notebook 07's set-up cell (imports the checkers as ex) not found"
base = {}
run(text(setup[0]), base)
out = {"backend": base["labkit"].backend()}
for exercise, name, checker in (("a", "copy_idx_mapping", "check_mapping"), ("b", "gumbel_rows", "check_kernel"),
                                ("c", "build_sample_mapping", "check_dflash")):
    for kind in ("start", "solution"):
        cells = [c for c in code if re.search(rf"^def {name}\(", text(c), re.M) and solution(c) == (kind == "solution")]
        assert len(cells) == 1, (name, kind, len(cells))
        space = dict(base)
        run(text(cells[0]), space)
        result = getattr(base["ex"], checker)(space[name])
        out[f"{exercise} {kind}"] = {"solved": bool(result.solved), "message": result.message}
print(json.dumps(out))
'''


@needs_wheelhouse
def test_the_checkers_of_notebook_07_judge_on_the_torch_backend_in_the_binder_environment(room):
    assert room.results["postBuild"].returncode == 0, "postBuild failed (see the first test)"
    (WORK / "checkers_07.py").write_text(CHECKERS_07)
    done = room.run("checkers-07", [room.python, str(WORK / "checkers_07.py")], extra_env={"LABKIT_BACKEND": "torch"})
    assert done.returncode == 0, _tail(done, 60)
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdicts.pop("backend") == "torch"
    for key, verdict in verdicts.items():
        exercise, kind = key.split()
        if kind == "solution":
            assert verdict["solved"], f"({exercise}) solution: {verdict['message']}"
            assert verdict["message"].startswith(f"Exercise ({exercise}) solved."), verdict["message"]
        else:  # the starting code must not pass: the checkers can say no here too
            assert not verdict["solved"], f"({exercise}) starting code passed: {verdict['message']}"
            assert "not solved yet" in verdict["message"], verdict["message"]
    _say("notebook 07 on the torch backend: " + ", ".join(f"{k}: {'solved' if v['solved'] else 'not solved'}"
                                                         for k, v in verdicts.items()))


# Unpinned dependencies may resolve to other releases between the record and a later run, and the
# room's wheelhouse leaves out nothing the record counts: within 5% (and 3 wheels) is that drift.
DOWNLOAD_TOLERANCE = 0.05


@needs_wheelhouse
def test_the_fresh_wheelhouse_is_the_size_the_readme_says():
    import sys as _sys

    record = json.loads((ROOT / "labkit" / "data" / "cpu" / "downloads.json").read_text())
    key = f"{_sys.platform}-{__import__('platform').machine().lower()}"
    if key not in record["platforms"]:
        pytest.skip(f"the downloads record has no entry for this machine's platform {key}")
    expected = record["platforms"][key]
    wheels = list(Path(WHEELHOUSE).glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels)
    _say(f"wheelhouse: {len(wheels)} wheels, {total / 1e6:.1f} MB; the record says {expected['wheels']} wheels, "
         f"{expected['bytes'] / 1e6:.1f} MB")
    assert abs(total - expected["bytes"]) <= DOWNLOAD_TOLERANCE * expected["bytes"], (
        "the download table (labkit/data/cpu/downloads.json, docs/MAINTAINING.md) no longer matches a fresh "
        "wheelhouse: make wheelhouse RECORD=1, then make refresh")
    assert abs(len(wheels) - expected["wheels"]) <= 3  # a dependency or two of an unpinned one may come and go


def test_the_set_up_leaves_the_venvs_lock_writable_by_its_owner_alone(tmp_path):
    # uv makes .venv/.lock mode 0666: on a box that serves a room, a learner could write into the kit.
    lock = tmp_path / ".lock"
    lock.touch()
    lock.chmod(0o666)
    setup.close_venv_lock(tmp_path)
    assert oct(lock.stat().st_mode & 0o777) == "0o644"


def test_the_learners_python_is_made_again_where_the_checkout_lay_elsewhere_before(tmp_path):
    """The room's copy of this Python and its venv name their interpreter and the kit's packages by
    absolute path: one made under another mount of the checkout (the hub stage mounts it on a new
    folder each run) must not be taken for ready, or no learner's server starts."""
    runtime = pytest.importorskip("labkit_room.runtime", reason="the room's package (room/) is not installed")
    if runtime.reachable_by_others(Path(sys.executable)) and runtime.reachable_by_others(
            Path(runtime.sysconfig.get_paths()["stdlib"])):
        pytest.skip("this Python is open to every user: the room runs it as it is, and makes no copy")
    runtime.learner_python(tmp_path)
    # As a run from another mount leaves it: complete, but for another place, and its interpreter gone.
    link = tmp_path / "venv" / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    target = os.readlink(link)
    (tmp_path / "venv" / ".complete").write_text(json.dumps({"interpreter": "/srv/elsewhere/python", "site": []}))
    link.unlink()
    link.symlink_to("/srv/elsewhere/python")
    python, env = runtime.learner_python(tmp_path)
    done = subprocess.run([python, "-c", "import labkit_room, sys; print(sys.prefix)"], env={**os.environ, **env},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert os.readlink(link) == target
