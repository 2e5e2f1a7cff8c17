"""A learner who sits down late starts fast: the room's packages and kit copy carry their byte-code,
a learner's Jupyter server does not import torch for the kit's extension, and the bench splits each
start's time into its parts (the figures themselves are the bench's, room/bench/hub_bench.py)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

runtime = pytest.importorskip("labkit_room.runtime", reason="the room's distribution (room/) is not installed here")


def _without_bytecode(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.py") if not Path(importlib.util.cache_from_source(str(p))).is_file()]


def test_the_learners_kit_copy_carries_byte_code_beside_every_module(tmp_path):
    # The learners cannot write __pycache__ into the room's copy: without it every kernel compiles the kit.
    copy = runtime.kit_copy(tmp_path)
    modules = list(copy.rglob("*.py"))
    assert len(modules) > 100 and _without_bytecode(copy) == []
    # ... byte-code the learners may read, as they read the modules.
    pyc = Path(importlib.util.cache_from_source(str(copy / "labkit" / "__init__.py")))
    assert pyc.stat().st_mode & 0o004


def _package(root: Path, name: str) -> Path:
    pkg = root / name
    (pkg / "sub").mkdir(parents=True)
    for rel in ("__init__.py", "core.py", "sub/__init__.py", "sub/deep.py"):
        (pkg / rel).write_text(f"VALUE = {rel!r}\n")
    return pkg


def test_the_room_compiles_packages_installed_without_byte_code_once(tmp_path, monkeypatch):
    pkg = _package(tmp_path, "labkit_nopyc_pkg")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert runtime.packages_without_bytecode(("labkit_nopyc_pkg",)) == [pkg]
    said = []
    assert runtime.compile_learner_packages(said.append, names=("labkit_nopyc_pkg",)) == [pkg]
    assert _without_bytecode(pkg) == [] and "compiled the byte-code of" in said[0]
    assert runtime.compile_learner_packages(said.append, names=("labkit_nopyc_pkg",)) == []  # once


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another owner is made by root")
def test_the_room_leaves_another_owners_package_alone_and_says_how(tmp_path, monkeypatch):
    pkg = _package(tmp_path, "labkit_nopyc_theirs")
    for path in [pkg, *pkg.rglob("*")]:
        os.chown(path, 65534, 65534)
    monkeypatch.syspath_prepend(str(tmp_path))
    said = []
    assert runtime.compile_learner_packages(said.append, names=("labkit_nopyc_theirs",)) == []
    assert not list(pkg.rglob("__pycache__")) and f"python -m compileall -q {pkg}" in said[0]


SERVER_IMPORTS = """\
import json, sys
import jupyter_server.serverapp
jupyter_server.serverapp.ServerApp.instance()  # what a Jupyter server has made when it loads its extensions
import labkit.tools.lab_server, labkit_room.learner_server
quiet = "torch" not in sys.modules
import labkit
describe = callable(labkit.describe)  # the kit's functions still answer, from labkit.backends
print(json.dumps({"no_torch": quiet, "describe": describe, "torch_now": "torch" in sys.modules}))
"""


def test_a_learners_server_loads_the_kits_extensions_without_torch():
    pytest.importorskip("jupyter_server")
    out = subprocess.run([sys.executable, "-c", SERVER_IMPORTS], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"no_torch": True, "describe": True, "torch_now": True}
    # Anywhere else (a kernel, a script, one that imported the server's module) `import labkit` still
    # brings the backends first.
    for first in ("", "import jupyter_server.serverapp; "):
        code = first + "import sys, labkit; print('labkit.backends' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "True", first


@pytest.fixture
def bench(monkeypatch):
    from labkit_room import cli

    monkeypatch.syspath_prepend(str(cli.BENCH))
    import hub_bench
    import workload

    return hub_bench, workload


def test_the_first_cell_splits_into_its_imports_and_the_rest(bench):
    from labkit import paths
    from labkit_room.client import notebook_cells

    _, workload = bench
    first = notebook_cells(paths.NOTEBOOKS / workload.NOTEBOOKS[0])[0]
    imports, rest = workload.split_imports(first)
    assert imports + rest == first
    assert "import labkit" in imports and "import torch" in imports and "labkit." in rest
    assert not rest.lstrip().startswith(("import ", "from ", "%"))
    assert workload.split_imports("from a import (\n  b)\nprint(b)\n") == ("", "from a import (\n  b)\nprint(b)\n")


def test_a_starts_split_adds_up_to_its_first_output_and_refuses_marks_out_of_order(bench):
    hub_bench, _ = bench
    split = hub_bench.first_output_split(10.0, 13.25, 15.0, 15.5, 15.625)
    parts = [split[k] for k, _ in hub_bench.PARTS]
    assert parts == [3.25, 1.75, 0.5, 0.125] and sum(parts) == split["first_output_s"] == 5.625
    with pytest.raises(ValueError, match="out of order"):
        hub_bench.first_output_split(10.0, 13.0, 12.0, 15.0, 16.0)
    per = [{"split": hub_bench.first_output_split(0.0, 3.0, 4.0, 5.0, 5.5)},
           {"split": hub_bench.first_output_split(0.0, 6.0, 8.0, 9.0, 9.25)}, {"split": None}]
    row = hub_bench._median_split(per)
    worst = row["worst_learner"]
    assert worst["first_output_s"] == 9.25 == sum(worst[k] for k, _ in hub_bench.PARTS)
    said = hub_bench.describe_split(row)
    assert said.startswith("first output, worst learner: 9.2 s = server start 6.0 + kernel start 2.0")


def test_the_gpu_box_compiles_the_byte_code_of_the_site_it_installs_before_any_room_runs():
    # Its wheels go in with --no-compile into a root-owned folder: the learners could not write the byte-code.
    from labkit import paths

    script = (paths.REPO / "room" / "bench" / "gpu_box.sh").read_text()
    lines = [line.strip() for line in script.splitlines() if not line.lstrip().startswith("#")]
    install = next(i for i, line in enumerate(lines) if "pip install" in line and "--target" in line)
    site = lines[install].split("--target", 1)[1].split()[0]
    compiled = next(i for i, line in enumerate(lines) if "compileall" in line and site in line.split())
    bench = next(i for i, line in enumerate(lines) if "labkit hub bench" in line or "pytest" in line)
    assert install < compiled < bench
