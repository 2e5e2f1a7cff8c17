"""The set-up files agree with each other and with what CI runs: pyproject, CI pins,
environment.yml, README, Makefile, .ci/run and the scripts behind `make lab` and `make test`."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from checkout import checkout_files
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import labkit

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
ROOM_PYPROJECT = tomllib.loads((ROOT / "room" / "pyproject.toml").read_text())
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
CI_RUN = (ROOT / ".ci/run").read_text()


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements/ci.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            pins[req.name.lower()] = spec.version
    return pins


def _tracked_text_files() -> list[Path]:
    """The repository's text files as a clone has them (tests/checkout.py: git's list, or the tree
    without build outputs where there is no git of this tree)."""
    return [ROOT / name for name in checkout_files(untracked=True) if b"\0" not in (ROOT / name).read_bytes()[:4096]]


# -- dependencies -------------------------------------------------------------------------------

def test_ci_pins_satisfy_the_package_ranges():
    pins = _pins()
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for extra in ("lab", "test", "browser"):
        reqs += [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    for req in reqs:
        name = req.name.lower()
        assert name in pins, f"{name} is a dependency but CI does not pin it"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), (name, pins[name], str(req.specifier))


def test_the_linter_that_make_test_runs_is_installed_by_the_test_extra():
    test_extra = [Requirement(r).name for r in PYPROJECT["project"]["optional-dependencies"]["test"]]
    assert "ruff" in test_extra
    assert "tool" in PYPROJECT and "ruff" in PYPROJECT["tool"], "ruff is configured in pyproject.toml"
    assert re.search(r"^lint:.*\n\t.*ruff check", MAKEFILE, re.M)


def test_environment_yml_installs_this_package_with_the_lab_and_test_extras():
    text = (ROOT / "environment.yml").read_text()
    match = re.search(r"-\s*-e\s+\.\[([a-z,]+)\]", text)
    assert match, "environment.yml must pip-install the package itself"
    extras = set(match.group(1).split(","))
    assert extras <= set(PYPROJECT["project"]["optional-dependencies"]) and {"lab", "test"} <= extras


# -- one version, one Python claim ----------------------------------------------------------------

def test_the_version_is_written_once_in_labkit_init():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project.get("dynamic", []), \
        "pyproject.toml must not write the version itself: it reads labkit.__version__"
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "labkit.__version__"}
    assert Version(labkit.__version__)  # a valid version string
    writers = [p.relative_to(ROOT).as_posix() for p in _tracked_text_files()
               if re.search(r"""^\s*(__version__|version)\s*=\s*["']\d""", p.read_text(errors="replace"), re.M)]
    # The room's distribution is built from its own folder, which cannot read labkit.__version__: it
    # writes the same version, and this holds the two equal.
    assert sorted(writers) == ["labkit/__init__.py", "room/pyproject.toml"], f"the version is written in {writers}"
    assert ROOM_PYPROJECT["project"]["version"] == labkit.__version__, "room/pyproject.toml's version is not the kit's"


def test_a_tree_without_its_own_git_is_walked_even_inside_another_repository(tmp_path):
    # A release tarball unpacked in a folder kept in git: asking git there listed nothing, and the
    # version test found no file that writes the version.
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed: the walk is all there is")
    outer = tmp_path / "home"
    tree = outer / "labkit-0.1.0"
    (tree / "labkit").mkdir(parents=True)
    (tree / "labkit" / "__init__.py").write_text('__version__ = "0.1.0"\n')
    (tree / "build").mkdir()
    (tree / "build" / "left-over.txt").write_text("x")
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    assert checkout_files(root=tree) == ["labkit/__init__.py"]
    assert checkout_files(root=ROOT), "this checkout lists its files"


def test_the_installed_metadata_carries_the_one_version():
    # The package is installed (editable) by `make`; its metadata was built from labkit.__version__.
    try:
        installed = importlib.metadata.version("labkit")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("labkit runs from this checkout without an install (a GPU box's copy): no metadata to read")
    assert installed == labkit.__version__


def _minimum(spec: str) -> str:
    (lower,) = [s for s in SpecifierSet(spec) if s.operator == ">="]
    return lower.version


def test_readme_claims_the_python_that_pyproject_requires_and_ci_tests():
    required = _minimum(PYPROJECT["project"]["requires-python"])
    claims = set(re.findall(r"Python (\d+\.\d+)(?: or newer|\+)", README))
    assert claims == {required}, f"README claims Python {claims}, pyproject requires >= {required}"
    tested = set(re.findall(r"CI tests Python (\d+\.\d+)", README))
    assert tested == {required}, "README must say which Python CI tests, and it must be the minimum claimed"
    env_python = re.search(r"-\s*python\s*=\s*(\d+\.\d+)", (ROOT / "environment.yml").read_text())
    assert env_python and env_python.group(1) == required
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py" + required.replace(".", "")
    # The tests themselves need it (tomllib), and so do the CI pins (numpy 2.4.6).
    assert sys.version_info[:2] >= tuple(int(x) for x in required.split("."))


# -- nothing refers outside the repository --------------------------------------------------------

# Assembled from parts, so that this file does not match its own search.
OUTSIDE_REFERENCES = (".." + "/shared", "shared" + "/design", "shared" + "/seeds", "/work" + "/shared")


def test_no_tracked_file_refers_to_the_shared_folder_outside_the_repository():
    hits = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if any(ref in line for ref in OUTSIDE_REFERENCES):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not hits, "references to files users do not have:\n" + "\n".join(hits)


def test_every_capitalised_markdown_file_named_in_the_repository_exists_in_it():
    present = {p.name for p in _tracked_text_files() if p.suffix == ".md"}
    missing = {}
    for path in _tracked_text_files():
        for name in set(re.findall(r"\b([A-Z][A-Z0-9_]+\.md)\b", path.read_text(errors="replace"))):
            if name not in present:
                missing.setdefault(name, []).append(path.relative_to(ROOT).as_posix())
    assert not missing, f"named but not in the repository: {missing}"
    assert (ROOT / "docs/MECHANICS.md").is_file()


# -- the two commands ------------------------------------------------------------------------------

def test_scripts_holds_only_makes_own_helpers():
    # Every other command is `python -m labkit COMMAND` (tests/test_cli.py checks that --help lists them).
    scripts = sorted(name.removeprefix("scripts/") for name in checkout_files(untracked=True)
                     if name.startswith("scripts/"))
    assert scripts == ["README.md", "check_make_vars.py", "hub_stage.py", "timed"]
    makefile_scripts = set(re.findall(r"scripts/[\w.-]+", MAKEFILE + CI_RUN))
    assert makefile_scripts == {"scripts/timed", "scripts/check_make_vars.py", "scripts/hub_stage.py"}, makefile_scripts



def test_readme_gives_exactly_the_two_commands_and_ci_runs_the_test_one():
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block, "README needs a ```sh block with the two commands"
    commands = [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert commands == ["make lab", "make test"]
    assert re.search(r"^lab:", MAKEFILE, re.M) and re.search(r"^test:", MAKEFILE, re.M)
    assert re.search(r"^(if ! )?make test\b", CI_RUN, re.M)


def test_make_test_runs_the_linter_first_and_every_stage():
    (prereqs,) = re.findall(r"^test:((?:[^\n]*\\\n)*[^\n]*)", MAKEFILE, re.M)
    stages = [s for s in prereqs.replace("\\\n", " ").split() if s != "test-clock"]
    # The room stage begins after the linter, runs beside the three stages that follow, and is waited
    # for; the hub stage runs beside the notebook, browser and Triton stages; the Triton 3.9 stage runs
    # beside the browser stage.
    assert stages == ["lint", "test-room-begin", "test-unit", "test-unit-backend", "test-hub-begin", "test-notebooks",
                      "test-room-end", "test-triton-next-begin", "test-browser", "test-triton-next-end",
                      "test-hub-end"]
    # The hub's test runs in its own stage, not twice.
    assert "--ignore=tests/test_hub.py" in _make_dry_run("test-unit")
    assert "scripts/hub_stage.py" in _make_dry_run("test-hub")
    # The same stage either way: in the background within make test, in the foreground alone.
    triton = "triton-" + re.search(r"^TRITON_NEXT := (\S+)", MAKEFILE, re.M).group(1)
    for stage, target in (("room", "test-room"), ("hub", "test-hub"), (triton, "test-triton-next")):
        begin, alone = _make_dry_run(f"{target}-begin"), _make_dry_run(target)
        if not sys.platform.startswith("linux") and target == "test-triton-next":
            assert "skipped" in begin and "skipped" in alone
            continue
        began = re.search(rf"scripts/timed --background \$PPID {stage} (.*)", begin)
        ran = re.search(rf"scripts/timed {stage} (.*)", alone)
        assert began and ran and began.group(1) == ran.group(1), (begin, alone)
        assert begin[:began.start()] == alone[:ran.start()], (begin, alone)  # the same environment
        assert f"scripts/timed --wait {stage}" in _make_dry_run(f"{target}-end").splitlines()
        # JOBS=1: one thing at a time, so -begin runs the stage in the foreground and -end waits for nothing.
        one = subprocess.run(["make", "-n", f"{target}-begin", f"{target}-end", "JOBS=1"], cwd=ROOT,
                             env={k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}, capture_output=True,
                             text=True, check=True).stdout
        assert "--background" not in one and "--wait" not in one
        alone_one = re.search(rf"scripts/timed +{stage} (.*)", one)
        assert alone_one and alone_one.group(1) == re.sub(r"-n \d+ --dist worksteal", "-p no:xdist", ran.group(1))


def test_ci_runs_the_backend_choices_tests_under_a_value_of_labkit_backend_too():
    # The unit stage runs with LABKIT_BACKEND unset; these run again with it set.
    recipe = _make_dry_run("test-unit-backend")
    if sys.platform.startswith("linux"):
        assert "LABKIT_BACKEND=interpreter" in recipe and "tests/test_backends.py tests/test_cli.py" in recipe
    else:
        assert "skipped" in recipe
    # And the whole of the unit and notebook stages under each value, on demand (the GPU box adds triton).
    every = _make_dry_run("test-every-backend")
    assert all(word in every for word in ("unset", "'torch'", "'interpreter'", "'triton'", "cuda.is_available()",
                                          "env -u LABKIT_BACKEND", "tests --ignore=tests/browser", "notebooks"))


def test_the_makefiles_comments_state_no_timings_of_their_own():
    # Measured times live in records (the make-test block); a comment's "about 20 s"
    # goes stale unseen. Targets ("< 10 s") are not measurements.
    comments = [line for line in MAKEFILE.splitlines() if line.lstrip().startswith("#")]
    timed = [line for line in comments
             if re.search(r"(?<![<\d])[\s(]\d+(\.\d+)?(-\d+)?\s*(s|sec|seconds|min|minutes)\b", line)]
    assert not timed, f"the Makefile's comments state timings: {timed}"


def test_readme_make_targets_exist():
    targets = set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, re.M))
    used = set(re.findall(r"\bmake ([a-z][a-z-]*)", README))
    assert used and used <= targets, f"README names make targets the Makefile lacks: {used - targets}"


def _make_dry_run(target: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "LABKIT_REQUIRE_BROWSER"} | env
    return subprocess.run(["make", "-n", target], cwd=ROOT, env=environ, capture_output=True, text=True,
                          check=True).stdout


def test_browser_stage_may_skip_unless_ci_requires_it():
    assert "--allow-skip" in _make_dry_run("test-browser")
    assert "--allow-skip" not in _make_dry_run("test-browser", LABKIT_REQUIRE_BROWSER="1")
    assert "LABKIT_REQUIRE_BROWSER=1" in CI_RUN


def test_ci_installs_debians_chromium_and_never_downloads_a_browser():
    assert re.search(r"apt-get install\b.*\bchromium\b", CI_RUN)
    assert "playwright install" not in CI_RUN and "npx" not in CI_RUN


def test_triton_next_is_installed_only_when_missing():
    # A stamp inside a folder named after the version: a second run installs nothing (no pip
    # "Target directory ... already exists" warnings), a new version gets a fresh folder.
    assert re.search(r"^test-triton-next: \$\(TRITON_NEXT_DIR\)/\.installed", MAKEFILE, re.M)
    assert re.search(r"^TRITON_NEXT_DIR := .*\$\(TRITON_NEXT\)", MAKEFILE, re.M)



@pytest.mark.parametrize("target", ["test-unit", "test-unit-backend", "test-notebooks", "test-triton-next",
                                    "test-browser", "test-hub"])
def test_each_pytest_stage_shares_the_cpus_math_threads_among_its_processes(target):
    # Two test processes with a thread per core each oversubscribe the cores, and torch's OpenMP
    # threads spin waiting on one another: each process gets cpus // JOBS threads (at least 1).
    if not sys.platform.startswith("linux") and target in ("test-unit-backend", "test-triton-next"):
        pytest.skip(f"{target} runs no tests off Linux (Triton ships for Linux only)")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MAKEFLAGS")}
    for jobs in (1, 2, 4):
        recipe = subprocess.run(["make", "-n", target, f"JOBS={jobs}"], cwd=ROOT, env=env, capture_output=True,
                                text=True, check=True).stdout
        want = max(1, cpus // jobs)
        assert f"OMP_NUM_THREADS={want} MKL_NUM_THREADS={want}" in recipe, (jobs, recipe[-600:])
    # A caller's own OMP_NUM_THREADS wins.
    recipe = subprocess.run(["make", "-n", target, "JOBS=2"], cwd=ROOT, env=env | {"OMP_NUM_THREADS": "3"},
                            capture_output=True, text=True, check=True).stdout
    assert "OMP_NUM_THREADS=3 MKL_NUM_THREADS=3" in recipe, recipe[-600:]

# -- a bad value of a make variable: one line, exit 2, before anything runs -------------------------

def _make(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LABKIT_BACKEND", "JOBS", "TORCH", "WHEELHOUSE", "MAKEFLAGS", "MAKELEVEL")}
    env.update(env_extra or {})
    return subprocess.run(["make", "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("goal,setting,named,choices,how", [
    ("repro", "LABKIT_BACKEND=cuda", "LABKIT_BACKEND='cuda'", "triton, interpreter, torch", "environment"),
    ("repro", "LABKIT_BACKEND=cuda", "LABKIT_BACKEND='cuda'", "triton, interpreter, torch", "argument"),
    ("test", "JOBS=two", "JOBS='two'", "a whole number from 1", "argument"),
    ("test-unit", "JOBS=0", "JOBS='0'", "a whole number from 1", "environment"),
    ("lab", "TORCH=rocm", "TORCH='rocm'", "cpu, cuda", "argument"),
    ("lab", "WHEELHOUSE=/nowhere/wheels", "WHEELHOUSE='/nowhere/wheels'", "make wheelhouse", "argument"),
    ("lab", "INSTALLER=conda", "INSTALLER='conda'", "auto (uv where it installs, else pip) or pip", "argument"),
])
def test_a_bad_make_variable_is_one_line_that_names_it_and_the_choices_exit_2(goal, setting, named, choices, how):
    name, value = setting.split("=", 1)
    out = _make(goal, setting) if how == "argument" else _make(goal, env_extra={name: value})
    assert out.returncode == 2 and not out.stdout, out.stdout  # nothing ran, not even in a dry run
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert named in lines[0] and choices in lines[0], lines[0]


def test_good_make_variables_pass_the_check_and_clean_needs_none(tmp_path):
    (tmp_path / "x-1.0-py3-none-any.whl").write_bytes(b"")
    for args in (["repro", "LABKIT_BACKEND=Torch", "JOBS=3", "TORCH=cuda", f"WHEELHOUSE={tmp_path}"],
                 ["repro", "LABKIT_BACKEND= interpreter"],
                 ["wheelhouse", f"WHEELHOUSE={tmp_path / 'to-be-filled'}"],  # there it is where wheels go
                 ["clean", "LABKIT_BACKEND=cuda", "JOBS=x"]):
        out = _make(*args)
        assert out.returncode == 0, (args, out.stderr)


def test_the_make_check_knows_the_kits_backends_and_the_set_ups_torch_builds():
    import labkit.backends
    from labkit.tools import setup

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import check_make_vars
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert check_make_vars.backends() == labkit.backends.BACKENDS
    assert all(check_make_vars.backend_problem(b) is None for b in labkit.backends.BACKENDS)
    assert all(setup.torch_problem(t) is None for t in setup.TORCH_CHOICES)
    assert check_make_vars.torch_problem is setup.torch_problem


# -- scripts/timed: stage times and the browser stage's skip ---------------------------------------

TIMED = ROOT / "scripts" / "timed"


def _timed(*args: str, log: Path, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(TIMED), *args], env=dict(os.environ, LABKIT_STAGE_TIMES=str(log)),
                          capture_output=True, text=True, preexec_fn=preexec_fn)


def test_timed_reports_each_stage_and_passes_on_pytest_exit_5_only_when_allowed(tmp_path):
    log = tmp_path / "times.txt"
    assert _timed("--reset", log=log).returncode == 0
    assert _timed("ok", "true", log=log).returncode == 0
    skipped = _timed("--allow-skip", "browser", "sh", "-c", "exit 5", log=log)
    assert skipped.returncode == 0 and "skipped" in skipped.stdout
    assert _timed("strict", "sh", "-c", "exit 5", log=log).returncode == 5
    assert _timed("--allow-skip", "broken", "sh", "-c", "exit 1", log=log).returncode == 1
    statuses = [line.split()[::2] for line in log.read_text().splitlines()]
    assert statuses == [["ok", "passed"], ["browser", "skipped"], ["strict", "FAILED(exit-5)"],
                        ["broken", "FAILED(exit-1)"]]
    summary = _timed("--summary", log=log).stdout
    assert all(name in summary for name in ("ok", "browser", "strict", "broken", "total"))


def test_a_background_stage_shows_its_output_and_status_when_waited_for_and_the_summary_gives_the_wall(tmp_path):
    log = tmp_path / "times.txt"
    me = str(os.getpid())  # the process the stage lives beside (make, in make test)
    assert _timed("--reset", log=log).returncode == 0
    begun = _timed("--background", me, "bg", "sh", "-c", "printf '%s-%s\\n' from the-stage; sleep 4", log=log)
    assert begun.returncode == 0 and "from-the-stage" not in begun.stdout  # held back until the wait
    assert _timed("fg", "sleep", "4", log=log).returncode == 0  # a stage meanwhile, side by side
    waited = _timed("--wait", "bg", log=log)
    assert waited.returncode == 0 and "from-the-stage" in waited.stdout and "passed" in waited.stdout
    failing = _timed("--background", me, "bad", "sh", "-c", "exit 3", log=log)
    assert failing.returncode == 0
    assert _timed("--wait", "bad", log=log).returncode == 3
    assert [line.split()[:1] + line.split()[2:] for line in log.read_text().splitlines()] == [
        ["fg", "passed"], ["bg", "passed", "beside"], ["bad", "FAILED(exit-3)", "beside"]]
    summary = _timed("--summary", log=log).stdout
    assert re.search(r"bg\s+\d+ s  passed, beside other stages", summary), summary
    total = re.search(r"total\s+(\d+) s.*add up to (\d+) s", summary)
    assert total and int(total.group(1)) < int(total.group(2)), summary  # the wall, not the sum
    nothing = _timed("--wait", "never-started", log=log)
    assert nothing.returncode == 2 and "never-started" in nothing.stderr


def test_a_background_stage_ends_when_the_make_beside_it_exits(tmp_path):
    log = tmp_path / "times.txt"
    running = tmp_path / "stage-running"
    # Stands in for a make whose next stage fails: it exits once the stage is running (on a loaded
    # machine a Python start can take longer than any fixed wait).
    make = subprocess.Popen(["sh", "-c", f"while [ ! -e {running} ]; do sleep 0.1; done"])
    # SIGINT first, as Ctrl-C, so that a pytest in the stage runs its teardown.
    stage = (f"import pathlib, time\ntry:\n    pathlib.Path({str(running)!r}).touch()\n    time.sleep(317)\n"
             "except KeyboardInterrupt:\n    print('teardown-ran')")
    # Started with SIGINT ignored, as a make in the background of a CI runner's shell passes it on.
    begun = _timed("--background", str(make.pid), "long", sys.executable, "-c", stage, log=log,
                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert begun.returncode == 0
    make.wait()
    started = time.monotonic()
    waited = _timed("--wait", "long", log=log)
    assert waited.returncode != 0 and time.monotonic() - started < 60
    assert "the make that started it has exited" in waited.stdout and "teardown-ran" in waited.stdout
    leftover = subprocess.run(["pgrep", "-f", "time.sleep.317"], capture_output=True, text=True).stdout
    assert leftover.strip() == ""


# -- the hub stage where its test cannot run ---------------------------------------------------------

def test_the_hub_stage_as_a_user_other_than_root_says_why_in_one_line_and_passes(tmp_path):
    """`make test` as anyone but root: the room's test skips itself (it makes system users), pytest
    then collects nothing and exits 5; the stage says why in one line and passes. Whoever runs this,
    the stage and the pytest it starts see a user id of 1000 (a sitecustomize on PYTHONPATH)."""
    fake = tmp_path / "not-root"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text("import os\nos.geteuid = os.getuid = lambda: 1000\n")
    (line,) = [x for x in _make_dry_run("test-hub").splitlines() if "scripts/timed hub " in x]
    line = re.sub(r"(?<!\S)\S*/bin/python(?!\S)", sys.executable, line)  # the Python these tests run in
    log = tmp_path / "times.txt"
    env = dict(os.environ, LABKIT_STAGE_TIMES=str(log),
               PYTHONPATH=os.pathsep.join(filter(None, [str(fake), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(["sh", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    why = [x for x in out.splitlines() if x.startswith("== stage hub: not run here:")]
    assert len(why) == 1 and "needs root" in why[0], out
    assert log.read_text().split()[::2] == ["hub", "passed"], out


# -- python -m labkit lab: make lab as root and not ---------------------------------------------------

@pytest.mark.parametrize("as_root", [False, True])
def test_make_lab_passes_allow_root_only_to_root(as_root):
    from labkit.tools import lab

    cmd = lab.lab_command("127.0.0.1", 8123, as_root=as_root, open_browser=False)
    assert ("--allow-root" in cmd) == as_root
    assert "--ServerApp.port=8123" in cmd and "--no-browser" in cmd
    assert not [word for word in cmd if "token" in word.lower()]  # the token travels in the environment
    assert lab.lab_env("tok")[lab.TOKEN_ENV] == "tok"
    assert cmd[-1] == lab.FIRST_NOTEBOOK and (ROOT / lab.FIRST_NOTEBOOK).is_file()
    assert lab.lab_url("127.0.0.1", 8123, "tok") == (
        f"http://127.0.0.1:8123/lab/tree/{lab.FIRST_NOTEBOOK}?token=tok")


# -- what each distribution installs --------------------------------------------------------------

def _build_wheel(source: Path, out: Path) -> zipfile.ZipFile:
    """The wheel pip builds of the project at `source` (a copy of this checkout's files, so that the
    build leaves nothing in the tree), with the build backend of this environment."""
    (backend,) = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    try:
        have = importlib.metadata.version(backend.name)
    except importlib.metadata.PackageNotFoundError:
        have = None
    if have is None or not backend.specifier.contains(have):
        pytest.skip(f"this environment has {backend.name} {have or 'not at all'}, and the wheels build with "
                    f"{backend} (make's set-up installs it, with torch)")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-q", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, zipfile.ZipFile]:
    """The lesson's wheel and the room's, built from a copy of the checkout's files."""
    tree = tmp_path_factory.mktemp("tree")
    for name in checkout_files(untracked=True):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)
    out = tmp_path_factory.mktemp("wheels")
    return {"labkit": _build_wheel(tree, out / "labkit"), "room": _build_wheel(tree / "room", out / "room")}


def _imports_of(source: str) -> set[str]:
    """The top-level packages a module's source imports (at the top or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_the_lessons_wheel_holds_the_lesson_and_its_data_and_nothing_of_the_room(wheels):
    names = set(wheels["labkit"].namelist())
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert packages == {"labkit"}, packages
    # Every module and data file of the package in the checkout, and the records and models among them.
    tracked = {n for n in checkout_files() if n.startswith("labkit/") and not n.endswith(".pyc")}
    assert tracked - names == set(), f"files of labkit/ the wheel leaves out: {sorted(tracked - names)}"
    assert {"labkit/data/draft.pt", "labkit/data/target.pt", "labkit/data/corpus.txt"} <= names
    assert any(n.startswith("labkit/data/gpu/") for n in names) and any(n.startswith("labkit/data/cpu/") for n in names)
    # No room code and no instrument: no module that imports JupyterHub, its culler or the room, and no
    # file of room/ (its package, its instruments, its deploy files) under any name.
    for name in sorted(n for n in names if n.endswith(".py")):
        imported = _imports_of(wheels["labkit"].read(name).decode())
        assert not imported & {"jupyterhub", "jupyterhub_idle_culler", "labkit_room"}, (name, imported)
    room_files = {(ROOT / n).read_bytes(): n for n in checkout_files() if n.startswith("room/")}
    assert {"room/bench/neighbour.py", "room/labkit_room/control.py"} <= {*room_files.values()}
    copied = sorted(f"{n} (= {room_files[data]})" for n in names if (data := wheels["labkit"].read(n)) in room_files)
    assert not copied, f"files of room/ in the lesson's wheel: {copied}"


def test_the_rooms_wheel_holds_the_room_and_its_records_and_depends_on_the_lesson(wheels):
    names = set(wheels["room"].namelist())
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert packages == {"labkit_room"}, packages
    tracked = {n.removeprefix("room/") for n in checkout_files() if n.startswith("room/labkit_room/")}
    assert tracked and tracked - names == set(), f"files of the room the wheel leaves out: {sorted(tracked - names)}"
    assert {"labkit_room/data/cpu.json", "labkit_room/data/kernel_memory.json"} <= names
    instruments = {(ROOT / n).read_bytes(): n for n in checkout_files() if n.startswith("room/bench/")}
    assert len(instruments) >= 4
    copied = sorted(n for n in names if wheels["room"].read(n) in instruments)
    assert not copied, f"instruments in the room's wheel: {copied}"
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    requires = [Requirement(line.split(":", 1)[1].strip()).name
                for line in wheels["room"].read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    assert "labkit" in requires and "jupyterhub" in requires, requires
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "labkit_room.record:renderers" in wheels["room"].read(entry_points).decode()


def _requirements(project: dict) -> list[Requirement]:
    extras = project.get("optional-dependencies", {}).values()
    return [Requirement(r) for r in project["dependencies"] + [r for extra in extras for r in extra]]


def test_the_lessons_distribution_depends_on_nothing_of_the_room():
    # JupyterHub and the room's other packages come with the room's distribution, never with the lesson's.
    room_requires = _requirements(ROOM_PYPROJECT["project"])
    room = {req.name.lower() for req in room_requires} - {"labkit"}
    assert room and not room & {req.name.lower() for req in _requirements(PYPROJECT["project"])}
    # Alone, the room needs nothing but the lesson: the image binder/ describes carries it without JupyterHub.
    assert [Requirement(r).name for r in ROOM_PYPROJECT["project"]["dependencies"]] == ["labkit"]
    pins = _pins()
    for req in room_requires:
        if req.name != "labkit":  # CI pins each of the room's dependencies within its range
            pin = pins.get(req.name.lower())
            assert pin and req.specifier.contains(Version(pin), prereleases=True), req


@pytest.mark.parametrize("argv", [["hub", "start", "--learners", "2"], ["hub", "--help"], ["hub", "bench"]])
def test_the_hub_command_without_the_room_says_how_to_install_it_in_one_line(argv):
    # A lesson installed alone: the room's package cannot be imported (None in sys.modules stops it).
    code = ("import sys; sys.modules['labkit_room'] = None; from labkit.__main__ import main; "
            f"sys.exit(main({argv!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("python -m labkit hub: error:") and "pip install -e 'room/[hub]'" in done.stderr


def test_the_rooms_measures_outside_a_checkout_say_so_in_one_line(monkeypatch, tmp_path, capsys):
    # An installed room without the checkout's room/bench/ (the instruments are in no distribution).
    from labkit.__main__ import main
    from labkit_room import cli

    monkeypatch.setattr(cli, "BENCH", tmp_path / "bench")
    for verb in ("bench", "kernel-memory"):
        assert main(["hub", verb, "--help"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "runs from a checkout of the kit" in err, err
    # Nor does it write the Kubernetes files into the installed package's folder.
    monkeypatch.setattr(cli, "ROOM", tmp_path)
    monkeypatch.setattr(cli, "DEPLOY", tmp_path / "deploy")
    assert main(["hub", "values", "--write"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leave out --write" in err and not (tmp_path / "deploy").exists(), err
    assert main(["hub", "values"]) == 0 and "# --- z2jh-values.yaml" in capsys.readouterr().out
