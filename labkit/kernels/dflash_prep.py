"""Input preparation of a DFlash-style drafter: one sample row per (request, draft step).

A DFlash-style drafter proposes all k draft tokens of a request in one forward pass, so the
sampling kernel runs over `num_reqs_padded * k` sample rows, and needs a per-sample-row mapping:

    sample_idx_mapping[r] = slot of request r // k       (r < num_reqs * k)
    sample_pos[r]         = position of request r // k + r % k

This kernel builds both for the live part and fills the rest of the persistent buffers with a pad.
Which pad, and why the one before PR #47066 was wrong, is exercise (c) of notebook 07: notebook 03
and docs/MECHANICS.md explain it after the exercises.

Upstream this is the sample-mapping part of ``_prepare_dflash_inputs_kernel`` in
``vllm/v1/worker/gpu/spec_decode/dflash/speculator.py``; docs/VLLM_MAP.md compares the two.
"""
# (Kept out of the docstring, which `?` shows before the exercises.) Before PR #47066 the pad for
# `sample_idx_mapping` was 0, meant as "a harmless valid index": but to a slot-indexed store, 0 is
# request slot 0, so every padded sample row overwrote slot 0's q. After the fix the pad is -1,
# which the masked sampling kernel skips.

from __future__ import annotations

import torch

from labkit.checks import check_backend, check_int, check_mapping_dtype, check_same_device, check_tensor, check_writable
from labkit.config import FixSwitches, dflash_pad
from labkit.errors import LabkitInputError
from labkit.kernels.triton_import import tl, triton


@triton.jit
def dflash_prepare_kernel(
    mapping_ptr,  # [num_reqs] int: live row -> slot
    pos_ptr,  # [num_reqs] int: next position of each live row
    out_mapping_ptr, out_mapping_stride,  # [total] int: sample row -> slot (written in place)
    out_pos_ptr, out_pos_stride,  # [total] int: sample row -> position (written in place)
    num_reqs, total, pad_value,
    K: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_range = offs < total
    req = offs // K
    live = offs < num_reqs * K
    slot = tl.load(mapping_ptr + req, mask=live, other=0)
    pos = tl.load(pos_ptr + req, mask=live, other=0)
    # The outputs are persistent buffers the caller may hand over as strided views.
    offs64 = offs.to(tl.int64)
    tl.store(out_mapping_ptr + offs64 * out_mapping_stride, tl.where(live, slot, pad_value), mask=in_range)
    tl.store(out_pos_ptr + offs64 * out_pos_stride, tl.where(live, pos + offs % K, 0), mask=in_range)


INT_DTYPES = (torch.int32, torch.int64)


def _validate(idx_mapping, positions, sample_idx_mapping, sample_pos, num_reqs, k, pad_value):
    for name, t in (("idx_mapping", idx_mapping), ("sample_idx_mapping", sample_idx_mapping)):
        check_tensor(name, t, dim=1, what=": one slot per row")
        check_mapping_dtype(t, name)
    check_tensor("positions", positions, dim=1, dtypes=INT_DTYPES, what=" [num_reqs]")
    check_tensor("sample_pos", sample_pos, dim=1, dtypes=INT_DTYPES, what=" [max_num_reqs * k]")
    check_same_device(idx_mapping=idx_mapping, positions=positions,
                      sample_idx_mapping=sample_idx_mapping, sample_pos=sample_pos)
    check_writable("sample_idx_mapping", sample_idx_mapping)
    check_writable("sample_pos", sample_pos)
    k = check_int("k", k, low=1)
    if sample_idx_mapping.numel() != sample_pos.numel():
        raise LabkitInputError("sample_idx_mapping and sample_pos must have the same length (max_num_reqs * k)")
    capacity = sample_idx_mapping.numel() // k
    num_reqs = check_int("num_reqs", num_reqs, low=0)
    if num_reqs > capacity:
        raise LabkitInputError(
            f"num_reqs={num_reqs} requests x k={k} = {num_reqs * k} sample rows do not "
            f"fit sample_idx_mapping of {sample_idx_mapping.numel()} rows (room for {capacity} requests)"
        )
    if idx_mapping.numel() < num_reqs or positions.numel() < num_reqs:
        raise LabkitInputError(f"idx_mapping and positions need at least num_reqs={num_reqs} entries, got "
                               f"{idx_mapping.numel()} and {positions.numel()}")
    pad_value = check_int("pad_value", pad_value)
    info = torch.iinfo(sample_idx_mapping.dtype)
    if not info.min <= pad_value <= info.max:
        raise LabkitInputError(
            f"pad_value={pad_value} does not fit sample_idx_mapping's {sample_idx_mapping.dtype} (it would be "
            f"truncated, e.g. 2**40 to 0 -- slot 0, the bug this pad exists to avoid)"
        )
    if not -1 <= pad_value < capacity:
        raise LabkitInputError(
            f"pad_value must be -1 (no request: the fix) or a slot in [0, {capacity}) (a stale slot: "
            f"before the fix), got {pad_value}"
        )


def _default_pad() -> int:
    return dflash_pad(FixSwitches())


def prepare_dflash_sample_mapping(
    idx_mapping: torch.Tensor,
    positions: torch.Tensor,
    sample_idx_mapping: torch.Tensor,
    sample_pos: torch.Tensor,
    *,
    num_reqs: int,
    k: int,
    pad_value: int | None = None,
    backend: str | None = None,
) -> None:
    """Fill the persistent sample buffers in place (live part from the batch, the rest `pad_value`).

    idx_mapping and positions: [>= num_reqs], read. sample_idx_mapping and sample_pos:
    [max_num_reqs * k], written (any strides whose elements do not overlap). `pad_value` None: the
    pad of the kit's default configuration (:func:`labkit.config.dflash_pad` of ``FixSwitches()``).
    """
    which = check_backend(backend)
    pad_value = _default_pad() if pad_value is None else pad_value
    _validate(idx_mapping, positions, sample_idx_mapping, sample_pos, num_reqs, k, pad_value)
    if which == "torch":
        prepare_dflash_sample_mapping_torch(idx_mapping, positions, sample_idx_mapping, sample_pos,
                                            num_reqs=num_reqs, k=k, pad_value=pad_value)
        return
    total = sample_idx_mapping.numel()
    if total == 0:
        return
    block = 256
    # The inputs are only read: a packed copy is the same input.
    dflash_prepare_kernel[(triton.cdiv(total, block),)](
        idx_mapping.contiguous(), positions.contiguous(),
        sample_idx_mapping, sample_idx_mapping.stride(0), sample_pos, sample_pos.stride(0),
        num_reqs, total, pad_value, K=k, BLOCK=block,
    )


def prepare_dflash_sample_mapping_torch(idx_mapping, positions, sample_idx_mapping, sample_pos, *,
                                        num_reqs, k, pad_value=None) -> None:
    """The sample mapping and positions in torch, the kernel's semantics: live rows, then the pad.

    pad_value: what padded sample rows get as their slot, before or after PR #47066
    (:func:`labkit.config.dflash_pad`; None: the kit's default configuration's)."""
    pad_value = _default_pad() if pad_value is None else pad_value
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    step = torch.arange(k, device=positions.device).repeat(num_reqs)
    sample_pos[:live] = positions[:num_reqs].repeat_interleave(k) + step
    sample_idx_mapping[live:] = pad_value
    sample_pos[live:] = 0
