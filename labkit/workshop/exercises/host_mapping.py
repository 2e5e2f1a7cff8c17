"""Exercise (a): the host side, the padded rows of ``idx_mapping``.

The learner writes ``copy_idx_mapping(idx_mapping, slots)``: each step it writes the row -> slot
mapping into the persistent int32 buffer ``idx_mapping [max_num_reqs]``, in place (the graph
reads that very tensor). The checker plugs it into the kit's speculator in place of the kit's own
copy (:class:`~labkit.workshop.harness.learner_specs.LearnerSpeculator`), runs the timeline of
:mod:`labkit.workshop.harness.host_steps` through padded graphs, then the padding-invariance audit.
"""

from __future__ import annotations

from dataclasses import replace

from labkit.config import FixSwitches
from labkit.speculator import Speculator
from labkit.workshop.exercises import record
from labkit.workshop.exercises.reveal import keeps_answer
from labkit.workshop.feedback import CheckResult, never_raises
from labkit.workshop.harness import host_steps as hs
from labkit.workshop.harness.learner_specs import LearnerSpeculator

NAME = record.exercise("a").versions[0].function
# Private: `?` on a public constant shows its repr, and this verdict names the answer.
_SOLVED = (f"Over {len(hs.SCHEDULE) + len(hs.WIDE_SCHEDULE)} steps of the timeline and a fresh speculator, "
          "every row the padded graph read held a live slot or no slot at all, every live row drafted the eager "
          "run's tokens, and every live slot's q is the distribution its draft was sampled from. The "
          f"padding-invariance audit agreed on {len(hs.AUDIT_BATCHES)} batches: with everything the batch does "
          "not own poisoned, the padded step's live outputs equal the unpadded step's. (Remember the other half: "
          "the kernel must skip those rows, which is exercise (b).)")


def fill_speculator(copy_idx_mapping, *, shapes=hs.CONFIG, **kwargs) -> LearnerSpeculator:
    """The speculator of the checks: graphs, the kit's masked kernel, the kit's own fill off (at the
    k, slots and capture sizes of `shapes`)."""
    config = replace(hs.CONFIG, fix=FixSwitches(host=False, kernel=True)).at_shapes_of(shapes)
    return LearnerSpeculator(hs.toy_draft_model(), config, copy_idx_mapping=copy_idx_mapping, record=True, **kwargs)


def reference_speculator(*, shapes=hs.CONFIG) -> Speculator:
    """The kit's fixed speculator, eager: what every live output must equal."""
    return Speculator(hs.toy_draft_model(), replace(hs.CONFIG.with_pr_fix(), use_graphs=False).at_shapes_of(shapes))


FILL = hs.HostExercise("a", NAME, "idx_mapping", 1, fill_speculator, reference_speculator)


@never_raises("a")
@keeps_answer("a")
def check_mapping(copy_idx_mapping) -> CheckResult:
    """(a) `copy_idx_mapping(idx_mapping, slots)` writes this step's row -> slot mapping in place.

    idx_mapping: the persistent int32 buffer [max_num_reqs] the padded graph reads; slots: int32
    [num_reqs], the slot of each live row. Takes the function, or a namespace such as ``globals()``.
    Solved, the result shows the PR's fix beside your code.
    """
    return hs.check_host_exercise(FILL, copy_idx_mapping, _SOLVED)
