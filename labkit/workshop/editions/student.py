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
sees before each exercise is checked by :mod:`labkit.workshop.editions.secrecy`. Build with::

    python -m labkit student-edition [--src notebooks] [--out student]
"""

from __future__ import annotations

import ast
import copy
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from labkit import paths
from labkit.errors import LabkitInputError
from labkit.workshop.learner_folder import DOCS_AFTER_THE_EXERCISES, OLD_LEARNER_SUFFIX
from labkit.workshop.learner_folder import deliver_docs_after_the_exercises as deliver_docs_after_the_exercises
from labkit.workshop.learner_folder import is_learner_folder as is_learner_folder

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


# --- a learner's folder: what `make lab` opens, what a hub gives each learner -----------------------

# Docs a student notebook may link to that answer no exercise: in a learner's folder from the start.
LEARNER_DOCS = ("TRITON_MASKS.md",)
# A learner's copy is named for the file browser, which sorts by name and cuts long names: a letter
# for its place on the learner's path (A, B, C, ...: the browser then lists them in the order they are
# opened, 07's exercises before 03's fix), the notebook's number (the notebooks name one another by
# it: "notebook 03"), and a short title. A tab of the student edition so never looks like a tab of the
# instructor's (JupyterLab titles a tab with the file name). A notebook off the path gets Z.
LEARNER_TITLES = {
    "00_setup_and_tour.ipynb": "setup",
    "01_reproduce_the_gibberish.ipynb": "gibberish",
    "02_see_the_stale_idx_mapping.ipynb": "mapping",
    "07_exercises.ipynb": "exercises",
    "03_the_fix.ipynb": "the_fix",
    "04_timing.ipynb": "timing",
    "05_sibling_bugs.ipynb": "siblings",
    "06_audit_and_distribution.ipynb": "audit",
    "09_the_family.ipynb": "family",
    "08_appendix_kernel_engineering.ipynb": "appendix",
}
OFF_THE_PATH = "Z"
_LEARNER_FILE = re.compile(r"^([A-Z])_(\d\d)_")
_DOC_LINK = re.compile(r"\[([^\]]+)\]\(\.\./docs/([A-Za-z0-9_.-]+)\)")


def learner_name(notebook: str) -> str:
    """The file name of a notebook's copy in a learner's folder: ``A_00_setup.ipynb``, ``D_07_exercises.ipynb``
    (its letter: its place on the learner's path, so that the file browser lists the copies in that order)."""
    from labkit.workshop.editions.secrecy import STUDENT_PATH

    name = Path(notebook).name
    stem = Path(notebook).stem
    number, _, rest = stem.partition("_")
    if name not in STUDENT_PATH:
        return f"{OFF_THE_PATH}_{stem}.ipynb"
    letter = "ABCDEFGHIJKLMNOPQRSTUVWXY"[STUDENT_PATH.index(name)]
    return f"{letter}_{number}_{LEARNER_TITLES.get(name, rest)}.ipynb"


def edition_name(learner_file: str) -> str:
    """The inverse of :func:`learner_name`: ``00_setup_and_tour.ipynb`` for ``A_00_setup.ipynb`` (and for an
    older kit's ``00_setup_and_tour_student.ipynb``)."""
    from labkit.workshop.editions.secrecy import STUDENT_PATH

    stem = Path(learner_file).stem
    if stem.endswith(OLD_LEARNER_SUFFIX):
        return f"{stem[:-len(OLD_LEARNER_SUFFIX)]}.ipynb"
    if stem.startswith(f"{OFF_THE_PATH}_"):
        return f"{stem[2:]}.ipynb"
    match = _LEARNER_FILE.match(stem)
    if match:
        on_path = [name for name in STUDENT_PATH if learner_name(name) == Path(learner_file).name]
        if on_path:
            return on_path[0]
    return f"{stem}.ipynb"


def _learner_links(nb):
    """Links to ../docs/ as a learner's folder holds them: a learner doc beside the notebooks; a doc that
    arrives with the capstone, linked where it will be and said so; any other named, not linked."""
    def relink(match):
        text, doc = match.groups()
        if doc in LEARNER_DOCS:
            return f"[{text}](docs/{doc})"
        if doc in DOCS_AFTER_THE_EXERCISES:
            return f"[{text}](docs/{doc}) (in your folder once the capstone of 07 passes)"
        return f"{text} (in the kit's repository: `docs/{doc}`)"

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _DOC_LINK.sub(relink, cell.source)
    return nb


@dataclass(frozen=True)
class LearnerFolder:
    """What :func:`build_learner_folder` left in a learner's folder."""

    root: Path
    notebooks: tuple[Path, ...]  # in the order a learner opens them (secrecy.STUDENT_PATH): the first is the lab's
    written: tuple[Path, ...]  # new this time
    kept: tuple[Path, ...]  # already there: the learner's own copy, never overwritten
    outdated: tuple[Path, ...]  # kept, although the instructor notebook changed since it was written
    others: tuple[Path, ...] = ()  # files already there that a learner's folder does not hold (left alone)

    @property
    def first(self) -> Path:
        return self.notebooks[0]


KIT_NOTEBOOKS = paths.NOTEBOOKS  # the instructor edition of this clone


def build_learner_folder(dest: str | Path, src: str | Path | None = None, *, fresh: bool = False) -> LearnerFolder:
    """A learner's folder in `dest`: the student edition of every notebook in `src` and the docs it links
    to that give no answer away (:data:`LEARNER_DOCS`), nothing else (no test configuration, no solved
    notebook, no figure file, no doc that states the fix).

    A notebook already in `dest` is the learner's work and stays as it is (listed in ``kept``, and in
    ``outdated`` where its instructor notebook is newer); ``fresh=True`` writes every file anew. Returns
    the folder's notebooks in the order a learner opens them. `src` defaults to this clone's
    ``notebooks/``. One call per learner: a hub gives each learner their own folder this way.
    """
    from labkit.workshop.editions.secrecy import STUDENT_PATH

    src, dest = Path(src if src is not None else KIT_NOTEBOOKS), Path(dest)
    if not src.is_dir():
        what = "is a file, not a folder" if src.exists() else "does not exist"
        raise LabkitInputError(f"--src {src} {what}: give the folder of the instructor notebooks "
                               "(default: notebooks, in the repository)")
    if dest.resolve() == src.resolve() or src.resolve() in dest.resolve().parents:
        raise LabkitInputError(f"a learner's folder must be outside the instructor notebooks ({src}), got {dest}")
    sources = {p.name: p for p in src.glob("*.ipynb")}
    if not sources:
        raise LabkitInputError(f"--src {src} holds no notebooks (*.ipynb)")
    order = [name for name in STUDENT_PATH if name in sources] + sorted(set(sources) - set(STUDENT_PATH))
    nbformat = _nbformat()
    written, kept, outdated, notebooks = [], [], [], []
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for name in order:
            target = dest / learner_name(name)
            notebooks.append(target)
            older = dest / f"{Path(name).stem}{OLD_LEARNER_SUFFIX}.ipynb"
            if older.is_file() and not target.exists():
                older.replace(target)  # a folder an older kit built: the learner's copy, under today's name
            if target.exists() and not fresh:
                kept.append(target)
                if sources[name].stat().st_mtime > target.stat().st_mtime:
                    outdated.append(target)
                continue
            nb = _learner_links(student_notebook(nbformat.read(sources[name], as_version=4)))
            nbformat.write(nb, target)
            written.append(target)
        docs = src.resolve().parent / "docs"
        for doc in LEARNER_DOCS:
            if (docs / doc).is_file():
                (dest / "docs").mkdir(exist_ok=True)
                shutil.copy2(docs / doc, dest / "docs" / doc)
    except OSError as err:
        raise LabkitInputError(f"cannot write a learner's folder into {dest}: {err.strerror or err} "
                               f"({err.filename or dest}). Choose a folder you can write to.") from err
    ours = set(notebooks) | {dest / "docs" / doc for doc in LEARNER_DOCS + DOCS_AFTER_THE_EXERCISES}
    others = sorted(p for p in dest.rglob("*") if p.is_file() and p not in ours
                    and not {"my_answers", *_SKIP_DIRS} & set(p.relative_to(dest).parts))
    return LearnerFolder(dest, tuple(notebooks), tuple(written), tuple(kept), tuple(outdated), tuple(others))
