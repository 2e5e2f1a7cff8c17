"""The drafter's sampling step written in plain torch, to compare the Triton kernel with.

Each sampler takes the logits and the kernel's :class:`~labkit.kernels.sampling_state.SamplingState`
and does the kernel's job: scale the rows by their slot's temperature, store them into
``q[slot, step]`` (the draft distribution), and draw one token per row from softmax(logits / T).

    hash_port_sample      the kit's own counter-based noise (labkit.kernels.noise), ported to torch:
                          the same tokens as the kernel, but the 32-bit hash runs in wider integers (torch has
                          no unsigned 32-bit multiply), so it is several passes over memory
    rand_gumbel_sample    what one would write in torch: Gumbel noise from ``torch.rand``
    multinomial_sample    ``torch.multinomial`` over ``torch.softmax``

The last two draw from the same distribution as the kernel, not the same tokens. The honest
speed comparison is against them (section ``torch_natural``); the hash port is what the
``kernel`` section calls "torch".
"""

from __future__ import annotations

import torch

from labkit.kernels.noise import SALT_DRAFT, gumbel_torch, row_key_torch
from labkit.kernels.sampling_state import SamplingState


def _scale_and_store(logits, state: SamplingState, step):
    slots = state.idx_mapping[: logits.shape[0]].long()
    scaled = logits / state.temperature[slots][:, None]
    state.draft_logits[slots, step] = scaled
    return slots, scaled


def hash_port_sample(logits, state: SamplingState, *, draft_step: int, vocab_index: torch.Tensor):
    """The kit's noise in torch: every stage is its own kernel and its own pass over memory."""
    return hash_port_tensors(logits, state.idx_mapping, state.temperature, state.seeds, state.positions,
                             state.draft_logits, draft_step, vocab_index)


def hash_port_tensors(logits, idx_mapping, temperature, seeds, positions, q, step, vocab_index):
    """:func:`hash_port_sample` on plain tensors: the form torch.compile traces (dynamic shapes)."""
    state = SamplingState(idx_mapping, temperature, seeds, positions, q)
    slots, scaled = _scale_and_store(logits, state, step)
    key = row_key_torch(seeds[slots], positions[: logits.shape[0]], SALT_DRAFT)
    return (scaled + gumbel_torch(key[:, None], vocab_index[None, :])).argmax(dim=1)


def rand_gumbel_sample(logits, state: SamplingState, *, draft_step: int):
    """argmax(logits / T - log(-log(u))), u ~ U[0, 1) from torch.rand (u = 0 gives -inf: never drawn)."""
    _, scaled = _scale_and_store(logits, state, draft_step)
    u = torch.rand_like(scaled)
    return (scaled - torch.log(-torch.log(u))).argmax(dim=1)


def multinomial_sample(logits, state: SamplingState, *, draft_step: int):
    """One draw per row from softmax(logits / T) by torch.multinomial."""
    _, scaled = _scale_and_store(logits, state, draft_step)
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1).squeeze(1)


NATURAL_SAMPLERS = {"rand_gumbel": rand_gumbel_sample, "multinomial": multinomial_sample}
