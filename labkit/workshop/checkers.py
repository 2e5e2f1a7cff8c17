"""The exercises of notebook 07: write the fix yourself, and a checker runs it through the kit.

    ex.check_...(globals())     one checker per exercise: see below, and ``ex.<Tab>``
    hint("a"), hint("a", 2)     each hint gives more away; the last is the fix
    reveal("a"), reveal()       the PR's fix beside your last checked code, solved or not
    compare("a")                the same, for the notebooks after 07 (from the answers 07 kept)
    capstone(globals())         your pieces in the engine: notebook 01's table, and
                                .ownership_map() of your own launch

Each checker takes your function, or a namespace such as ``globals()`` where it looks the name
up, and returns a :class:`~labkit.workshop.feedback.CheckResult`: "solved", or "not solved yet"
with what went wrong in terms of rows, slots and buffers. Checkers judge behaviour only (outputs,
q, and what your code touched outside the buffers), never the text of your code, and never
raise. A checker run on the code its exercise starts from says "not attempted yet" and nothing
else. A check of a kernel that fails draws the launch it failed on; a check that passes shows the
PR's fix beside your code. Every check keeps your code in ``my_answers/<exercise>.py``
($LABKIT_ANSWERS), for the notebooks after 07.

``from labkit.workshop.checkers import triton, tl, row_key, uniform`` gives an exercise cell
what it needs to define a kernel (stand-ins without Triton:
:mod:`labkit.workshop.harness.kernel_names`).
"""

from __future__ import annotations

import functools

from labkit.workshop import room_report
from labkit.workshop.exercises import record

# Re-exported for notebook 07 (the "as" form says so): the names in _OWN.
from labkit.workshop.exercises.capstone import CapstoneResult as CapstoneResult
from labkit.workshop.exercises.capstone import run_capstone
from labkit.workshop.exercises.checks import checker as _checker
from labkit.workshop.exercises.hints import hint as hint
from labkit.workshop.exercises.reveal import compare as compare
from labkit.workshop.exercises.reveal import reveal as reveal
from labkit.workshop.exercises.starting_code import NOT_ATTEMPTED
from labkit.workshop.feedback import CheckResult as CheckResult
from labkit.workshop.harness.kernel_names import NAMES, kernel_names

_OWN = ["CheckResult", "hint", "reveal", "compare", "capstone", "CapstoneResult"]


def capstone(namespace: dict, **workload) -> CapstoneResult:
    """Your pieces from `namespace` (``globals()``) in the toy engine, on notebook 01's workload: its
    table with your pieces, and the ownership map of your own launch. `workload`: prompts, seed,
    drafters, progress (:func:`labkit.workshop.exercises.capstone.run_capstone` says more)."""
    result = run_capstone(namespace, **workload)
    room_report.report(room_report.CAPSTONE, "solved" if result.solved else "tried")
    return result


def _reporting(check):
    """The checker, its verdict also told to the room's view (in a room; labkit.workshop.room_report)."""

    @functools.wraps(check)
    def run(*args, **kwargs):
        result = check(*args, **kwargs)
        # A check of the code the exercise starts from (nothing written yet) is no attempt.
        if result.solved or NOT_ATTEMPTED not in result.message:
            room_report.report(result.exercise, "solved" if result.solved else "tried")
        return result

    return run


def _checkers() -> dict:
    return {x.check_name: x for x in record.EXERCISES}


def __getattr__(name: str):
    # Each exercise's checker comes from its record, read when asked for (so is __all__); Triton's
    # names are looked up on first use, so that importing the checkers imports no Triton.
    if name == "__all__":
        return [*_OWN, *_checkers(), *NAMES]
    found = _checkers().get(name)
    if found is not None:
        return _reporting(_checker(found))
    if name in NAMES:
        return kernel_names()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_checkers(), *NAMES})
