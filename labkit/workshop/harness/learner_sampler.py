"""A learner's sampling kernel (exercise (b)) behind :func:`~labkit.kernels.gumbel.gumbel_sample`'s signature,
so that ``Speculator(..., sampler=LearnerSampler(kernel))`` drafts with it.

The exercise's kernel is simpler than the kit's: one program per row, one block for the whole
vocabulary, q stored at ``q_ptr + slot * vocab_size`` (one draft step per launch). The adapter
bridges the difference without changing what the kernel does:

* q: each launch gets a [max_num_reqs, V] copy of ``draft_logits[:, step]`` and its result is
  copied back, so every store the kernel makes (and only those) lands in the speculator's q;
* DFlash-style sampling (``samples_per_req = k``): one launch per draft step j, over the sample
  rows ``j, j + k, ...``;
* a write trace (``record=True``): the rows run one launch each, in row order (the interpreter's
  order), each into a scratch q that holds a marker value; a slot whose row of q changed was
  stored by that row. On a GPU one launch would race instead; the trace shows the in-order result.
"""

from __future__ import annotations

import torch

from labkit.kernels.noise import SALT_DRAFT
from labkit.kernels.sampling_state import SamplingState

_SENTINEL = -3.0e38  # no stored value (scaled logits of the toy models) comes near it


class LearnerSampler:
    """``sampler(logits, state, *, draft_step, samples_per_req, trace, ...)`` (`state` a
    :class:`~labkit.kernels.sampling_state.SamplingState`) that runs a learner's kernel ('triton')
    or torch function ('torch')."""

    def __init__(self, fn, variant: str):
        self.fn, self.variant = fn, variant

    def __call__(self, logits, state: SamplingState, *, draft_step=0, samples_per_req=1, trace=None, **_switches):
        # `masked` and the kit's tuning switches do not apply: the learner's kernel is what it is.
        idx_mapping, temperature, seeds, positions, draft_logits = (
            state.idx_mapping, state.temperature, state.seeds, state.positions, state.draft_logits)
        num_rows = logits.shape[0]
        tokens = torch.empty(num_rows, dtype=torch.int64, device=logits.device)
        for j in range(samples_per_req):
            rows = slice(j, None, samples_per_req)
            q_view = draft_logits[:, draft_step + j]
            scratch = q_view.contiguous()
            args = (logits[rows].contiguous(), idx_mapping[:num_rows][rows].contiguous(), temperature, seeds,
                    positions[:num_rows][rows].contiguous())
            if trace is None:
                tokens[rows] = self._launch(*args, scratch)
            else:
                tokens[rows] = self._launch_traced(*args, scratch, trace, draft_step + j, j, samples_per_req)
            q_view.copy_(scratch)
        # A padded row's token is thrown away, and the exercise lets the kernel write none (an
        # early exit) or any value; but the drafter embeds it in the row's next draft step, which
        # must not index outside the vocabulary. Live rows' tokens were checked by exercise (b).
        vocab = logits.shape[1]
        return torch.where((tokens >= 0) & (tokens < vocab), tokens, 0)

    def _launch(self, logits, mapping, temperature, seeds, positions, q) -> torch.Tensor:
        if self.variant == "torch":
            return torch.as_tensor(self.fn(logits, mapping, temperature, seeds, positions, q, SALT_DRAFT)).to(
                device=logits.device, dtype=torch.int64).reshape(-1)
        tokens = torch.zeros(logits.shape[0], dtype=torch.int64, device=logits.device)
        vocab = logits.shape[1]
        block = 1 << max(0, (vocab - 1).bit_length())
        self.fn[(logits.shape[0],)](logits, mapping, temperature, seeds, positions, q, tokens, vocab, SALT_DRAFT,
                                    BLOCK_V=block)
        return tokens

    def _launch_traced(self, logits, mapping, temperature, seeds, positions, q, trace, step, j, spr):
        tokens = torch.zeros(logits.shape[0], dtype=torch.int64, device=logits.device)
        for i in range(logits.shape[0]):
            alone = torch.full_like(q, _SENTINEL)
            tokens[i: i + 1] = self._launch(logits[i: i + 1], mapping[i: i + 1], temperature, seeds,
                                            positions[i: i + 1], alone)
            stored = alone != _SENTINEL
            q.copy_(torch.where(stored, alone, q))
            hit = stored.any(dim=1)
            trace.writer[:, step] = torch.where(hit, i * spr + j, trace.writer[:, step])
            trace.writes[:, step] += hit.to(trace.writes.dtype)
        return tokens
