"""`make refresh` (labkit.docgen.refresh): exact. It needs nothing but the repository, runs a notebook
again only when what it shows was made from changed inputs, and a second run changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from labkit import paths
from labkit.docgen import refresh


def _small_repo(tmp_path, monkeypatch, code: str):
    repo = tmp_path / "kit"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "labkit" / "data").mkdir(parents=True)
    (repo / "labkit" / "data" / "r.json").write_text('{"v": 1}')
    for name in refresh.ENVIRONMENT:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("pins\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A notebook\n<!-- x:y -->\n1\n<!-- /x:y -->"),
                                        nbformat.v4.new_code_cell(code)])
    notebook = repo / "notebooks" / "01_small.ipynb"
    nbformat.write(nb, notebook)
    monkeypatch.setattr(paths, "REPO", repo)
    monkeypatch.setattr(paths, "NOTEBOOKS", repo / "notebooks")
    monkeypatch.setattr(refresh, "STAMPS", repo / "notebooks" / ".refresh-inputs.json")
    return repo, notebook


def test_a_notebook_runs_again_only_when_its_cells_or_what_it_read_changed(tmp_path, monkeypatch):
    repo, notebook = _small_repo(tmp_path, monkeypatch, "print(1)")
    assert refresh.why_run(notebook, {}) == "no record of its inputs yet"
    stamps = {notebook.name: refresh.stamp(notebook, ["labkit/data/r.json", *refresh.ENVIRONMENT])}
    assert refresh.why_run(notebook, stamps) is None
    nb = nbformat.read(notebook, as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1\n")]  # outputs are what running it writes
    nb.cells[1].execution_count = 7
    nbformat.write(nb, notebook)
    assert refresh.why_run(notebook, stamps) is None
    (repo / "labkit" / "data" / "r.json").write_text('{"v": 2}')
    assert refresh.why_run(notebook, stamps) == "what it reads changed: labkit/data/r.json"
    (repo / "labkit" / "data" / "r.json").write_text('{"v": 1}')
    assert refresh.why_run(notebook, stamps) is None
    nb.cells[0].source = nb.cells[0].source.replace("\n1\n", "\n2\n")  # a block rendered anew into its markdown
    nbformat.write(nb, notebook)
    assert refresh.why_run(notebook, stamps) == "its cells changed"
    (repo / "requirements" / "ci.txt").unlink()
    stamps = {notebook.name: refresh.stamp(notebook, ["labkit/data/r.json", *refresh.ENVIRONMENT])}
    assert refresh.why_run(notebook, stamps) is None
    (repo / "requirements" / "ci.txt").write_text("new pins\n")
    assert refresh.why_run(notebook, stamps) == "what it reads changed: requirements/ci.txt"


def test_executing_a_notebook_notes_the_repositorys_files_it_read_and_none_it_wrote(tmp_path, monkeypatch):
    code = ("import json, pathlib\nprint(json.loads(pathlib.Path('../labkit/data/r.json').read_text()))\n"
            "pathlib.Path('written.txt').write_text('x')\nopen('/etc/hostname').close()")
    repo, notebook = _small_repo(tmp_path, monkeypatch, code)
    monkeypatch.setattr(paths, "BUILD", repo / "build")
    seconds, files = refresh.execute(notebook)
    assert files == ["labkit/data/r.json", "pyproject.toml", "requirements/ci.txt"]
    saved = nbformat.read(notebook, as_version=4)
    assert len(saved.cells) == 2 and saved.cells[1].outputs[0]["text"] == "{'v': 1}\n"  # no cell of the watch left


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to clone the repository")
def test_refresh_in_a_clean_clone_needs_nothing_else_and_a_second_run_changes_nothing(tmp_path):
    # A clean clone has no build/ (no vLLM release files, no kernels' caches) and its committed state is
    # what refresh made last time: run on it, refresh must leave every file as it is. That one run
    # starts from the state a second run would start from, so it is the second run; --check then
    # confirms, without writing, that nothing is left to render or run.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(paths.REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    env.update(PYTHONPATH=str(clone), CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-m", "labkit", "refresh"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "executing" not in done.stdout, f"a notebook's inputs changed since it was saved:\n{done.stdout}"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert status == "", f"make refresh changed a clean clone:\n{status}\n{done.stdout}"
    check = subprocess.run([sys.executable, "-m", "labkit", "refresh", "--check"], cwd=clone, env=env,
                           capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    stamps = json.loads((clone / "notebooks" / ".refresh-inputs.json").read_text())
    assert set(stamps) == {p.name for p in (clone / "notebooks").glob("*.ipynb")}
