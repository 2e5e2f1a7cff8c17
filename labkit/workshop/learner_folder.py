"""A learner's folder: how to tell one, and the docs that reach it once the exercises are done.

The student edition (:mod:`labkit.workshop.editions.student`) builds the folder; the capstone
(:mod:`labkit.workshop.exercises.capstone`) brings the docs that explain the fix into it when it
passes. Both read this module, which sits below them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from labkit import paths

# Docs that explain the fix, which the notebooks after 07 link to: they reach a learner's folder when
# the capstone passes (every exercise done), never before; the file browser shows none of them earlier.
DOCS_AFTER_THE_EXERCISES = ("MECHANICS.md", "VLLM_MAP.md")
# A learner's copy is named ``A_00_setup.ipynb``: a capital letter for its place on the learner's path,
# the notebook's number, a short title (the student edition names them); the instructor's notebooks
# never start with a letter. An older kit named the copies ``00_setup_and_tour_student.ipynb``.
LEARNER_FILE = re.compile(r"^[A-Z]_\d\d_\w+\.ipynb$")
OLD_LEARNER_SUFFIX = "_student"


def is_learner_folder(folder: str | Path) -> bool:
    """Whether `folder` is a learner's folder (it holds a notebook of the student edition)."""
    folder = Path(folder)
    return (any(LEARNER_FILE.match(p.name) for p in folder.glob("*.ipynb"))
            or any(folder.glob(f"*{OLD_LEARNER_SUFFIX}.ipynb")))


def deliver_docs_after_the_exercises(folder: str | Path | None = None) -> list[Path]:
    """Copies :data:`DOCS_AFTER_THE_EXERCISES` into the ``docs/`` of a learner's `folder` (default: the
    working folder, where a notebook's kernel runs) and returns their paths; in any other folder (the
    instructor's notebooks, next to the repository's own docs) it copies nothing and returns []."""
    folder = Path(folder if folder is not None else Path.cwd())
    if not is_learner_folder(folder):
        return []
    (folder / "docs").mkdir(exist_ok=True)
    delivered = []
    for doc in DOCS_AFTER_THE_EXERCISES:
        if (paths.DOCS / doc).is_file():
            shutil.copy2(paths.DOCS / doc, folder / "docs" / doc)
            delivered.append(folder / "docs" / doc)
    return delivered
