"""The student edition: built from the instructor notebooks, solutions out, checkers in, runs clean."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from labkit.checks import LabkitInputError
from labkit.workshop.editions import CODE_PLACEHOLDER, build_student_edition, student_notebook

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
    plain.outputs = [nbformat.v4.new_output("stream", name="stdout", text="kept\n")]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# title"),
        plain,
        nbformat.v4.new_code_cell("def f(): return 42", metadata={"tags": ["solution"]}),
        nbformat.v4.new_markdown_cell("The answer is 42.", metadata={"tags": ["solution"]}),
        checker,
    ]
    return nb


def test_student_notebook_replaces_solutions_and_clears_checkers_only():
    out = student_notebook(_toy_notebook())
    nbformat.validate(out)
    kinds = [(c.cell_type, _tags(c)) for c in out.cells]
    assert kinds == [("markdown", []), ("code", []), ("code", ["your-turn"]), ("markdown", ["your-turn"]),
                     ("code", ["checker"])]
    assert out.cells[2].source == CODE_PLACEHOLDER
    assert "42" not in out.cells[2].source + out.cells[3].source
    assert out.cells[1].outputs and out.cells[1].outputs[0]["text"] == "kept\n"
    assert out.cells[4].outputs == [] and out.cells[4].execution_count is None
    assert out.metadata["labkit_edition"] == "student"


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
    with pytest.raises(LabkitInputError, match="no notebook folder"):
        build_student_edition(tmp_path / "missing", tmp_path / "out")


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
    for fn in ("check_fill", "check_kernel", "check_dflash", "check_offset"):
        assert any(fn in s for s in checkers), fn
    assert sum("solution" in _tags(c) and c.cell_type == "code" for c in nb.cells) == 4


def test_the_student_exercises_run_top_to_bottom_and_say_not_solved_yet(student):
    from nbclient import NotebookClient

    out, _ = student
    path = out / "07_exercises.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(out)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    checker_texts = [" ".join(_text(o) for o in c.outputs) for c in nb.cells if "checker" in _tags(c)]
    assert checker_texts and all("not solved yet" in t for t in checker_texts), checker_texts
    assert not any(" solved." in t for t in checker_texts)
