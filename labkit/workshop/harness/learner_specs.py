"""The kit's speculators with the learner's host code in place of the kit's own.

    LearnerSpeculator(draft_model, config, fill=copy_idx_mapping, ...)        exercise (a)
    LearnerDFlashSpeculator(draft_model, config, sample_mapping=build_sample_mapping,
                            fill=None, ...)                                   exercise (c)

Both take every other :class:`~labkit.speculator.Speculator` argument (``sampler=`` plugs in a
learner's kernel: :mod:`labkit.workshop.exercises.capstone`). Each step they keep, per buffer the learner
wrote, its contents before and after the learner's function and what it returned
(``spec.seen[buffer]``), and refuse to launch when the learner left a value past the last slot.
"""

from __future__ import annotations

from typing import Callable

import torch

from labkit.config import DrafterConfig
from labkit.speculator import DFlashSpeculator, Speculator
from labkit.workshop.feedback import call_learner
from labkit.workshop.harness.host_steps import refuse_unsafe


def _run_learner(spec, name: str, buffer: torch.Tensor, fn: Callable, *args) -> None:
    before = buffer.cpu().clone()
    returned = call_learner(fn, *args)
    after = buffer.cpu().clone()
    spec.seen[name] = (before, after, returned)
    refuse_unsafe(after, spec.max_num_reqs)


class LearnerSpeculator(Speculator):
    """The autoregressive drafter; `fill(idx_mapping, slots)` writes the row -> slot mapping each step."""

    def __init__(self, draft_model, config: DrafterConfig, *, fill: Callable, **kwargs):
        self.fill = fill
        self.seen: dict[str, tuple] = {}
        super().__init__(draft_model, config, **kwargs)

    def copy_idx_mapping(self, slots: torch.Tensor) -> None:
        # The learner's fill in place of the kit's copy and fill; the buffer is as earlier steps
        # left it, and `slots` what the exercise promises (int32 slots on the buffer's device).
        _run_learner(self, "idx_mapping", self.idx_mapping, self.fill, self.idx_mapping, slots.clone())


class LearnerDFlashSpeculator(DFlashSpeculator):
    """The DFlash-style drafter; `sample_mapping(idx_mapping, num_reqs, k, sample_idx_mapping)` builds
    the per-sample-row mapping (the positions stay the kit's), and `fill`, if given, idx_mapping."""

    def __init__(self, draft_model, config: DrafterConfig, *, sample_mapping: Callable,
                 fill: Callable | None = None, **kwargs):
        self.sample_mapping, self.fill = sample_mapping, fill
        self.seen: dict[str, tuple] = {}
        super().__init__(draft_model, config, **kwargs)

    def copy_idx_mapping(self, slots: torch.Tensor) -> None:
        if self.fill is None:
            super().copy_idx_mapping(slots)
        else:
            _run_learner(self, "idx_mapping", self.idx_mapping, self.fill, self.idx_mapping, slots.clone())

    def _prepare_sample_rows(self, num_reqs: int) -> None:
        stale = self.sample_idx_mapping.clone()
        super()._prepare_sample_rows(num_reqs)  # the kit's sample positions
        self.sample_idx_mapping.copy_(stale)
        _run_learner(self, "sample_idx_mapping", self.sample_idx_mapping, self.sample_mapping,
                     self.idx_mapping, num_reqs, self.k, self.sample_idx_mapping)
