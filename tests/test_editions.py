"""The student edition: built from the instructor notebooks, solutions out, checkers in, runs clean."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

from labkit.errors import LabkitInputError
from labkit.workshop.editions.student import (
    CODE_PLACEHOLDER,
    build_student_edition,
    names_only_solutions_define,
    student_notebook,
)

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXERCISES = NOTEBOOKS / "07_exercises.ipynb"


def _tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return str(output.get("data", {}).get("text/plain", ""))


def _toy_notebook():
    nb = nbformat.v4.new_notebook()
    checker = nbformat.v4.new_code_cell("check(globals())", metadata={"tags": ["checker"]})
    checker.outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "solved"}, execution_count=3)]
    checker.execution_count = 3
    plain = nbformat.v4.new_code_cell("x = 1")
    plain.outputs = [nbformat.v4.new_output("stream", name="stdout", text="the instructor's run\n")]
    plain.execution_count = 1
    kept = nbformat.v4.new_code_cell("figure()", metadata={"tags": ["keep-output"]})
    kept.outputs = [nbformat.v4.new_output("stream", name="stdout", text="kept\n")]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# title"),
        plain,
        kept,
        nbformat.v4.new_code_cell("def f(): return 42", metadata={"tags": ["solution"]}),
        nbformat.v4.new_markdown_cell("The answer is 42.", metadata={"tags": ["solution"]}),
        checker,
    ]
    return nb


def test_student_notebook_replaces_solutions_and_clears_every_output_but_the_kept_ones():
    nb = _toy_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    out = student_notebook(nb)
    nbformat.validate(out)
    kinds = [(c.cell_type, _tags(c)) for c in out.cells]
    assert kinds == [("markdown", []), ("code", []), ("code", ["keep-output"]), ("code", ["your-turn"]),
                     ("markdown", ["your-turn"]), ("code", ["checker"])]
    assert out.cells[3].source == CODE_PLACEHOLDER
    assert "42" not in out.cells[3].source + out.cells[4].source
    assert out.cells[1].outputs == [] and out.cells[1].execution_count is None  # "predict, then run"
    assert out.cells[2].outputs and out.cells[2].outputs[0]["text"] == "kept\n"
    assert out.cells[5].outputs == [] and out.cells[5].execution_count is None
    assert "widgets" not in out.metadata
    assert out.metadata["labkit_edition"] == "student"


def test_a_checker_cannot_keep_its_output():
    nb = _toy_notebook()
    nb.cells[-1].metadata["tags"].append("keep-output")
    with pytest.raises(LabkitInputError, match="a checker's stored verdict is the instructor's"):
        student_notebook(nb)


def test_placeholder_code_defines_nothing_and_raises_nothing():
    namespace: dict = {}
    exec(compile(CODE_PLACEHOLDER, "<placeholder>", "exec"), namespace)
    assert set(namespace) == {"__builtins__"}


def test_build_refuses_to_write_into_the_instructor_notebooks(tmp_path):
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(_toy_notebook(), src / "a.ipynb")
    with pytest.raises(LabkitInputError, match="outside the instructor notebooks"):
        build_student_edition(src, src)
    with pytest.raises(LabkitInputError, match="outside the instructor notebooks"):
        build_student_edition(src, src / "student")


def test_a_missing_or_odd_src_is_refused_in_words(tmp_path):
    with pytest.raises(LabkitInputError, match=r"--src .*missing does not exist: give the folder of the instructor"):
        build_student_edition(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(LabkitInputError, match="is a file, not a folder"):
        build_student_edition(tmp_path / "a_file", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LabkitInputError, match="holds no notebooks"):
        build_student_edition(tmp_path / "empty", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _source_folder(tmp_path):
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(_toy_notebook(), src / "a.ipynb")
    return src


def test_an_out_folder_that_cannot_be_written_is_named(tmp_path, monkeypatch):
    src = _source_folder(tmp_path)
    (tmp_path / "blocker").write_text("a file where the folder should go")
    with pytest.raises(LabkitInputError, match=r"cannot write the student edition into --out .*blocker"):
        build_student_edition(src, tmp_path / "blocker" / "student")

    # A read-only folder (simulated: this may run as root, where permission bits do not stop writes).
    def read_only(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(LabkitInputError, match=r"--out .*read_only_out: Permission denied"):
        build_student_edition(src, tmp_path / "read_only_out")


def test_without_nbformat_the_message_names_the_extra(tmp_path, monkeypatch):
    src = _source_folder(tmp_path)
    monkeypatch.setitem(sys.modules, "nbformat", None)
    with pytest.raises(ImportError, match=r"pip install 'labkit\[lab\]'") as err:
        build_student_edition(src, tmp_path / "out")
    assert err.value.name == "nbformat"  # so that the CLI can name the extra too


def test_a_later_cell_that_needs_a_solutions_name_is_found():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("def helper(): return 1"),
        nbformat.v4.new_code_cell("def answer(): return helper()", metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell("%matplotlib inline\nprint(answer(), helper())"),
        nbformat.v4.new_code_cell("ex.check(globals())", metadata={"tags": ["checker"]}),
    ]
    assert names_only_solutions_define(nb) == [(2, "answer")]
    nb.cells.insert(1, nbformat.v4.new_code_cell("def answer(): pass  # the skeleton"))
    assert names_only_solutions_define(nb) == []


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_no_notebook_needs_a_name_that_only_a_solution_defines(path):
    """Solutions may sit in any notebook (03, 05, 06, 07): the student edition must still run on."""
    assert names_only_solutions_define(nbformat.read(path, as_version=4)) == []


def test_build_copies_notebooks_and_their_files(tmp_path):
    src = tmp_path / "notebooks"
    (src / "data").mkdir(parents=True)
    (src / ".ipynb_checkpoints").mkdir()
    nbformat.write(_toy_notebook(), src / "a.ipynb")
    nbformat.write(_toy_notebook(), src / ".ipynb_checkpoints" / "a-checkpoint.ipynb")
    (src / "data" / "record.json").write_text("{}")
    written = build_student_edition(src, tmp_path / "student")
    assert written == [tmp_path / "student" / "a.ipynb"]
    assert (tmp_path / "student" / "data" / "record.json").read_text() == "{}"
    assert not (tmp_path / "student" / ".ipynb_checkpoints").exists()


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    if not EXERCISES.exists():
        pytest.skip("notebooks/07_exercises.ipynb is not there")
    out = tmp_path_factory.mktemp("student")
    return out, build_student_edition(NOTEBOOKS, out)


def test_every_notebook_loses_its_solutions_and_keeps_its_checkers(student):
    out, written = student
    sources = sorted(p for p in NOTEBOOKS.glob("*.ipynb"))
    assert [p.name for p in written] == [p.name for p in sources]
    for src_path in sources:
        src = nbformat.read(src_path, as_version=4)
        dst = nbformat.read(out / src_path.name, as_version=4)
        nbformat.validate(dst)
        n_solutions = sum("solution" in _tags(c) for c in src.cells)
        assert not any("solution" in _tags(c) for c in dst.cells), src_path.name
        assert sum("your-turn" in _tags(c) for c in dst.cells) == n_solutions
        src_checkers = [c.source for c in src.cells if "checker" in _tags(c)]
        dst_checkers = [c for c in dst.cells if "checker" in _tags(c)]
        assert [c.source for c in dst_checkers] == src_checkers
        assert all(c.outputs == [] for c in dst_checkers)
        solution_sources = [c.source for c in src.cells if "solution" in _tags(c)]
        assert not any(s in [c.source for c in dst.cells] for s in solution_sources)


def test_exercises_notebook_has_solutions_and_checkers_for_every_exercise():
    nb = nbformat.read(EXERCISES, as_version=4) if EXERCISES.exists() else pytest.skip("no notebook 07")
    checkers = [c.source for c in nb.cells if "checker" in _tags(c)]
    for fn in ("check_mapping", "check_kernel", "check_dflash", "check_offset"):
        assert any(fn in s for s in checkers), fn
    assert sum("solution" in _tags(c) and c.cell_type == "code" for c in nb.cells) >= 4


# Running the student 07 top to bottom (every checker says "not solved yet") is one test of
# tests/test_student_secret.py: it shares that file's single run of the learner's path.


def test_a_solution_cell_may_name_its_own_placeholder():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["solution"]})
    cell.metadata["labkit"] = {"placeholder": "# Your turn: run ex.check_mapping(globals()) below."}
    nb.cells = [cell]
    assert student_notebook(nb).cells[0].source == "# Your turn: run ex.check_mapping(globals()) below."
