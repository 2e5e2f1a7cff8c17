"""The drafter's sampling step written in plain torch, to compare the Triton kernel with.

Each sampler does the kernel's job: scale the rows by their slot's temperature, store them into
``q[slot, step]`` (the draft distribution), and draw one token per row from softmax(logits / T).

    hash_port_sample      the kit's own counter-based noise (labkit.kernels.noise), ported to torch:
                          the same tokens as the kernel, but the 32-bit hash runs in int64 (torch has
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


def _scale_and_store(logits, slots, temperature, q, step):
    slots = slots.long()
    scaled = logits / temperature[slots][:, None]
    q[slots, step] = scaled
    return slots, scaled


def hash_port_sample(logits, slots, temperature, seeds, positions, q, step, vocab_index):
    """The kit's noise in torch: every stage is its own kernel and its own pass over memory."""
    slots, scaled = _scale_and_store(logits, slots, temperature, q, step)
    key = row_key_torch(seeds[slots], positions, SALT_DRAFT)
    return (scaled + gumbel_torch(key[:, None], vocab_index[None, :])).argmax(dim=1)


def rand_gumbel_sample(logits, slots, temperature, q, step):
    """argmax(logits / T - log(-log(u))), u ~ U[0, 1) from torch.rand (u = 0 gives -inf: never drawn)."""
    _, scaled = _scale_and_store(logits, slots, temperature, q, step)
    u = torch.rand_like(scaled)
    return (scaled - torch.log(-torch.log(u))).argmax(dim=1)


def multinomial_sample(logits, slots, temperature, q, step):
    """One draw per row from softmax(logits / T) by torch.multinomial."""
    _, scaled = _scale_and_store(logits, slots, temperature, q, step)
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1).squeeze(1)


NATURAL_SAMPLERS = {"rand_gumbel": rand_gumbel_sample, "multinomial": multinomial_sample}
