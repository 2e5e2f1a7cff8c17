"""The student edition keeps its secret, on the whole path a learner walks: built as `make lab` builds it
(a learner's folder), then run as a learner runs it, it shows no exercise's answer before the learner
meets that exercise (labkit.workshop.editions.secrecy says what counts as an answer).

The learner path is executed in a real kernel (nbclient): 00, 01, 02 and the whole of 07, Run All,
nothing solved. Every output a learner would see, the text drawn in every figure, the labels of every
widget, every doc a cell links to or names, and what ``?`` shows of every name of the kit that a cell
imported or built (its docstring, signature and repr; for a module, of each public name in it) are
scanned, in reading order. The README outside its spoiler section, the figures it shows and the files
of the learner's file browser are scanned too. Notebooks after 07 come after every exercise.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from labkit.workshop.editions.secrecy import (
    EXERCISE_NOTEBOOK,
    STUDENT_PATH,
    answers_in,
    before_each_exercise,
    docs_named,
    find_leaks,
    outside_spoilers,
    seen_in_cell,
    spoilers,
)
from labkit.workshop.editions.student import (
    CHECKER_TAG,
    DOCS_AFTER_THE_EXERCISES,
    KEEP_OUTPUT_TAG,
    LEARNER_DOCS,
    build_learner_folder,
    edition_name,
    student_notebook,
)
from labkit.workshop.exercises.record import EXERCISES, exercise, letters

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
README = REPO / "README.md"
DOCS = {p.name: p.read_text() for p in sorted((REPO / "docs").glob("*.md"))}
BEFORE_LAST_EXERCISE = STUDENT_PATH[:STUDENT_PATH.index(EXERCISE_NOTEBOOK) + 1]
CAPTURE_ID = "labkit-capture-figure-text"
INSPECT = "__import__('labkit.workshop.editions.help_text', fromlist=['_']).inspect_namespace()"
CAPTURE = "__import__('labkit.workshop.editions.secrecy', fromlist=['_']).capture_figure_text()"


def _read_edition(folder: Path) -> dict:
    """The notebooks of a learner's folder, by the instructor notebook's name."""
    return {edition_name(p.name): nbformat.read(p, as_version=4) for p in sorted(folder.glob("*.ipynb"))}


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    """A learner's folder, as `make lab` builds it."""
    return build_learner_folder(tmp_path_factory.mktemp("learner") / "student", NOTEBOOKS)


@pytest.fixture(scope="module")
def student(learner) -> Path:
    return learner.root


def _current_env_kernel(folder: Path):
    """A kernel of this very interpreter (the venv's), whatever kernelspecs the machine has."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = folder / "kernels" / "labkit-current"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "labkit (this interpreter)", "language": "python"}))
    # Its connection file in the test's folder too: jupyter_client's default, a file in the system's temporary
    # folder, outlived the test.
    return KernelManager(kernel_name="labkit-current", connection_file=str(folder / "connection.json"),
                         kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(folder / "kernels")]))


def _inspect_cell(where: str):
    cell = nbformat.v4.new_code_cell(INSPECT)
    cell.id = f"labkit-inspect-{where}"
    return cell


def _with_inspections(name: str, nb):
    """What `?` shows is looked at before each exercise's task (07), and at the end of 00-02."""
    if name != EXERCISE_NOTEBOOK:
        nb.cells.append(_inspect_cell("end"))
        return nb
    cells = []
    for cell in nb.cells:
        if cell.get("id") in {x.task_cell for x in EXERCISES}:
            cells.append(_inspect_cell(cell.get("id")))
        cells.append(cell)
    nb.cells = cells
    return nb


def _run_learner_path(student: Path, tmp_path_factory) -> dict:
    from nbclient import NotebookClient

    runs = {}
    answers = tmp_path_factory.mktemp("answers")
    for name in BEFORE_LAST_EXERCISE:
        path = next(p for p in student.glob("*.ipynb") if edition_name(p.name) == name)
        nb = _with_inspections(name, nbformat.read(path, as_version=4))
        capture = nbformat.v4.new_code_cell(CAPTURE)
        capture.id = CAPTURE_ID
        nb.cells.insert(0, capture)
        km = _current_env_kernel(tmp_path_factory.mktemp("kernel"))
        with pytest.MonkeyPatch.context() as env:
            env.setenv("LABKIT_ANSWERS", str(answers))  # the kernel inherits it: nothing kept beside the notebooks
            # The kernel runs in the learner's folder: it imports the labkit of this tree, as the tests do.
            env.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
            NotebookClient(nb, km=km, timeout=600, store_widget_state=True, allow_errors=True,
                           resources={"metadata": {"path": str(student)}}).execute()
        nb.cells = [cell for cell in nb.cells if cell.get("id") != CAPTURE_ID]
        runs[name] = nb
    return runs


@pytest.fixture(scope="module")
def executed(student, tmp_path_factory) -> dict:
    """The learner path up to 07's last cell, Run All as a learner runs it, nothing solved, outputs in place.
    One run serves every test below, in every pytest-xdist worker of the session: the first worker to
    get here runs it and leaves it in the session's shared temporary folder; the others read it."""
    # Under pytest-xdist each worker's base folder sits in the session's own (pytest-N/popen-gwX);
    # without it the base folder is the session's. Never a folder another session could have written.
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "learner-path-run"
    shared.mkdir(exist_ok=True)
    done, lock = shared / "runs.json", shared / "running"
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL))
        mine = True
    except FileExistsError:
        mine = False
    failed = shared / "failed"
    if mine:
        try:
            runs = _run_learner_path(student, tmp_path_factory)
        except BaseException as err:
            failed.write_text(f"{type(err).__name__}: {err}")
            raise
        (shared / "runs.tmp").write_text(json.dumps(runs))
        os.replace(shared / "runs.tmp", done)
        return runs
    deadline = time.monotonic() + 1200
    while not done.exists():
        if failed.exists():
            pytest.fail(f"the learner path's run failed in another worker: {failed.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"another worker began the learner path's run ({lock}) and never finished it")
        time.sleep(1)
    return {name: nbformat.from_dict(nb) for name, nb in json.loads(done.read_text()).items()}


def test_no_answer_is_shown_before_its_exercise_in_the_student_path_as_run(executed):
    leaks = find_leaks(executed, DOCS)
    assert not leaks, "the student edition gives answers away:\n" + "\n".join(map(str, leaks))


def test_the_run_really_shows_figures_widgets_outputs_docs_and_docstrings_to_the_scan(executed):
    # Without this, a broken capture would make the test above pass on nothing.
    seen = before_each_exercise(executed, DOCS)["d"]
    where = {piece.where for piece in seen}
    assert {"figure text", "widget label", "output stream", "source", "doc docs/TRITON_MASKS.md"} <= where, where
    assert {"doc of ex", "doc of ex.check_mapping", "signature of ex.hint", "repr of DrafterConfig",
            "doc of gumbel_sample", "signature of gumbel_sample", "doc of mode_named", "repr of buggy"} <= where, where
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
                found = {x: answers_in(piece.text, x) for piece in outputs for x in letters()}
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


def test_an_answer_after_the_exercises_is_no_leak_and_one_in_07_is_read_ahead(student):
    edition = _read_edition(student)
    nb = edition[EXERCISE_NOTEBOOK]
    ids = [cell.get("id") for cell in nb.cells]
    # (a)'s answer in 03, after every exercise: no leak.
    edition["03_the_fix.ipynb"].cells.insert(1, nbformat.v4.new_markdown_cell("idx_mapping[n:] = -1"))
    assert not find_leaks(edition)
    # The same line inside (a)'s own task is a leak of its task; past (a)'s checker, a learner reading
    # ahead meets it before solving (a).
    task = ids.index(exercise("a").task_cell)
    nb.cells.insert(task + 1, nbformat.v4.new_markdown_cell("idx_mapping[num_reqs:] = -1"))
    assert [leak for leak in find_leaks(edition) if leak.exercise == "a" and leak.in_task]
    nb.cells.insert(ids.index("a-check-1") + 2, nbformat.v4.new_markdown_cell("idx_mapping[n:] = -1"))
    assert [leak for leak in find_leaks(edition) if leak.exercise == "a" and not leak.in_task]


def test_after_the_exercises_the_student_edition_shows_the_prs_fix_beside_the_learners(student):
    # 03 (and 05 for (d)) reach learners after 07 in the student path; their comparisons are plain cells
    # there, not solutions the student edition would cut.
    edition = _read_edition(student)
    calls = {name: "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
             for name, nb in edition.items()}
    for x in EXERCISES:
        notebook = next(name for name in STUDENT_PATH if name.startswith(x.compare_notebook + "_"))
        assert f'ex.compare("{x.letter}")' in calls[notebook], (x.letter, notebook)
        assert STUDENT_PATH.index(notebook) > STUDENT_PATH.index(EXERCISE_NOTEBOOK)


def test_an_exercise_may_name_its_tools_but_not_its_answer(student):
    edition = _read_edition(student)
    nb = edition[EXERCISE_NOTEBOOK]
    task = next(cell for cell in nb.cells if cell.get("id") == exercise("d").task_cell)
    task.source += "\nWiden with `torch.int64` there."  # what 07(d)'s text said before the student edition was checked
    leaks = find_leaks(edition)
    assert [str(leak) for leak in leaks if leak.in_task and leak.exercise == "d"]


def _code(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def test_the_rest_of_the_student_path_runs_top_to_bottom(student, tmp_path):
    # 00-02 and 07 run above; these are what a learner opens after the exercises. Where a student
    # notebook sends the kernel exactly the instructor notebook's code cells (no solution was cut),
    # the notebooks stage of `make test` runs those very cells (nbval, every notebook): running them
    # again here would check nothing more. The others run here, under nbval, with nbval's conftest,
    # on the torch backend: what this run checks is that no later cell needs what a solution cell
    # defined, which no backend changes, and the notebooks stage runs these cells' kernels in Triton's
    # interpreter already (the student edition differs only in its solution cells); the interpreter
    # would make this run three times longer (06: 29 CPU-s against 9).
    pytest.importorskip("nbval", reason="runs the notebooks under nbval (the test extra), not installed here")
    edition = _read_edition(student)
    rest = [name for name in STUDENT_PATH if name not in BEFORE_LAST_EXERCISE]
    differ = []
    for name in rest:
        instructor = nbformat.read(NOTEBOOKS / name, as_version=4)
        if _code(edition[name]) != _code(instructor):
            differ.append(name)
        else:  # the same code cells, so the same kernel run: a solution cut here would show
            assert _code(student_notebook(instructor)) == _code(instructor), name
    assert differ, "no notebook after 07 differs from its instructor edition: nothing would run here"
    for name in differ:
        nbformat.write(edition[name], tmp_path / name)
    # nbval's conftest gives its kernels the CPU's default backend; this run then sets torch.
    (tmp_path / "conftest.py").write_text((NOTEBOOKS / "conftest.py").read_text()
                                          + '\nos.environ["LABKIT_BACKEND"] = "torch"  # test_student_secret.py\n')
    env = dict(os.environ, LABKIT_ANSWERS=str(tmp_path / "answers"),  # the kernels import this tree's labkit
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           "--nbval-lax", "--nbval-current-env", *differ],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


# --- 07 in reading order: Run All, nothing solved -------------------------------------------------

def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return "\n".join(str(v) for k, v in output.get("data", {}).items() if k.startswith("text/"))


def test_the_student_exercises_run_top_to_bottom_and_say_not_solved_yet(executed):
    nb = executed[EXERCISE_NOTEBOOK]
    checkers = [c for c in nb.cells if CHECKER_TAG in c.metadata.get("tags", [])]
    checker_texts = [" ".join(_text(o) for o in c.outputs) for c in checkers]
    assert checker_texts and all("not solved yet" in t for t in checker_texts), checker_texts
    assert not any(" solved." in t for t in checker_texts)


def test_a_checker_run_before_its_exercise_is_attempted_says_so_and_shows_nothing_of_any_fix(executed):
    nb = executed[EXERCISE_NOTEBOOK]
    ids = [cell.get("id") for cell in nb.cells]
    starts = {x.letter: ids.index(x.task_cell) for x in EXERCISES}
    for index, cell in enumerate(nb.cells):
        if CHECKER_TAG not in cell.metadata.get("tags", []):
            continue
        text = " ".join(_text(o) for o in cell.outputs)
        current = max((x for x, start in starts.items() if start < index), default="a")
        if cell.get("id") != "capstone":
            assert "not attempted" in text, (cell.get("id"), text[:400])
        found = {x: answers_in(text, x) for x in letters()}
        assert not any(found.values()), f"{cell.get('id')} (exercise {current}) shows {found}"


def test_the_wrap_up_under_the_capstone_names_no_fix_in_the_student_edition(student):
    nb = _read_edition(student)[EXERCISE_NOTEBOOK]
    wrap = [c for c in nb.cells if c.get("id", "").startswith("wrap-up")]
    assert wrap
    found = {x: answers_in(c.source, x) for c in wrap for x in letters()}
    assert not any(found.values()), found


def test_no_two_your_turn_cells_of_07_in_a_row_read_the_same(student):
    # (b) has two solutions, Triton and torch, one after the other: each placeholder says which it stands for.
    cells = _read_edition(student)[EXERCISE_NOTEBOOK].cells
    pairs = [(a.source, b.source) for a, b in zip(cells, cells[1:], strict=False)
             if all("your-turn" in c.metadata.get("tags", []) for c in (a, b))]
    assert pairs, "no two 'your turn' cells in a row: this test checks nothing"
    assert all(a != b for a, b in pairs), pairs


# --- the rest of the learner's path: the README, the file browser, the figures --------------------

README_FIGURE = re.compile(r"!\[[^\]]*\]\((figures/[^)\s]+)\)")


def _readme_figure_texts(path: str) -> str:
    """The strings a README figure is drawn from: the figure is drawn again and its texts read."""
    import matplotlib

    matplotlib.use("Agg")
    from labkit.viz.figures import draw_learner_figure
    from labkit.workshop.editions.secrecy import figure_texts

    fig = draw_learner_figure(Path(path).name)
    return "\n".join(t["text"] for t in figure_texts(fig)["texts"])


def test_the_readme_describes_the_bug_first_and_keeps_the_fix_in_one_marked_spoiler_section():
    text = README.read_text()
    blocks = spoilers(text)
    assert len(blocks) == 1, f"{len(blocks)} spoiler sections"
    # The fix is in the spoiler section, so the scan below can fail.
    assert all(answers_in(blocks[0], x) for x in "abc")
    outside = outside_spoilers(text)
    found = {x: sorted(set(answers_in(outside, x))) for x in letters()}
    assert not any(found.values()), f"the README outside its spoiler section shows {found}"
    assert outside.index("## ") > outside.index("gibberish"), "the bug and its symptoms come first"


def test_what_the_readme_links_or_shows_outside_its_spoiler_gives_nothing_away():
    outside = outside_spoilers(README.read_text())
    for name in docs_named(outside):
        found = {x: sorted(set(answers_in(DOCS[name], x)))[:3] for x in letters()}
        assert not any(found.values()), f"the README links docs/{name} outside its spoiler section: {found}"
    figures = README_FIGURE.findall(outside)
    assert figures, "the README shows no figure outside its spoiler section: the scan below checks nothing"
    for path in figures:
        texts = _readme_figure_texts(path)
        found = {x: answers_in(texts, x) for x in letters()}
        assert not any(found.values()), f"{path}, shown outside the README's spoiler section, says {found}"


def test_the_learners_file_browser_shows_what_a_learner_opens_and_nothing_else(learner):
    files = sorted(p.relative_to(learner.root).as_posix() for p in learner.root.rglob("*") if p.is_file())
    notebooks = sorted(p.name for p in learner.notebooks)
    assert files == sorted(notebooks + [f"docs/{doc}" for doc in LEARNER_DOCS]), files
    assert [edition_name(p.name) for p in learner.notebooks][:len(BEFORE_LAST_EXERCISE)] == list(BEFORE_LAST_EXERCISE)
    instructor_names = {p.name for p in NOTEBOOKS.glob("*.ipynb")}
    assert not instructor_names & set(notebooks), "a learner's tab would look like the instructor's"
    for path in learner.notebooks:
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata.get("labkit_edition") == "student", path.name
        assert not any("solution" in c.metadata.get("tags", []) for c in nb.cells), path.name
    for doc in LEARNER_DOCS:  # a doc in the learner's folder is one the path may open at any time
        found = {x: answers_in(DOCS[doc], x, in_task=True) for x in letters()}
        assert not any(found.values()), (doc, found)


def test_every_doc_a_student_notebook_names_opens_from_the_learners_folder_when_met(learner, executed):
    """Up to 07 a notebook, or a checker's output, names only docs the folder holds from the start; after
    07, also the docs the capstone brings, linked where they arrive."""
    after = STUDENT_PATH[STUDENT_PATH.index(EXERCISE_NOTEBOOK) + 1:]
    named_after = set()
    for name, nb in {**_read_edition(learner.root), **executed}.items():
        for index, cell in enumerate(nb.cells):
            for piece in seen_in_cell(cell, name, index):
                for doc in docs_named(piece.text):
                    if name in after:
                        named_after.add(doc)
                        assert doc in LEARNER_DOCS + DOCS_AFTER_THE_EXERCISES, (piece.place(), doc)
                    else:
                        assert doc in LEARNER_DOCS and (learner.root / "docs" / doc).is_file(), (piece.place(), doc)
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        for doc in re.findall(r"\]\((docs/[^)]+)\)", markdown):
            assert doc.removeprefix("docs/") in LEARNER_DOCS + DOCS_AFTER_THE_EXERCISES, (name, doc)
    assert named_after & set(DOCS_AFTER_THE_EXERCISES), "no notebook after 07 names a doc: this test checks little"


def test_a_learner_keeps_their_work_when_the_folder_is_built_again(learner, tmp_path):
    folder = build_learner_folder(tmp_path / "student", NOTEBOOKS)
    mine = folder.first
    mine.write_text(mine.read_text().replace("# 00", "# 00 (my notes)", 1))
    again = build_learner_folder(tmp_path / "student", NOTEBOOKS)
    assert mine in again.kept and not again.written and "(my notes)" in mine.read_text()
    assert "(my notes)" not in build_learner_folder(tmp_path / "student", NOTEBOOKS, fresh=True).first.read_text()
    # Files of an older layout are named, never removed; the learner's answers are theirs, not "other".
    (tmp_path / "student" / "conftest.py").write_text("# from an older make student\n")
    (tmp_path / "student" / "my_answers").mkdir()
    (tmp_path / "student" / "my_answers" / "a.py").write_text("def copy_idx_mapping(m, s): ...\n")
    assert build_learner_folder(tmp_path / "student", NOTEBOOKS).others == (tmp_path / "student" / "conftest.py",)
    assert (tmp_path / "student" / "conftest.py").exists()
