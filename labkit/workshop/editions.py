"""Two editions from one source: the instructor's notebooks (solutions run) and the student's.

The notebooks in ``notebooks/`` are the instructor edition: executed, solutions included. Cells
are marked with tags (JupyterLab: the property inspector, "Cell Tags"):

    solution   removed from the student edition; a short "your turn" cell takes its place
               (a code cell that defines nothing and raises nothing, or a markdown cell)
    checker    kept, with its outputs cleared (the instructor's "solved" would give it away);
               checkers never raise, so an unsolved exercise reads "not solved yet"

Everything else is copied as it is, outputs included. Build with::

    python -m labkit student-edition [--src notebooks] [--out student]
"""

from __future__ import annotations

import shutil
from pathlib import Path

from labkit.checks import LabkitInputError

SOLUTION_TAG = "solution"
CHECKER_TAG = "checker"
PLACEHOLDER_TAG = "your-turn"

CODE_PLACEHOLDER = (
    "# Your turn: edit the cell above (or write your own version here),\n"
    "# then run the checker below. The instructor edition has a solution in this place."
)
MARKDOWN_PLACEHOLDER = "**Your answer:** *(double-click to write it here)*"

_SKIP_DIRS = {".ipynb_checkpoints", "__pycache__"}


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def student_notebook(nb):
    """The student edition of one notebook (an nbformat NotebookNode), as a new notebook."""
    import copy

    import nbformat

    out = copy.deepcopy(nb)
    cells = []
    for cell in out.cells:
        tags = _tags(cell)
        if SOLUTION_TAG in tags:
            if cell.cell_type == "code":
                new = nbformat.v4.new_code_cell(CODE_PLACEHOLDER)
            else:
                new = nbformat.v4.new_markdown_cell(MARKDOWN_PLACEHOLDER)
            new.metadata["tags"] = [PLACEHOLDER_TAG]
            if "id" in cell:
                new.id = f"{cell.id}-your-turn"[:64]
            cells.append(new)
            continue
        if CHECKER_TAG in tags and cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    out.cells = cells
    out.metadata["labkit_edition"] = "student"
    return out


def build_student_edition(src: str | Path = "notebooks", out: str | Path = "student") -> list[Path]:
    """Write the student edition of every notebook under `src` into `out`; returns the notebooks written.

    Other files under `src` (data a notebook reads, a sanitize config) are copied too, so the
    student folder runs on its own. `out` may exist; files in it with the same names are replaced.
    """
    import nbformat

    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise LabkitInputError(f"no notebook folder at {src}: give --src the instructor notebooks folder")
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise LabkitInputError(
            f"the student edition must go outside the instructor notebooks ({src}), got --out {out}")
    notebooks = sorted(p for p in src.rglob("*.ipynb") if not _SKIP_DIRS & set(p.relative_to(src).parts))
    if not notebooks:
        raise LabkitInputError(f"{src} holds no notebooks (*.ipynb)")
    written = []
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src)
        if _SKIP_DIRS & set(rel.parts):
            continue
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            nbformat.write(student_notebook(nb), target)
            written.append(target)
        else:
            shutil.copy2(path, target)
    return written
