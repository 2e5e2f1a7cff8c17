"""Exercise (c): the pad value of DFlash's per-sample-row mapping.

A DFlash-style drafter samples ``num_reqs_padded * k`` sample rows; sample row ``r`` is draft step
``r % k`` of live row ``r // k``. The learner writes ``build_sample_mapping(idx_mapping, num_reqs,
k, sample_idx_mapping)``, which fills the persistent int32 buffer ``sample_idx_mapping
[max_num_reqs * k]`` in place. Before PR #47066 the padding was 0, "a harmless valid index" --
but to a store indexed by slot, 0 is request slot 0.

The checker plugs it into the kit's DFlash drafter (with the masked kernel and the kit's own
idx_mapping fill; the buffer starts as -1, vLLM's later hardening, so only the learner's pad
decides) and runs the timeline of :mod:`labkit.workshop.host_steps`, then the audit.
"""

from __future__ import annotations

from labkit.speculator import DFlashSpeculator, FixSwitches
from labkit.workshop.feedback import CheckResult, never_raises, not_yet, resolve, solved
from labkit.workshop.host_steps import (
    CAPTURE_SIZES,
    HostExercise,
    K,
    M,
    audit_learner,
    run_timeline,
    toy_draft_model,
)
from labkit.workshop.learner_specs import LearnerDFlashSpeculator

NAME = "build_sample_mapping"
AUDIT_BATCHES = ((0, 1, 2, 4, 5, 6, 7), (2, 0, 7))


def dflash_speculator(sample_mapping, **kwargs) -> LearnerDFlashSpeculator:
    """The DFlash speculator of the checks: graphs, masked kernel, the learner's sample mapping."""
    kwargs.setdefault("fix", FixSwitches(fill_padding=True, mask_kernel=True, dflash_pad=-1))
    return LearnerDFlashSpeculator(toy_draft_model(), sample_mapping=sample_mapping, max_num_reqs=M, num_steps=K,
                                   capture_sizes=CAPTURE_SIZES, record=True, **kwargs)


def reference_speculator() -> DFlashSpeculator:
    """The kit's fixed DFlash speculator, eager: what every live output must equal."""
    return DFlashSpeculator(toy_draft_model(), max_num_reqs=M, num_steps=K, capture_sizes=CAPTURE_SIZES,
                            use_graphs=False)


DFLASH = HostExercise("c", NAME, "sample_idx_mapping", K, dflash_speculator, reference_speculator)


@never_raises("c")
def check_dflash(build_sample_mapping) -> CheckResult:
    """(c) `build_sample_mapping(idx_mapping, num_reqs, k, sample_idx_mapping)` fills the sample mapping.

    Sample row r < num_reqs * k is draft step r % k of live row r // k, so it maps to
    idx_mapping[r // k]; the rest is padding. Takes the function, or a namespace such as ``globals()``.
    """
    fn, name, verdict = resolve("c", build_sample_mapping, NAME)
    if verdict is not None:
        return verdict
    failed, warnings = run_timeline(DFLASH, fn, name)
    if failed is not None:
        return failed
    problem = audit_learner(DFLASH, fn, name, AUDIT_BATCHES)
    if problem is not None:
        return not_yet("c", problem)
    return solved("c", "Every sample row the padded graph read held a live slot or no slot at all, so the masked "
                       "kernel skipped the padding and no request's q was overwritten: slot 0's q, which the old "
                       "pad of 0 clobbered, stayed its own, and every live output equals the eager run's. The "
                       f"padding-invariance audit agreed on {len(AUDIT_BATCHES)} batches.", warnings)
