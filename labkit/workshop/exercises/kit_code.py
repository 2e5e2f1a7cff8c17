"""The kit's own code that answers each exercise, shown once the exercise is done (lines numbered as in
their files).

    pr_fix("a")               exercise (a)'s part of the PR, as the kit writes it
    pr_fix("b", "triton")     (b)'s, for the Triton version of the exercise
    pr_fix("b", "torch")      ... and for its torch version (the kernel's torch reference)

Which functions answer which exercise is each exercise's record
(:mod:`labkit.workshop.exercises.record`). Each answer is one or two whole functions, so an edit
elsewhere in a file moves nothing, and each shows only its own exercise's answer: the kernel's
slot-indexed accesses are separate functions, one per exercise. If a function is gone (the source
changed), the excerpt says where to look.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from labkit.viz.html_views import function_source
from labkit.workshop.exercises import record
from labkit.workshop.exercises.record import Piece


@dataclass(frozen=True)
class FixSource:
    """The PR's fix for one exercise: where it lives, and the lines (numbered, fix lines marked '>')."""

    exercise: str
    where: str
    text: str


def _owner(spec: str):
    module_name, _, qualname = spec.partition(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _excerpt(piece: Piece) -> str:
    return function_source(_owner(piece.owner), mark=piece.mark)


def pr_fix(exercise: str, variant: str = "torch") -> FixSource:
    """The kit's lines that answer `exercise` (a letter); `variant` 'triton' or 'torch' picks the version."""
    code = record.exercise(exercise).version(variant).kit_code
    try:
        text = "\n     ...\n".join(_excerpt(p) for p in code.pieces)
    except (OSError, TypeError, ValueError, AttributeError) as err:  # the source moved: say where to look
        text = f"(the kit's source has changed since this excerpt was written: {err}; see {code.where})"
    return FixSource(exercise, code.where, text)
