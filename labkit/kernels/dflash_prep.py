"""Input preparation of a DFlash-style drafter: one sample row per (request, draft step).

A DFlash-style drafter proposes all k draft tokens of a request in one forward pass, so the
sampling kernel runs over `num_reqs_padded * k` sample rows, and needs a per-sample-row mapping:

    sample_idx_mapping[r] = slot of request r // k       (r < num_reqs * k)
    sample_pos[r]         = position of request r // k + r % k

This kernel builds both for the live part and fills the rest of the persistent buffers with a pad.
Before PR #47066 the pad for `sample_idx_mapping` was 0, meant as "a harmless valid index": but to
a slot-indexed store, 0 is request slot 0, so every padded sample row overwrote slot 0's q. After
the fix the pad is -1, which the masked sampling kernel skips.
"""

from __future__ import annotations

import torch

from labkit import backends as _backend
from labkit.checks import LabkitInputError, check_mapping_dtype, check_same_device

if _backend.HAS_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def dflash_prepare_kernel(
        mapping_ptr,  # [num_reqs] int32: live row -> slot
        pos_ptr,  # [num_reqs] int64: next position of each live row
        out_mapping_ptr,  # [total] int32: sample row -> slot
        out_pos_ptr,  # [total] int64: sample row -> position
        num_reqs, total, pad_value,
        NUM_STEPS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        in_range = offs < total
        req = offs // NUM_STEPS
        live = offs < num_reqs * NUM_STEPS
        slot = tl.load(mapping_ptr + req, mask=live, other=0)
        pos = tl.load(pos_ptr + req, mask=live, other=0)
        tl.store(out_mapping_ptr + offs, tl.where(live, slot, pad_value), mask=in_range)
        tl.store(out_pos_ptr + offs, tl.where(live, pos + offs % NUM_STEPS, 0), mask=in_range)


def _validate(idx_mapping, positions, num_reqs, num_steps, sample_idx_mapping, sample_pos, pad_value):
    check_mapping_dtype(idx_mapping)
    check_mapping_dtype(sample_idx_mapping, "sample_idx_mapping")
    check_same_device(idx_mapping=idx_mapping, positions=positions,
                      sample_idx_mapping=sample_idx_mapping, sample_pos=sample_pos)
    if num_steps < 1:
        raise LabkitInputError(f"num_steps must be >= 1, got {num_steps}")
    if sample_idx_mapping.numel() != sample_pos.numel():
        raise LabkitInputError("sample_idx_mapping and sample_pos must have the same length")
    if num_reqs * num_steps > sample_idx_mapping.numel():
        raise LabkitInputError(
            f"{num_reqs} requests x {num_steps} steps = {num_reqs * num_steps} sample rows do not fit "
            f"sample_idx_mapping of {sample_idx_mapping.numel()} rows (max_num_reqs * k)"
        )
    if idx_mapping.numel() < num_reqs or positions.numel() < num_reqs:
        raise LabkitInputError(f"idx_mapping and positions need at least num_reqs={num_reqs} entries")
    if pad_value < -1:
        raise LabkitInputError(f"pad_value must be -1 (no request) or a slot, got {pad_value}")


def prepare_dflash_sample_mapping(
    idx_mapping: torch.Tensor,
    positions: torch.Tensor,
    sample_idx_mapping: torch.Tensor,
    sample_pos: torch.Tensor,
    *,
    num_reqs: int,
    num_steps: int,
    pad_value: int = -1,
    backend: str | None = None,
) -> None:
    """Fill the persistent sample buffers in place (live part from the batch, the rest `pad_value`)."""
    _validate(idx_mapping, positions, num_reqs, num_steps, sample_idx_mapping, sample_pos, pad_value)
    if (backend or _backend.backend()) == "torch":
        prepare_dflash_sample_mapping_torch(idx_mapping, positions, sample_idx_mapping, sample_pos,
                                            num_reqs=num_reqs, num_steps=num_steps, pad_value=pad_value)
        return
    total = sample_idx_mapping.numel()
    block = 256
    dflash_prepare_kernel[(triton.cdiv(total, block),)](
        idx_mapping, positions, sample_idx_mapping, sample_pos,
        num_reqs, total, pad_value, NUM_STEPS=num_steps, BLOCK=block,
    )


def prepare_dflash_sample_mapping_torch(idx_mapping, positions, sample_idx_mapping, sample_pos, *,
                                        num_reqs, num_steps, pad_value=-1) -> None:
    live = num_reqs * num_steps
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(num_steps)
    step = torch.arange(num_steps, device=positions.device).repeat(num_reqs)
    sample_pos[:live] = positions[:num_reqs].repeat_interleave(num_steps) + step
    sample_idx_mapping[live:] = pad_value
    sample_pos[live:] = 0
