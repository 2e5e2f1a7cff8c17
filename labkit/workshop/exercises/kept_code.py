"""Your answers, kept: the source of each function a checker judged, on disk for notebook 03.

Every check of an exercise keeps the source of the function it judged in ``my_answers/<exercise>.py``
under the current folder of a notebook's kernel (the notebook's own folder, so notebook 03 finds
what notebook 07 kept), or under the folder the environment variable ``LABKIT_ANSWERS`` names.
Outside IPython (a script, the tests) nothing is kept unless ``LABKIT_ANSWERS`` is set: a plain
run must not leave files in whatever folder it ran from. The first line of each file says which
exercise, which function, which version (Triton or torch) and the verdict it got, e.g.

    # labkit answer: exercise=b name=gumbel_kernel variant=triton verdict=solved

Only small text files are written (a source longer than :data:`MAX_CHARS` is cut), and a folder
that cannot be written costs a one-line note, never a check.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from labkit.workshop.feedback import is_triton_kernel

ANSWERS_ENV = "LABKIT_ANSWERS"
DEFAULT_FOLDER = "my_answers"
MAX_CHARS = 20_000
HEADER = "# labkit answer:"


@dataclass(frozen=True)
class Answer:
    """The learner's function for one exercise as it was last checked."""

    exercise: str
    name: str
    variant: str  # "triton" (a @triton.jit function) or "torch"
    verdict: str  # "solved" or "not solved yet"
    source: str | None  # None: the source could not be read

    def file_text(self) -> str:
        head = f"{HEADER} exercise={self.exercise} name={self.name} variant={self.variant} verdict={self.verdict}"
        return f"{head}\n{(self.source or '')[:MAX_CHARS]}"

    @classmethod
    def from_file_text(cls, text: str) -> "Answer | None":
        head, _, source = text.partition("\n")
        if not head.startswith(HEADER):
            return None
        fields = dict(item.split("=", 1) for item in head[len(HEADER):].split(" ") if "=" in item)
        verdict = "solved" if fields.get("verdict") == "solved" else "not solved yet"
        return cls(fields.get("exercise", "?"), fields.get("name", "?"), fields.get("variant", "torch"), verdict,
                   source or None)


def answers_folder() -> Path | None:
    """Where answers are kept: $LABKIT_ANSWERS, else my_answers/ in the current folder of a notebook's
    kernel; None (nowhere) outside IPython."""
    named = os.environ.get(ANSWERS_ENV)
    if named:
        return Path(named)
    ipython = sys.modules.get("IPython")  # imported by every kernel; never imported here
    return Path(DEFAULT_FOLDER) if ipython is not None and ipython.get_ipython() is not None else None


def variant_of(fn: Callable) -> str:
    """'triton' for a @triton.jit function, else 'torch'."""
    return "triton" if is_triton_kernel(fn) else "torch"


def keep(answer: Answer) -> str | None:
    """Write `answer` to its file; a one-line note if the folder refused, else None."""
    folder = answers_folder()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{answer.exercise}.py").write_text(answer.file_text(), encoding="utf-8")
    except OSError as err:
        return (f"(Your code was checked but not saved to {folder}/ ({type(err).__name__}: {err.strerror or err}), "
                "so notebook 03 cannot show it.)")
    return None


def saved_answer(exercise: str) -> Answer | None:
    """The answer kept on disk for `exercise`, or None (none kept, or unreadable)."""
    folder = answers_folder()
    if folder is None:
        return None
    try:
        text = (folder / f"{exercise}.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return Answer.from_file_text(text)
