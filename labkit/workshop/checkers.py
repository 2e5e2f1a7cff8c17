"""The exercises of notebook 07 in one place: write the fix yourself, and a checker runs it through the kit.

    (a) check_fill(copy_idx_mapping)            the host side: what idx_mapping's padded rows hold
    (b) check_kernel(gumbel_kernel)             the sampling kernel and the padded rows
        check_kernel(gumbel_rows)               ... its torch version, where Triton cannot run
    (c) check_dflash(build_sample_mapping)      the padding of DFlash's per-sample mapping
    (d) check_offset(q_offset)                  the offset `slot * stride` of a store (vLLM #47383)
    hint("a"), hint("a", 2), ...                each hint gives more away; the last is the fix
    reveal("a"), reveal()                       the PR's fix beside your last checked code, solved or not
    compare("a")                                the same, for notebook 03 (from the answers 07 kept)
    capstone(globals())                         your (a), (b), (c) in the engine: notebook 01's table,
                                                and .ownership_map() of your own launch

Each checker takes your function, or a namespace such as ``globals()`` where it looks the name
up, and returns a :class:`~labkit.workshop.feedback.CheckResult`: "solved", or "not solved yet"
with what went wrong in terms of rows, slots and buffers. Checkers judge behaviour only (outputs,
q, and what your code touched outside the buffers), never the text of your code, and never
raise. A checker run on the code its exercise starts from says "not attempted yet" and nothing
else. A check of (b) that fails draws the launch it failed on (who stored into each slot of q,
and what touched the guard memory); a check that passes shows the PR's fix beside your code
(:mod:`labkit.workshop.exercises.reveal`). Every check keeps your code in ``my_answers/<exercise>.py``
($LABKIT_ANSWERS), for notebook 03. The capstone (:func:`labkit.workshop.exercises.capstone.run_capstone`)
then runs your three pieces in the engine, once their checkers pass.

``from labkit.workshop.checkers import triton, tl, row_key, uniform`` gives an exercise cell
what it needs to define a kernel (stand-ins without Triton: :mod:`labkit.workshop.harness.kernel_names`).
"""

from __future__ import annotations

from labkit.workshop.exercises.capstone import CapstoneResult, run_capstone
from labkit.workshop.exercises.dflash_mapping import check_dflash
from labkit.workshop.exercises.hints import hint
from labkit.workshop.exercises.host_mapping import check_fill
from labkit.workshop.exercises.reveal import compare, reveal
from labkit.workshop.exercises.sampling_kernel import check_kernel
from labkit.workshop.exercises.store_offset import check_offset
from labkit.workshop.feedback import CheckResult
from labkit.workshop.harness.kernel_names import NAMES, kernel_names

__all__ = ["CheckResult", "check_fill", "check_kernel", "check_dflash", "check_offset", "hint",
           "reveal", "compare", "capstone", "CapstoneResult", *NAMES]


def capstone(namespace: dict, **workload) -> CapstoneResult:
    """Your (a), (b) and (c) from `namespace` (``globals()``) in the toy engine, on notebook 01's workload:
    its table with your pieces, and the ownership map of your own launch. `workload`: prompts, seed,
    drafters, progress (:func:`labkit.workshop.exercises.capstone.run_capstone` says more)."""
    return run_capstone(namespace, **workload)


def __getattr__(name: str):
    # Looked up on first use, so that importing the checkers imports no Triton.
    if name in NAMES:
        return kernel_names()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
