"""Backend choice: visible, selectable, and a plain torch fallback where Triton is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import labkit
from labkit import backends
from labkit.errors import LabkitInputError


def _python(code: str, env_extra: dict, tmp_path=None, block_triton=False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    env.update(env_extra)
    if block_triton:
        stub = tmp_path / "stub"
        stub.mkdir(exist_ok=True)
        (stub / "triton.py").write_text("raise ImportError('triton is not available on this platform')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(stub), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)


def _python_m(args: list[str], env_extra: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


def test_backend_is_visible():
    assert labkit.backend() in backends.BACKENDS
    info = labkit.describe()
    assert info["backend"] == labkit.backend() and info["torch"]


def test_without_triton_the_torch_backend_runs_and_says_so_once(tmp_path):
    code = """
        import labkit, torch
        from labkit.kernels import SamplingState, gumbel_sample
        labkit.set_backend('torch')
        logits = torch.randn(3, 10)
        q = torch.zeros(4, 1, 10)
        t = gumbel_sample(logits, SamplingState(torch.tensor([0, 1, -1], dtype=torch.int32), torch.ones(4),
                                                torch.arange(4), torch.zeros(3, dtype=torch.int64), q), draft_step=0)
        print(labkit.backend(), t.shape[0], int((q[2] != 0).sum()))
    """
    out = _python(code, {}, tmp_path, block_triton=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["torch", "3", "0"]
    assert out.stderr.count("Triton is not installed") == 1


def test_backend_can_be_forced_by_environment_and_bad_names_are_refused(tmp_path):
    out = _python("import labkit; print(labkit.backend())", {"LABKIT_BACKEND": "torch"})
    assert out.stdout.strip() == "torch"
    # A name that is no backend: test_a_bad_backend_in_the_environment_is_one_line_from_the_cli_exit_2.
    if not backends.HAS_CUDA:
        out = _python("import labkit", {"LABKIT_BACKEND": "triton"})
        assert out.returncode != 0 and "needs both Triton and a CUDA device" in out.stderr


@pytest.mark.parametrize("command,value", [("repro", "cuda"), ("info", "Opencl ")])
def test_a_bad_backend_in_the_environment_is_one_line_from_the_cli_exit_2(command, value):
    out = _python_m(["labkit", command], {"LABKIT_BACKEND": value})
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"python -m labkit {command}: error: "), out.stderr
    assert f"LABKIT_BACKEND={value!r} is not a backend" in lines[0] and "triton, interpreter, torch" in lines[0]


def test_a_bad_backend_in_the_environment_fails_the_import_with_one_line_of_message():
    # As a notebook meets it: the import fails, its message is one line, no frame inside the kit.
    code = """
        import traceback
        try:
            import labkit
        except Exception as err:
            frames = [f.filename for f in traceback.extract_tb(err.__traceback__)]
            print(type(err).__name__, len(str(err).splitlines()), frames)
            print(err)
    """
    out = _python(code, {"LABKIT_BACKEND": "cuda"})
    assert out.returncode == 0, out.stderr
    head, message = out.stdout.strip().splitlines()
    name, count, frames = head.split(" ", 2)
    assert name == "EnvironmentValueError" and count == "1"
    assert "backends.py" not in frames  # the re-raise in labkit/__init__.py is the only frame left
    assert "LABKIT_BACKEND='cuda'" in message and "triton, interpreter, torch" in message


def test_a_machine_without_cuda_says_so_before_how_the_kernels_were_defined(monkeypatch):
    # Under LABKIT_BACKEND=interpreter, asking for compiled kernels on a CPU machine must name what the
    # machine lacks, not the import-time choice (which would not help there).
    monkeypatch.setattr(backends, "HAS_CUDA", False)
    for triton_installed in (True, False):
        monkeypatch.setattr(backends, "HAS_TRITON", triton_installed)
        for interpreted in (True, False, None):
            reason = backends.why_unavailable("triton", kernels_interpreted=interpreted)
            assert reason and "CUDA GPU" in reason, (triton_installed, interpreted, reason)
            assert ("no CUDA device" if triton_installed else "no Triton") in reason
    monkeypatch.setattr(backends, "HAS_CUDA", True)
    monkeypatch.setattr(backends, "HAS_TRITON", True)
    assert "defined for the interpreter" in backends.why_unavailable("triton", kernels_interpreted=True)
    assert backends.why_unavailable("triton", kernels_interpreted=False) is None


@pytest.mark.parametrize("chosen,in_kernels", [("triton", None), ("torch", None), ("Interpreter", None),
                                               (None, None), ("cuda", "cuda")])
def test_notebook_kernels_under_nbval_see_no_gpu_and_run_the_cpus_default_backend(monkeypatch, chosen, in_kernels):
    # nbval's kernels do not see the GPU, so LABKIT_BACKEND=triton would fail every cell there, and
    # under torch notebook 06's checked comparison of the Triton kernels with torch has nothing to
    # compare. notebooks/conftest.py sets what those kernels inherit:
    # the CPU's default, which the committed outputs come from; a bad value is left to fail the import.
    import runpy
    from pathlib import Path

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # monkeypatch puts both back afterwards
    if chosen is None:
        monkeypatch.delenv("LABKIT_BACKEND", raising=False)
    else:
        monkeypatch.setenv("LABKIT_BACKEND", chosen)
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "notebooks" / "conftest.py"))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    assert os.environ.get("LABKIT_BACKEND") == in_kernels


def test_set_backend_switches_to_torch_and_back():
    before = labkit.backend()
    try:
        assert labkit.set_backend("torch") == before
        assert labkit.backend() == "torch"
        with pytest.raises(ValueError, match="unknown backend"):
            labkit.set_backend("opencl")
        if backends.KERNELS_INTERPRETED:
            with pytest.raises(RuntimeError, match="compile"):  # a CPU machine: CUDA; a GPU box: the import
                labkit.set_backend("triton")
    finally:
        labkit.set_backend(before)


def test_using_backend_restores_the_previous_backend_even_on_error():
    before = labkit.backend()
    with backends.using_backend("torch") as name:
        assert name == "torch" and labkit.backend() == "torch"
    assert labkit.backend() == before
    with pytest.raises(KeyError):
        with backends.using_backend("torch"):
            raise KeyError("boom")
    assert labkit.backend() == before
    for bad in ("opencl", None, 3):
        with pytest.raises(LabkitInputError, match="unknown backend"):
            with backends.using_backend(bad):
                pass
        assert labkit.backend() == before


@pytest.mark.skipif(not backends.KERNELS_INTERPRETED, reason="compares the interpreter with torch")
def test_interpreter_and_torch_backends_reproduce_the_same_run(models):
    from labkit.config import DrafterConfig
    from labkit.corpus import sample_prompts
    from labkit.engine import Engine, make_requests

    def run(name):
        previous = labkit.set_backend(name)
        try:
            reqs = make_requests(models.tokenizer, sample_prompts(6, 4), 4, min_new_tokens=10, max_new_tokens=30)
            cfg = DrafterConfig(k=3, max_num_reqs=8, capture_sizes=(1, 2, 4, 8)).before_fix()
            return Engine(models, cfg).generate(reqs).outputs
        finally:
            labkit.set_backend(previous)

    assert run("interpreter") == run("torch")
