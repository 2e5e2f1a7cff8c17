"""Two sibling bugs of PR #47066, computed with numbers (nothing here touches memory out of bounds).

1. An int32 offset overflow: a kernel computes ``index * stride`` in 32-bit integers. For big
   buffers the product passes 2**31 - 1 and wraps to a negative number, so the address lands
   before the buffer. In vLLM's second model runner this was the per-row logits offset
   ``row * vocab_size`` of the sampler and rejection kernels (vLLM #46560) and, in the
   block-verification kernels, the slot-indexed draft-logits offset ``slot * k * vocab`` (vLLM
   #47383). :func:`offset_rows` does the multiplication both ways, in torch int32 (which wraps
   exactly as the GPU's 32-bit multiply does) and in int64.

2. vLLM #54282, shared noise: the draft sampler and the residual resampling of the rejection
   sampler drew their Gumbel noise from the same vector. Each draw alone is a correct sample, but
   the two are correlated, and rejection sampling's guarantee needs the residual draw to be
   independent of the draft. :func:`speculative_outputs` runs one speculative step for many seeds
   with the kit's counter-based noise, with the residual keyed by its own salt (correct) or by the
   draft's salt (the bug), and returns the tokens it emits; :func:`shared_noise_effect` compares
   both ways' distributions with p (statistics from :mod:`labkit.proofs.stats`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.kernels.noise import SALT_ACCEPT, SALT_DRAFT, SALT_RESIDUAL, gumbel_torch, row_key_torch, uniform_torch
from labkit.proofs.stats import empirical, expected_tv, total_variation

INT32_MAX = 2**31 - 1


# -- 1. int32 offsets -----------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetRow:
    index: int
    stride: int
    exact: int  # index * stride, computed in int64
    int32: int  # the same product in int32 arithmetic (wraps modulo 2**32)

    @property
    def wrapped(self) -> bool:
        return self.exact != self.int32


def first_overflowing_index(stride: int) -> int:
    """The smallest index whose offset ``index * stride`` no longer fits in an int32."""
    return INT32_MAX // stride + 1


def offset_rows(indices, stride: int) -> list[OffsetRow]:
    """``index * stride`` exactly, and as a 32-bit multiply gives it (torch's int32 multiply wraps like the GPU's)."""
    idx = torch.tensor(list(indices), dtype=torch.int64)
    exact = idx * stride
    wrapped = idx.to(torch.int32) * torch.tensor(stride, dtype=torch.int32)
    return [OffsetRow(int(i), stride, int(e), int(w)) for i, e, w in zip(idx, exact, wrapped, strict=True)]


def format_offsets(rows: list[OffsetRow], element_bytes: int = 4) -> str:
    head = f"{'index':>7}  {'index * stride (int64)':>22}  {'same in int32':>14}  where the access lands"
    lines = [head]
    for r in rows:
        if not r.wrapped:
            where = "inside the buffer"
        elif r.int32 < 0:
            where = f"{-r.int32 * element_bytes / 2**30:.2f} GiB BEFORE the buffer's start"
        else:
            where = f"inside, but {(r.exact - r.int32) * element_bytes / 2**30:.0f} GiB short of the right row"
        lines.append(f"{r.index:>7}  {r.exact:>22,}  {r.int32:>14,}  {where}")
    return "\n".join(lines)


# -- 2. shared noise ------------------------------------------------------------------------------

def speculative_outputs(p: torch.Tensor, q: torch.Tensor, num_seeds: int, *, shared_noise: bool,
                        seed_base: int = 1_000_000, position: int = 0) -> torch.Tensor:
    """The token one speculative step emits first, for `num_seeds` independent requests.

    Draft x ~ q by Gumbel-max with the draft's noise; accept with probability min(1, p(x)/q(x));
    otherwise emit argmax(log residual + noise), residual = norm(max(0, p - q)). With
    ``shared_noise=True`` the residual reuses the draft's noise vector (salt SALT_DRAFT) instead of
    its own (SALT_RESIDUAL). Correct sampling emits tokens distributed exactly as p.
    """
    p = p.to(torch.float64)
    q = q.to(torch.float64)
    vocab = torch.arange(p.numel())
    seeds = torch.arange(num_seeds, dtype=torch.int64) + seed_base
    pos = torch.full_like(seeds, position)
    g_draft = gumbel_torch(row_key_torch(seeds, pos, SALT_DRAFT)[:, None], vocab[None, :]).to(torch.float64)
    x = (q.log()[None, :] + g_draft).argmax(dim=1)
    u = uniform_torch(row_key_torch(seeds, pos, SALT_ACCEPT), torch.zeros((), dtype=torch.int64)).to(torch.float64)
    accept = u * q[x] < p[x]
    salt = SALT_DRAFT if shared_noise else SALT_RESIDUAL
    g_res = gumbel_torch(row_key_torch(seeds, pos, salt)[:, None], vocab[None, :]).to(torch.float64)
    residual = (p - q).clamp(min=0.0)
    scores = torch.where(residual > 0, residual.clamp(min=1e-300).log(), float("-inf"))[None, :] + g_res
    y = scores.argmax(dim=1)
    return torch.where(accept, x, y)


@dataclass(frozen=True)
class NoiseEffect:
    """What shared noise does to the emitted distribution, next to the correct sampler's."""

    p: torch.Tensor  # the target distribution
    own_salt: torch.Tensor  # empirical distribution with the residual's own noise (correct)
    shared: torch.Tensor  # empirical distribution with the draft's noise reused (the bug)
    num_seeds: int

    @property
    def tv_own_salt(self) -> float:
        return total_variation(self.own_salt, self.p)

    @property
    def tv_shared(self) -> float:
        return total_variation(self.shared, self.p)

    @property
    def sampling_noise(self) -> float:
        """The TV an exact sampler shows at this many seeds (its expected value)."""
        return expected_tv(self.p, self.num_seeds)


def shared_noise_effect(p: torch.Tensor, q: torch.Tensor, num_seeds: int, **kwargs) -> NoiseEffect:
    """:func:`speculative_outputs` both ways for `num_seeds` requests, as empirical distributions."""
    vocab = p.numel()
    own = empirical(speculative_outputs(p, q, num_seeds, shared_noise=False, **kwargs), vocab)
    shared = empirical(speculative_outputs(p, q, num_seeds, shared_noise=True, **kwargs), vocab)
    return NoiseEffect(p.to(torch.float64), own, shared, num_seeds)
