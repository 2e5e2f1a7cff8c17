"""Hints for the exercises of notebook 07: each gives more away than the one before; only the last one
shows the fix.

    hint("a")        the first hint of exercise (a)
    hint("b", 3)     the third (last) hint of (b): the fix

The hints are reached through :func:`hint` alone, read from each exercise's record
(:mod:`labkit.workshop.exercises.record`), so that no learner meets the last hint of an exercise by
tab-completing a name.

An exercise with a Triton and a torch version has hints for each; ``hint("b")`` picks the version
this session runs (``hint("b-torch")`` or ``hint("b-triton")`` choose one).
"""

from __future__ import annotations

from labkit.workshop.exercises import record
from labkit.workshop.feedback import Text
from labkit.workshop.harness.launches import triton_kernels_run
from labkit.workshop.room_report import report as report_to_room


class Hint(Text):
    """One hint; shows as its text."""


def _version(name):
    """(exercise, version) a learner names: 'b', '(b)', 'b-torch'; None if there is none."""
    letter, _, kind = str(name).strip().strip("()").lower().partition("-")
    found = record.exercise(letter)
    if found is None:
        return None
    if len(found.versions) == 1:
        return (found, found.versions[0]) if not kind else None
    try:
        return found, found.version(kind or ("triton" if triton_kernels_run() else "torch"))
    except KeyError:
        return None


def hint(exercise, n: int = 1) -> Hint:
    """Hint number `n` (1, 2, 3: each gives more away; the last is the fix) for an exercise of notebook 07."""
    found = _version(exercise)
    if found is None:
        return Hint(f"There is no exercise {exercise!r}; choose one of {record.choices()}.")
    ex, version = found
    hints = version.hints
    if not isinstance(n, int) or not 1 <= n <= len(hints):
        return Hint(f"Exercise ({ex.letter}) has hints 1 to {len(hints)}.")
    report_to_room(ex.letter, "hint", n)
    last = " (the fix)" if n == len(hints) else ""
    kind = {"torch": ", torch version", "triton": ", Triton version"}.get(version.kind or "", "")
    return Hint(f"Hint {n}/{len(hints)}{last} for ({ex.letter}{kind}): {hints[n - 1]}")
