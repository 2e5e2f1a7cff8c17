"""`python -m labkit`: the default run, its backend choice, and clear one-line errors (never a traceback)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import pytest

from labkit import backends, paths
from labkit.__main__ import COMMANDS, main, missing_dependency_message
from labkit.bench.repro import LEGEND


def _labkit(*args: str, env_extra: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def _labkit_without(blocked: list[str], *args: str) -> subprocess.CompletedProcess:
    """The CLI in a process where importing each of `blocked` fails, as on a plain install."""
    code = textwrap.dedent(f"""
        import sys
        for name in {blocked!r}:
            sys.modules[name] = None  # import raises ModuleNotFoundError(name=name)
        from labkit.__main__ import main
        sys.exit(main({list(args)!r}))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def _one_line_error(out: subprocess.CompletedProcess, command: str) -> str:
    """The command failed with exit code 2 and one line that names it."""
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"python -m labkit {command}: error: "), out.stderr
    return lines[0]


def test_the_default_run_reproduces_the_bug_and_the_fix_and_names_its_backend():
    out = _labkit("repro", "--json", "--quiet")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert list(record["modes"]) == ["eager", "graph-buggy", "graph-fixed"]
    assert record["config"]["prompts"] == 50 and record["config"]["seed"] == 0
    modes = record["modes"]
    assert all(m["responses"] == 50 for m in modes.values())
    assert modes["graph-buggy"]["corrupted"] > 0
    assert modes["graph-buggy"]["identical_to_eager"] == 50 - modes["graph-buggy"]["corrupted"]
    assert modes["graph-fixed"]["identical_to_eager"] == modes["eager"]["identical_to_eager"] == 50
    # 'auto': compiled Triton with a CUDA GPU, else the torch references (fast on a CPU).
    expected = "triton" if backends.HAS_TRITON and backends.HAS_CUDA else "torch"
    assert record["backend"]["name"] == record["config"]["backend"] == expected
    assert record["backend"]["means"] and "--backend" in record["backend"]["triton_source"]


def test_the_table_says_what_its_words_mean_and_which_backend_ran(capsys):
    # In this process (the command's own main): a fresh one would only add torch's import.
    assert main(["repro", "--prompts", "6", "--modes", "graph-buggy,graph-host-only", "--backend", "torch",
                 "--quiet"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    row = next(line for line in lines if line.startswith("graph-host-only"))
    assert "refused" in row.split() and "corrupted: 0" not in out.out
    for start in ("identical:", "corrupted:", "refused:", "backend torch:"):
        assert any(line.startswith(start) for line in lines), start
    assert "--backend interpreter" in out.out


def test_help_explains_identical_corrupted_and_the_backends(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["repro", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for word, meaning in LEGEND.items():
        assert f"{word} {' '.join(meaning.split())}" in text
    assert "--backend {auto,torch,interpreter,triton}" in text and "Triton's CPU interpreter" in text


def _main_error(capsys, *args: str) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"python -m labkit {args[0]}: error: "), err
    return err


@pytest.mark.parametrize("args,message", [
    (["--prompts", "abc"], "--prompts must be a positive integer, got 'abc'"),
    (["--prompts", "0"], "--prompts must be a positive integer, got '0'"),
    (["--seed", "x"], "--seed must be an integer, got 'x'"),
    (["--modes", "nope"], "unknown mode(s) nope"),
])
def test_bad_repro_arguments_get_one_line_that_names_them(capsys, args, message):
    line = _main_error(capsys, "repro", *args)
    assert message in line and "_positive" not in line


def test_an_unknown_backend_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["repro", "--backend", "opencl"])
    assert exit_.value.code == 2 and "invalid choice: 'opencl'" in capsys.readouterr().err


@pytest.mark.skipif(backends.HAS_CUDA, reason="on a GPU box the compiled backend is available")
def test_compiled_triton_without_a_gpu_points_to_the_interpreter(capsys):
    before = backends.backend()
    line = _main_error(capsys, "repro", "--backend", "triton")
    assert "CUDA GPU" in line and "--backend interpreter" in line and backends.backend() == before


@pytest.mark.gpu
def test_the_interpreter_runs_on_a_gpu_box_in_a_fresh_process():
    out = _labkit("repro", "--backend", "interpreter", "--prompts", "2", "--modes", "graph-fixed", "--json", "--quiet")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["backend"]["name"] == "interpreter"


def test_student_edition_names_the_extra_when_nbformat_is_missing(tmp_path):
    line = _one_line_error(_labkit_without(["nbformat"], "student-edition", "--out", str(tmp_path / "s")),
                           "student-edition")
    assert "'nbformat'" in line and "pip install 'labkit[lab]'" in line


def test_figures_name_what_to_install_when_matplotlib_is_missing(tmp_path):
    line = _one_line_error(_labkit_without(["matplotlib"], "figures", "--out", str(tmp_path)), "figures")
    assert "'matplotlib'" in line and "pip install" in line


def test_info_works_without_the_optional_packages():
    out = _labkit_without(["nbformat", "ipywidgets", "jupyterlab", "IPython", "hypothesis", "pytest"], "info")
    assert out.returncode == 0, out.stderr
    assert f"backend: {backends.backend()}" in out.stdout and "auto uses" in out.stdout


def test_a_missing_notebook_folder_is_one_line(tmp_path, capsys):
    err = _main_error(capsys, "student-edition", "--src", str(tmp_path / "nowhere"), "--out", str(tmp_path / "s"))
    assert "nowhere" in err and "does not exist" in err


@pytest.mark.parametrize("command", ["student-edition", "figures"])
def test_an_output_folder_that_cannot_be_written_is_one_line(tmp_path, capsys, command):
    # A path under a plain file cannot be a folder, even for root (who may write a read-only one).
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    (notebooks / "a.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    args = ["--out", str(blocker / "out")] + (["--src", str(notebooks)] if command == "student-edition" else [])
    assert str(blocker) in _main_error(capsys, command, *args)


def test_a_bug_inside_the_kit_is_not_dressed_up_as_a_missing_package():
    assert missing_dependency_message("figures", ModuleNotFoundError("x", name="labkit.viz.nowhere")) is None
    assert "pip install 'labkit[test]'" in missing_dependency_message("x", ModuleNotFoundError("x", name="nbclient"))


def test_a_source_tree_that_was_never_installed_still_names_the_extra(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "requires", not_installed)
    assert "pip install 'labkit[test]'" in missing_dependency_message("x", ModuleNotFoundError("x", name="nbclient"))


def test_lab_check_and_the_pip_source_question_run_on_a_python_without_torch(tmp_path):
    # The Makefile asks both with the machine's Python, before the venv (and torch) exists.
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "torch.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(stub)

    def labkit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, env=env,
                              cwd=paths.REPO, timeout=300)

    wheelhouse = tmp_path / "wheelhouse"  # a room's offline folder: the answer needs no network
    wheelhouse.mkdir()
    (wheelhouse / "placeholder-1.0-py3-none-any.whl").write_bytes(b"")
    for args in (["lab", "--check-only", "--edition", "student"], ["--help"],
                 ["setup", "pip-source", "--wheelhouse", str(wheelhouse)]):
        out = labkit(*args)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (args, out.stderr)
    # The default asks whether PyTorch's CPU index answers: on a machine without a network (a GPU box)
    # that is the answer, said in words, never a missing torch.
    out = labkit("setup", "pip-source")
    assert "Traceback" not in out.stderr and "No module named" not in out.stderr, out.stderr
    assert out.returncode == 0 or (out.returncode == 1 and "cannot be reached" in out.stderr), out.stderr
    # The stub hides torch indeed: a command that runs kernels says what is missing, in one line.
    line = _one_line_error(labkit("info"), "info")
    assert "'torch'" in line and "pip install torch" in line


# Every command a user or a maintainer types, and the verbs of those that have some.
EVERY_COMMAND = {"lab", "setup", "repro", "info", "figures", "student-edition", "agenda", "docs", "refresh",
                 "audit-vllm", "hub", "family", "gpu", "record", "upstream", "bench-cpu", "mutants", "run-notebooks",
                 "train-models"}
VERBS = {"hub": ["start", "stop", "values", "bench", "kernel-memory"], "upstream": ["fetch", "matrix"],
         "setup": ["pip-source", "wheelhouse", "lab-overrides", "server-config"], "record": ["merge"]}


def test_help_lists_every_command_on_one_line_of_a_terminal():
    assert set(COMMANDS) == EVERY_COMMAND
    out = _labkit("--help", env_extra={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.startswith("  ") and line.split()}
    for name, command in COMMANDS.items():
        assert name in lines, f"python -m labkit --help does not list {name}"
        assert lines[name].split(None, 1)[1] == command.summary and len(lines[name]) <= 80, lines[name]
    for name, verbs in VERBS.items():
        help_text = _labkit(name, "--help").stdout
        assert all(f"    {verb} " in help_text for verb in verbs), (name, help_text)


@pytest.mark.parametrize("argv,prog", [(["hub", "bench", "--help"], "python -m labkit hub bench"),
                                       (["hub", "kernel-memory", "--help"], "python -m labkit hub kernel-memory"),
                                       (["upstream", "matrix", "--help"], "python -m labkit upstream matrix"),
                                       (["upstream", "fetch", "--help"], "python -m labkit upstream fetch"),
                                       (["gpu", "--help"], "python -m labkit gpu"),
                                       (["bench-cpu", "--help"], "python -m labkit bench-cpu"),
                                       (["mutants", "--help"], "python -m labkit mutants"),
                                       (["lab", "--help"], "python -m labkit lab")])
def test_a_command_that_parses_its_own_arguments_is_named_as_typed(capsys, argv, prog):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith(f"usage: {prog} ")


def test_an_unknown_option_of_a_command_is_refused_and_one_that_passes_options_on_keeps_their_order(monkeypatch):
    with pytest.raises(SystemExit) as exit_:
        main(["info", "--nope"])
    assert exit_.value.code == 2
    from labkit.upstream import record

    seen = []
    monkeypatch.setattr(record, "main", lambda argv: seen.append(argv) or 0)
    assert main(["upstream", "matrix", "trees", "--docs", "-h"]) == 0
    assert seen == [["trees", "--docs", "-h"]]
