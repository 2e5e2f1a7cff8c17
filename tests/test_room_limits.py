"""The kernel's side of a shared server's limits (labkit_room.limits): the GPU share the hub sets is
applied to every CUDA device and reported by labkit.describe(), bad values are refused, and a memory
error under a limit gets its one explaining line. (tests/test_hub.py checks the same in real
learners' kernels under a running hub; here, a fake torch stands in for a GPU.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from room_kernel_session import room_kernel

from labkit_room import limits


class FakeCuda:
    def __init__(self, devices):
        self.devices = devices
        self.calls = []

    def is_available(self):
        return self.devices > 0

    def device_count(self):
        return self.devices

    def set_per_process_memory_fraction(self, share, device):
        self.calls.append((share, device))


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(limits, "_applied", {})
    monkeypatch.delenv(limits.GPU_SHARE_ENV, raising=False)
    monkeypatch.delenv(limits.MEMORY_LIMIT_ENV, raising=False)
    return monkeypatch


def test_the_share_is_applied_to_every_gpu_once_and_described(fresh):
    fresh.setenv(limits.GPU_SHARE_ENV, "0.03")
    cuda = FakeCuda(2)
    limits.apply(SimpleNamespace(cuda=cuda))
    limits.apply(SimpleNamespace(cuda=cuda))
    assert cuda.calls == [(0.03, 0), (0.03, 1)]
    described = limits.describe()["gpu_memory_share"]
    assert described == f"0.030 of each GPU's memory ({limits.GPU_SHARE_ENV}, applied)"


def test_without_a_gpu_or_a_share_nothing_is_held(fresh):
    cuda = FakeCuda(0)
    limits.apply(SimpleNamespace(cuda=cuda))
    fresh.setattr(limits, "_has_cuda", lambda: False)
    assert cuda.calls == [] and limits.describe() == {"gpu_memory_share": "no GPU", "memory_limit": "none set"}
    fresh.setenv(limits.GPU_SHARE_ENV, "0.25")
    assert limits.describe()["gpu_memory_share"] == f"no GPU ({limits.GPU_SHARE_ENV}=0.250 holds nothing here)"
    fresh.setattr(limits, "_has_cuda", lambda: True)
    fresh.delenv(limits.GPU_SHARE_ENV)
    assert limits.describe()["gpu_memory_share"] == "whole GPU (no share set)"


@pytest.mark.parametrize("text", ["0", "1.5", "-0.1", "half", "nan"])
def test_a_bad_share_is_refused_with_its_name(fresh, text):
    fresh.setenv(limits.GPU_SHARE_ENV, text)
    with pytest.raises(ValueError, match=limits.GPU_SHARE_ENV):
        limits.gpu_share()


def test_memory_errors_under_a_limit_say_which_limit(fresh):
    class OutOfMemoryError(RuntimeError):
        pass

    assert limits.limit_message(MemoryError()) is None  # no limit set: no extra line
    fresh.setenv(limits.MEMORY_LIMIT_ENV, str(2 * 2**30))
    fresh.setenv(limits.GPU_SHARE_ENV, "0.25")
    assert "memory limit is 2.0 GiB" in limits.limit_message(MemoryError())
    assert "0.250 of the GPU's memory" in limits.limit_message(OutOfMemoryError("CUDA out of memory"))
    assert limits.limit_message(RuntimeError("shape mismatch")) is None


def test_an_ipython_shell_shows_the_line_under_the_traceback(fresh):
    fresh.setenv(limits.MEMORY_LIMIT_ENV, str(2**30))
    code = textwrap.dedent("""
        from IPython.testing.globalipapp import start_ipython
        from labkit_room import limits
        shell = start_ipython()
        assert limits.install_messages(shell)
        shell.run_cell("raise MemoryError()")
        shell.run_cell("raise RuntimeError('an ordinary error')")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert out.count("labkit: this server's memory limit is 1.0 GiB") == 1 and "an ordinary error" in out


def test_a_rooms_kernel_applies_the_limits_at_its_start_and_import_labkit_alone_does_not(tmp_path, monkeypatch):
    """The room's kernel spec starts `python -m labkit_room.kernel`: its labkit.describe() names
    the limits and a MemoryError gets the room's line. The same variables in a plain process that
    imports labkit change nothing: the core knows nothing of rooms."""
    pytest.importorskip("ipykernel", reason="the room's kernel is ipykernel's (the lab extra)")
    from labkit_room import kernel_launcher, runtime

    data = runtime.room_kernel_spec(tmp_path, sys.executable, Path(kernel_launcher.__file__))
    spec = json.loads((data / "kernels" / "python3" / "kernel.json").read_text())
    assert spec["argv"][1:4] == ["-I", "-S", kernel_launcher.__file__]
    assert spec["argv"][5:10] == [sys.executable, "-P", "-s", "-m", "labkit_room.kernel"]
    monkeypatch.setenv("JUPYTER_PATH", str(data))  # where this process's kernel manager finds the spec
    env = {**os.environ, limits.MEMORY_LIMIT_ENV: str(3 * 2**30), limits.PROCESS_MEMORY_ENV: str(int(2.5 * 2**30)),
           limits.GPU_SHARE_ENV: "0.5"}
    # ipc channels, as the room's: the kernel's loopback is its own.
    with room_kernel(tmp_path, env) as session:
        session.run("import labkit; print(labkit.describe())", timeout=120)
        session.run("raise MemoryError()")
    out = session.printed
    text = "\n".join(out)
    said = "3.0 GiB for all of this learner's processes (MEM_LIMIT), 2.5 GiB per process"
    assert f"'memory_limit': \"{said}\"" in text, text
    assert "this server's memory limit is 2.5 GiB per process" in text, text
    plain = subprocess.run([sys.executable, "-c", "import labkit, sys; d = labkit.describe(); "
                            "print(sorted(d)); "
                            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'labkit_room'))"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert plain.returncode == 0, plain.stderr
    assert "memory_limit" not in plain.stdout and "gpu_memory_share" not in plain.stdout
    assert plain.stdout.strip().splitlines()[-1] == "[]"  # no module of the room was imported


def test_a_rooms_kit_copy_holds_07s_starting_code_and_no_solution(tmp_path):
    """The learners import a copy of the package: its checkers still know each exercise's starting code
    (read from the copy's notebook 07, the student edition) and so say "not attempted" on it."""
    from labkit.workshop.exercises.record import NOTEBOOK
    from labkit_room import runtime

    copy = runtime.kit_copy(tmp_path)
    assert sorted(p.name for p in (copy / "notebooks").iterdir()) == [NOTEBOOK]
    nb = json.loads((copy / "notebooks" / NOTEBOOK).read_text())
    assert not [c for c in nb["cells"] if "solution" in c["metadata"].get("tags", [])]
    code = ("from labkit import paths; from labkit.workshop.exercises.starting_code import starting_code as s\n"
            "print(paths.REPO); print(all(s(n) for n in ('copy_idx_mapping', 'gumbel_rows', 'q_offset')))")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)  # as a learner's kernel: not in the checkout
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(copy), "True"]
