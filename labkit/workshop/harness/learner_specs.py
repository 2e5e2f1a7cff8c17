"""The kit's speculators with the learner's host code in place of the kit's own.

    LearnerSpeculator(draft_model, config, copy_idx_mapping=fn, ...)         exercise (a)
    LearnerDFlashSpeculator(draft_model, config, sample_mapping=build_sample_mapping,
                            copy_idx_mapping=None, ...)                       exercise (c)

Both take every other :class:`~labkit.speculator.Speculator` argument (``sampler=`` plugs in a
learner's kernel: :mod:`labkit.workshop.exercises.capstone`). Each step they keep, per buffer the learner
wrote, its contents before and after the learner's function and what it returned
(``spec.seen[buffer]``) with the call's arguments (``spec.calls[buffer]``),
and refuse to launch when the learner left a value past the last slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from labkit.config import DrafterConfig
from labkit.speculator import DFlashSpeculator, Speculator
from labkit.workshop.feedback import call_learner
from labkit.workshop.harness.host_steps import refuse_unsafe


def _run_learner(spec, name: str, buffer: torch.Tensor, fn: Callable, *args) -> None:
    before = buffer.cpu().clone()
    # The call itself, on CPU copies, so that a checker can call the learner's function again on a
    # probe: which rows it writes, whatever value they held.
    inputs = [a.cpu().clone() if isinstance(a, torch.Tensor) else a for a in args]
    returned = call_learner(fn, *args)
    after = buffer.cpu().clone()
    spec.seen[name] = (before, after, returned)
    spec.calls[name] = LearnerCall(inputs, next(i for i, a in enumerate(args) if a is buffer))
    refuse_unsafe(after, spec.max_num_reqs)


@dataclass(frozen=True)
class LearnerCall:
    """The arguments one call of the learner's function got (CPU copies, as they were before it ran),
    and which of them is the buffer it writes."""

    inputs: list
    buffer_at: int


class LearnerSpeculator(Speculator):
    """The autoregressive drafter; `copy_idx_mapping(idx_mapping, slots)`, the learner's function, writes
    the row -> slot mapping each step."""

    def __init__(self, draft_model, config: DrafterConfig, *, copy_idx_mapping: Callable, **kwargs):
        self.learner_copy = copy_idx_mapping
        self.seen: dict[str, tuple] = {}
        self.calls: dict[str, LearnerCall] = {}
        super().__init__(draft_model, config, **kwargs)

    def copy_idx_mapping(self, slots: torch.Tensor) -> None:
        # The learner's function in place of the kit's; the buffer is as earlier steps
        # left it, and `slots` what the exercise promises (int32 slots on the buffer's device).
        _run_learner(self, "idx_mapping", self.idx_mapping, self.learner_copy, self.idx_mapping, slots.clone())


class LearnerDFlashSpeculator(DFlashSpeculator):
    """The DFlash-style drafter; `sample_mapping(idx_mapping, num_reqs, k, sample_idx_mapping)` builds
    the per-sample-row mapping (the positions stay the kit's), and `copy_idx_mapping`, if given, the
    row -> slot mapping."""

    def __init__(self, draft_model, config: DrafterConfig, *, sample_mapping: Callable,
                 copy_idx_mapping: Callable | None = None, **kwargs):
        self.sample_mapping, self.learner_copy = sample_mapping, copy_idx_mapping
        self.seen: dict[str, tuple] = {}
        self.calls: dict[str, LearnerCall] = {}
        super().__init__(draft_model, config, **kwargs)

    def copy_idx_mapping(self, slots: torch.Tensor) -> None:
        if self.learner_copy is None:
            super().copy_idx_mapping(slots)
        else:
            _run_learner(self, "idx_mapping", self.idx_mapping, self.learner_copy, self.idx_mapping, slots.clone())

    def _prepare_sample_rows(self, num_reqs: int) -> None:
        stale = self.sample_idx_mapping.clone()
        super()._prepare_sample_rows(num_reqs)  # the kit's sample positions
        self.sample_idx_mapping.copy_(stale)
        _run_learner(self, "sample_idx_mapping", self.sample_idx_mapping, self.sample_mapping,
                     self.idx_mapping, num_reqs, self.k, self.sample_idx_mapping)
