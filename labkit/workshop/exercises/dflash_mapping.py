"""Exercise (c): the pad value of DFlash's per-sample-row mapping.

A DFlash-style drafter samples ``num_reqs_padded * k`` sample rows; sample row ``r`` is draft step
``r % k`` of live row ``r // k``. The learner writes ``build_sample_mapping(idx_mapping, num_reqs,
k, sample_idx_mapping)``, which fills the persistent int32 buffer ``sample_idx_mapping
[max_num_reqs * k]`` in place. Before PR #47066 the padding was 0, "a harmless valid index" --
but to a store indexed by slot, 0 is request slot 0.

The checker plugs it into the kit's DFlash drafter (with the masked kernel and the kit's own
host side; the buffer starts as vLLM's later hardening leaves it, so only the learner's pad
decides) and runs the timeline of :mod:`labkit.workshop.harness.host_steps`, then the audit.
"""

from __future__ import annotations

from dataclasses import replace

from labkit.speculator import DFlashSpeculator
from labkit.workshop.exercises import record
from labkit.workshop.exercises.reveal import keeps_answer
from labkit.workshop.feedback import CheckResult, never_raises
from labkit.workshop.harness import host_steps as hs
from labkit.workshop.harness.learner_specs import LearnerDFlashSpeculator

NAME = record.exercise("c").versions[0].function
# Private: `?` on a public constant shows its repr, and this verdict names the answer.
_SOLVED = ("Every sample row the padded graph read held a live slot or no slot at all, so the masked kernel "
          "skipped the padding and no request's q was overwritten: slot 0's q, which the old pad of 0 clobbered, "
          "stayed its own, and every live output equals the eager run's. The padding-invariance audit agreed "
          f"on {len(hs.AUDIT_BATCHES)} batches.")


_DFLASH = replace(hs.CONFIG, drafter="dflash")


def dflash_speculator(sample_mapping, *, shapes=hs.CONFIG, **kwargs) -> LearnerDFlashSpeculator:
    """The DFlash speculator of the checks: graphs, masked kernel, the learner's sample mapping."""
    return LearnerDFlashSpeculator(hs.toy_draft_model(), _DFLASH.with_pr_fix().at_shapes_of(shapes),
                                   sample_mapping=sample_mapping, record=True, **kwargs)


def reference_speculator(*, shapes=hs.CONFIG) -> DFlashSpeculator:
    """The kit's fixed DFlash speculator, eager: what every live output must equal."""
    return DFlashSpeculator(hs.toy_draft_model(), replace(_DFLASH.with_pr_fix(), use_graphs=False).at_shapes_of(shapes))


DFLASH = hs.HostExercise("c", NAME, "sample_idx_mapping", hs.K, dflash_speculator, reference_speculator)


@never_raises("c")
@keeps_answer("c")
def check_dflash(build_sample_mapping) -> CheckResult:
    """(c) `build_sample_mapping(idx_mapping, num_reqs, k, sample_idx_mapping)` writes the sample mapping.

    Sample row r < num_reqs * k is draft step r % k of live row r // k, so it maps to
    idx_mapping[r // k]; the rest is padding. Takes the function, or a namespace such as ``globals()``.
    Solved, the result shows the PR's fix beside your code.
    """
    return hs.check_host_exercise(DFLASH, build_sample_mapping, _SOLVED)
