"""What a sampling launch reads besides the logits, and where it stores q: one object, by name.

The Gumbel sampling kernel reads two kinds of buffer, and the bug lives in the difference:

    idx_mapping    [>= num_rows] signed int   by row:  the row's request-state slot
    temperature    float32 [max_num_reqs]     by slot
    seeds          int64   [max_num_reqs]     by slot
    positions      [>= num_rows] int32/int64  by row:  the position of the token being drafted
    draft_logits   float32 [max_num_reqs, k, V] by slot: q, written by the launch (None: no q kept)

A :class:`SamplingState` names them, so that a launch reads ``gumbel_sample(logits, state, ...)``
and no function passes five tensors by position. The logits stay a separate argument: they are
the step's fresh input, the rest is the drafter's persistent state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class SamplingState:
    """The row-indexed and slot-indexed buffers one sampling launch reads (and q, which it writes)."""

    idx_mapping: torch.Tensor
    temperature: torch.Tensor
    seeds: torch.Tensor
    positions: torch.Tensor
    draft_logits: torch.Tensor | None = None

    def packed(self) -> "SamplingState":
        """The same state with the read-only 1-D buffers packed (unit stride, as the kernel reads them).

        They are only read, so a packed copy is the same input (under graph capture the copy is
        captured too, so a replay copies afresh). q is written in place, so it is never copied.
        """
        return replace(self, idx_mapping=self.idx_mapping.contiguous(), temperature=self.temperature.contiguous(),
                       seeds=self.seeds.contiguous(), positions=self.positions.contiguous())

    def with_q(self, draft_logits: torch.Tensor | None) -> "SamplingState":
        """The same inputs storing q into `draft_logits` instead."""
        return replace(self, draft_logits=draft_logits)
