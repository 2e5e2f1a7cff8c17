"""Two editions from one source: the instructor's notebooks (solutions run) and the student's.

The notebooks in ``notebooks/`` are the instructor edition: executed, solutions included. Cells
are marked with tags (JupyterLab: the property inspector, "Cell Tags"), in any notebook:

    solution   removed from the student edition; a short "your turn" cell takes its place
               (a code cell that defines nothing and raises nothing, or a markdown cell),
               tagged ``your-turn``
    checker    kept; checkers never raise, so an unsolved exercise reads "not solved yet"
    keep-output  a code cell whose stored outputs the student edition keeps (a symptom figure, say);
               only for outputs that give no part of the fix away, never on a checker

The student edition is an assignment: every other code cell loses its outputs (a "predict, then
run" cell must not show its result, a checker must not show the instructor's "solved"), and the
notebook loses its saved widget state (the instructor run's widget labels). Markdown is copied as
it is. A later cell must not need a name that only a solution cell defines, or the student
edition would stop there: :func:`names_only_solutions_define` finds such cells. What a learner
sees before each exercise is checked by :mod:`labkit.workshop.secrecy`. Build with::

    python -m labkit student-edition [--src notebooks] [--out student]
"""

from __future__ import annotations

import ast
import copy
import shutil
from pathlib import Path

from labkit.errors import LabkitInputError

SOLUTION_TAG = "solution"
CHECKER_TAG = "checker"
KEEP_OUTPUT_TAG = "keep-output"
PLACEHOLDER_TAG = "your-turn"

# A solution cell may carry its own placeholder in metadata["labkit"]["placeholder"] (an exercise
# with a checker says "run the checker below"; a worked answer in a lesson notebook does not).
CODE_PLACEHOLDER = (
    "# Your turn: write this step yourself (edit the cell above or start here),\n"
    "# then run the cells below. The instructor edition shows a solution in this place."
)
MARKDOWN_PLACEHOLDER = "**Your answer:** *(double-click to write it here)*"

_SKIP_DIRS = {".ipynb_checkpoints", "__pycache__"}


def _nbformat():
    try:
        import nbformat
    except ImportError as err:
        raise ImportError("the student edition reads and writes notebooks with nbformat, which a plain install "
                          "of labkit leaves out: pip install 'labkit[lab]' (or pip install nbformat)",
                          name="nbformat") from err
    return nbformat


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def student_notebook(nb):
    """The student edition of one notebook (an nbformat NotebookNode), as a new notebook."""
    nbformat = _nbformat()
    out = copy.deepcopy(nb)
    cells = []
    for cell in out.cells:
        tags = _tags(cell)
        if SOLUTION_TAG in tags:
            custom = cell.get("metadata", {}).get("labkit", {}).get("placeholder")
            if cell.cell_type == "code":
                new = nbformat.v4.new_code_cell(custom or CODE_PLACEHOLDER)
            else:
                new = nbformat.v4.new_markdown_cell(custom or MARKDOWN_PLACEHOLDER)
            new.metadata["tags"] = [PLACEHOLDER_TAG]
            if "id" in cell:
                new.id = f"{cell.id}-your-turn"[:64]
            cells.append(new)
            continue
        if cell.cell_type == "code":
            if KEEP_OUTPUT_TAG in tags and CHECKER_TAG in tags:
                raise LabkitInputError(f"cell {cell.get('id', '?')} is tagged both {KEEP_OUTPUT_TAG!r} and "
                                       f"{CHECKER_TAG!r}: a checker's stored verdict is the instructor's, not "
                                       "the learner's; remove one of the tags")
            if KEEP_OUTPUT_TAG not in tags:
                cell.outputs = []
                cell.execution_count = None  # a kept output keeps its count: nbval reads it as "was run"
        cells.append(cell)
    out.cells = cells
    out.metadata.pop("widgets", None)  # the instructor run's widget models: labels, values, images
    out.metadata["labkit_edition"] = "student"
    return out


def build_student_edition(src: str | Path = "notebooks", out: str | Path = "student") -> list[Path]:
    """Write the student edition of every notebook under `src` into `out`; returns the notebooks written.

    Other files under `src` (data a notebook reads, a sanitize config) are copied too, so the
    student folder runs on its own. `out` may exist; files in it with the same names are replaced.
    """
    src, out = Path(src), Path(out)
    if not src.is_dir():
        what = "is a file, not a folder" if src.exists() else "does not exist"
        raise LabkitInputError(f"--src {src} {what}: give the folder of the instructor notebooks "
                               "(default: notebooks, in the repository)")
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise LabkitInputError(
            f"the student edition must go outside the instructor notebooks ({src}), got --out {out}")
    files = sorted(p for p in src.rglob("*") if p.is_file() and not _SKIP_DIRS & set(p.relative_to(src).parts))
    if not any(p.suffix == ".ipynb" for p in files):
        raise LabkitInputError(f"--src {src} holds no notebooks (*.ipynb)")
    nbformat = _nbformat()
    written = []
    for path in files:
        target = out / path.relative_to(src)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".ipynb":
                nbformat.write(student_notebook(nbformat.read(path, as_version=4)), target)
                written.append(target)
            else:
                shutil.copy2(path, target)
        except OSError as err:
            raise LabkitInputError(f"cannot write the student edition into --out {out}: {err.strerror or err} "
                                   f"({err.filename or target}). Choose a folder you can write to.") from err
    return written


def names_only_solutions_define(nb) -> list[tuple[int, str]]:
    """(cell index, name) for every code cell, not a solution, that uses a name which, at that point,
    only solution cells have defined: in the student edition that cell would raise NameError."""
    by_others: set[str] = set()
    by_solutions: set[str] = set()
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tree = _parse(cell.source)
        if tree is None:
            continue
        if SOLUTION_TAG in _tags(cell):
            by_solutions |= _defined(tree)
            continue
        found += [(index, name) for name in sorted(_used(tree) & (by_solutions - by_others))]
        by_others |= _defined(tree)
    return found


def _parse(source: str):
    # IPython magics and shell escapes are not Python; they define nothing a later cell needs.
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _defined(tree) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _used(tree) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
