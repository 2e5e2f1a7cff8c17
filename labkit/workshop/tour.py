"""The kernel launches notebook 00 makes by hand, and what they take.

    SamplingState      what a launch reads by row (the mapping, the positions) and by slot
    WriteTrace         which row stored into each slot last
    gumbel_sample      one launch of the kit's Gumbel sampling kernel
    trace_launch       the same launch with its write trace, as an ownership table

Each launches the kit's kernel as the engine does, and takes only what notebook 00 passes.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from labkit.kernels.gumbel import WriteTrace
from labkit.kernels.gumbel import gumbel_sample as _kit_gumbel_sample
from labkit.kernels.sampling_state import SamplingState
from labkit.proofs.ownership import trace_launch as _kit_trace_launch

__all__ = ["SamplingState", "WriteTrace", "gumbel_sample", "trace_launch"]


def gumbel_sample(logits: torch.Tensor, state: SamplingState, *, trace: WriteTrace | None = None) -> torch.Tensor:
    """One launch of the kit's Gumbel sampling kernel: each row samples one token from its own logits
    and stores its temperature-scaled logits (its q) into ``state.draft_logits[slot, 0]``, where
    ``slot = state.idx_mapping[row]``. Returns the tokens, one per row.

    logits: [rows, V]; state: what the launch reads by row (the mapping, the positions) and by slot
    (temperature, seeds, q). `trace`, if given, records which row stored into each slot last.
    """
    return _kit_gumbel_sample(logits, state, trace=trace)


def trace_launch(logits: torch.Tensor, state: SamplingState, *, live_slots: Sequence[int]):
    """One launch of the kit's Gumbel sampling kernel with its write trace on; returns (the ownership
    table of that launch, the tokens, the q it stored). `live_slots`: the slots live requests own in
    this step; the table marks a store by any other row into one of them."""
    return _kit_trace_launch(logits, state, live_slots=live_slots)
