"""The student edition keeps its secret: built, then run as a learner runs it, it shows no exercise's
answer before the learner meets that exercise (labkit.workshop.secrecy says what counts as an answer).

The student path is executed in a real kernel (nbclient), up to the last exercise of notebook 07:
every output a learner would see, the text drawn in every figure, and the labels of every widget
are scanned. Cells after the last exercise are not run: nothing there comes before an exercise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit.workshop.editions import CHECKER_TAG, KEEP_OUTPUT_TAG, build_student_edition
from labkit.workshop.secrecy import (
    ANSWERS,
    EXERCISE_CELLS,
    EXERCISE_NOTEBOOK,
    STUDENT_PATH,
    answers_in,
    before_each_exercise,
    find_leaks,
    seen_in_cell,
)

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
BEFORE_LAST_EXERCISE = STUDENT_PATH[:STUDENT_PATH.index(EXERCISE_NOTEBOOK) + 1]
CAPTURE_ID = "labkit-capture-figure-text"


def _read_edition(folder: Path) -> dict:
    return {p.name: nbformat.read(p, as_version=4) for p in sorted(folder.glob("*.ipynb"))}


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("student")
    build_student_edition(NOTEBOOKS, out)
    return out


def _current_env_kernel(folder: Path):
    """A kernel of this very interpreter (the venv's), whatever kernelspecs the machine has."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = folder / "kernels" / "labkit-current"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "labkit (this interpreter)", "language": "python"}))
    return KernelManager(kernel_name="labkit-current",
                         kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(folder / "kernels")]))


def _up_to_last_exercise(nb):
    ids = [cell.get("id") for cell in nb.cells]
    nb.cells = nb.cells[:ids.index(EXERCISE_CELLS["d"]) + 1]  # the task itself is markdown: nothing runs
    return nb


@pytest.fixture(scope="module")
def executed(student, tmp_path_factory) -> dict:
    """The student path up to the last exercise, run as a learner runs it, outputs in place."""
    from nbclient import NotebookClient

    runs = {}
    for name in BEFORE_LAST_EXERCISE:
        nb = nbformat.read(student / name, as_version=4)
        if name == EXERCISE_NOTEBOOK:
            nb = _up_to_last_exercise(nb)
        capture = nbformat.v4.new_code_cell(
            "from labkit.workshop.secrecy import capture_figure_text\ncapture_figure_text()")
        capture.id = CAPTURE_ID
        nb.cells.insert(0, capture)
        km = _current_env_kernel(tmp_path_factory.mktemp("kernel"))
        NotebookClient(nb, km=km, timeout=600, store_widget_state=True, allow_errors=True,
                       resources={"metadata": {"path": str(student)}}).execute()
        nb.cells = [cell for cell in nb.cells if cell.get("id") != CAPTURE_ID]
        runs[name] = nb
    return runs


def test_no_answer_is_shown_before_its_exercise_in_the_student_path_as_run(executed):
    leaks = find_leaks(executed)
    assert not leaks, "the student edition gives answers away:\n" + "\n".join(map(str, leaks))


def test_the_run_really_shows_figures_widgets_and_outputs_to_the_scan(executed):
    # Without this, a broken capture would make the test above pass on nothing.
    seen = before_each_exercise(executed)["d"]
    where = {piece.where for piece in seen}
    assert {"figure text", "widget label", "output stream", "source"} <= where, where
    figure_text = "\n".join(piece.text for piece in seen if piece.where == "figure text")
    assert "draft_logits" in figure_text  # notebook 00's map of the moving parts: its student variant
    assert "idx_mapping" in figure_text
    labels = [piece.text for piece in seen if piece.where == "widget label"]
    assert "step" in labels and "drafter" in labels  # notebook 02's explorer


def test_no_cell_of_the_run_path_failed(executed):
    errors = [f"{name} cell {i}: {out.get('ename')}: {out.get('evalue')}"
              for name, nb in executed.items() for i, cell in enumerate(nb.cells)
              for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors, errors


def test_the_student_edition_is_an_assignment(student):
    for name, nb in _read_edition(student).items():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            tags = cell.metadata.get("tags", [])
            if KEEP_OUTPUT_TAG not in tags:
                assert not cell.outputs, f"{name} cell {index} keeps the instructor's outputs"
                assert cell.execution_count is None
            assert not (CHECKER_TAG in tags and cell.outputs), f"{name} cell {index}: a checker shows a verdict"
        assert "widgets" not in nb.metadata, f"{name} keeps the instructor run's widget state"


def test_kept_outputs_give_no_part_of_the_fix_away(student):
    kept = 0
    for name, nb in _read_edition(student).items():
        for index, cell in enumerate(nb.cells):
            if KEEP_OUTPUT_TAG in cell.metadata.get("tags", []) and cell.outputs:
                kept += 1
                outputs = [piece for piece in seen_in_cell(cell, name, index) if piece.where != "source"]
                found = {x: answers_in(piece.text, x) for piece in outputs for x in ANSWERS}
                assert not any(found.values()), f"{name} cell {index} keeps an output with {found}"
    assert kept >= 2  # notebook 01's symptoms: the responses side by side, the before/after figure


def test_the_scan_catches_an_answer_planted_anywhere_before_an_exercise(student):
    edition = _read_edition(student)
    planted = {
        ("00_setup_and_tour.ipynb", "source"): "idx_mapping[num_reqs:] = -1",
        ("01_reproduce_the_gibberish.ipynb", "stream"): "masked kernel",
        ("02_see_the_stale_idx_mapping.ipynb", "figure"): "pad with -1, not 0",
        (EXERCISE_NOTEBOOK, "source"): "slot.to(tl.int64) * stride",
    }
    for (name, kind), text in planted.items():
        nb = nbformat.from_dict(json.loads(json.dumps(edition[name])))
        cell = nb.cells[1]
        if kind == "source":
            cell.source += "\n" + text
        else:
            line = text if kind == "stream" else "labkit-figure-text: " + json.dumps(
                {"width_in": 6.0, "texts": [{"text": text, "size": 10.0}]})
            cell = nbformat.v4.new_code_cell("x = 1")
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line + "\n")]
            nb.cells.insert(1, cell)
        leaks = find_leaks({**edition, name: nb})
        assert any(leak.seen.notebook == name for leak in leaks), (name, kind, text)


def test_an_answer_after_its_exercise_is_no_leak(student):
    edition = _read_edition(student)
    nb = edition[EXERCISE_NOTEBOOK]
    ids = [cell.get("id") for cell in nb.cells]
    # (a)'s answer after (a)'s first checker: past (a) itself, and no part of (b), (c) or (d)'s answers.
    nb.cells.insert(ids.index("a-check-1") + 1, nbformat.v4.new_markdown_cell("idx_mapping[n:] = -1"))
    assert not find_leaks(edition)
    # The same line inside (a)'s own task is a leak.
    nb.cells.insert(ids.index(EXERCISE_CELLS["a"]) + 1, nbformat.v4.new_markdown_cell("idx_mapping[num_reqs:] = -1"))
    assert [leak for leak in find_leaks(edition) if leak.exercise == "a" and leak.in_task]


def test_after_the_exercises_the_student_edition_shows_the_prs_fix_beside_the_learners(student):
    # 03 (and 05 for (d)) reach learners after 07 in the student path; their comparisons are plain cells
    # there, not solutions the student edition would cut.
    edition = _read_edition(student)
    calls = {name: "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
             for name, nb in edition.items()}
    for exercise, notebook in (("a", "03_the_fix.ipynb"), ("b", "03_the_fix.ipynb"), ("c", "03_the_fix.ipynb"),
                               ("d", "05_sibling_bugs.ipynb")):
        assert f'ex.compare("{exercise}")' in calls[notebook], (exercise, notebook)
        assert STUDENT_PATH.index(notebook) > STUDENT_PATH.index(EXERCISE_NOTEBOOK)


def test_an_exercise_may_name_its_tools_but_not_its_answer(student):
    edition = _read_edition(student)
    nb = edition[EXERCISE_NOTEBOOK]
    task = next(cell for cell in nb.cells if cell.get("id") == EXERCISE_CELLS["d"])
    task.source += "\nWiden with `torch.int64` there."  # what 07(d)'s text said before the student edition was checked
    leaks = find_leaks(edition)
    assert [str(leak) for leak in leaks if leak.in_task and leak.exercise == "d"]


def test_the_rest_of_the_student_path_runs_top_to_bottom(student, tmp_path):
    # 00-02 run above and 07 in test_editions; these are what a learner opens after the exercises.
    rest = [name for name in STUDENT_PATH if name not in BEFORE_LAST_EXERCISE]
    env = dict(os.environ, LABKIT_ANSWERS=str(tmp_path / "answers"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           "--nbval-lax", "--nbval-current-env", *rest],
                          cwd=student, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
