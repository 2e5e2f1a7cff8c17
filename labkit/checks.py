"""Errors the kit raises on purpose, and the input checks that raise them.

Each message says what is wrong and what to do, because most of them are met by learners
who are in the middle of changing a kernel.
"""

from __future__ import annotations

from typing import Iterable

import torch


class LabkitInputError(ValueError):
    """A caller passed something the kit cannot run correctly."""


class PaddedSlotOutOfBoundsError(RuntimeError):
    """A kernel without the `slot >= 0` mask was about to run on a row whose slot is -1."""


SIGNED_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)


def check_mapping_dtype(mapping: torch.Tensor, name: str = "idx_mapping") -> None:
    """Row -> slot mappings must be signed: -1 is the 'no request here' sentinel."""
    if mapping.dtype in SIGNED_INT_DTYPES:
        return
    if mapping.dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        bits = torch.iinfo(mapping.dtype).bits
        raise LabkitInputError(
            f"{name} has unsigned dtype {mapping.dtype}. The fix marks padded rows with -1 and "
            f"the kernel skips rows with slot < 0; in an unsigned {bits}-bit buffer -1 wraps to "
            f"{2**bits - 1}, so `slot >= 0` is always true and the store lands far out of bounds. "
            "Use a signed integer type (torch.int32 as vLLM does)."
        )
    raise LabkitInputError(
        f"{name} must be a signed integer tensor (torch.int32), got {mapping.dtype}: "
        "it holds request-state slot numbers, with -1 for padded rows"
    )


def check_same_device(**tensors: torch.Tensor) -> torch.device:
    """All tensors of one launch must live on one device; name the odd one out."""
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    distinct = set(devices.values())
    if len(distinct) > 1:
        listing = ", ".join(f"{name} on {dev}" for name, dev in devices.items())
        raise LabkitInputError(f"tensors of one launch are on different devices: {listing}")
    return next(iter(distinct))


def check_capture_sizes(sizes: Iterable[int]) -> list[int]:
    sizes = list(sizes)
    if not sizes:
        raise LabkitInputError("capture_sizes is empty: give at least one batch size, e.g. [1, 2, 4, 8]")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise LabkitInputError(f"capture sizes must be positive integers, got {s!r} in {sizes}")
    if sizes != sorted(set(sizes)):
        raise LabkitInputError(
            f"capture_sizes must be sorted ascending without repeats, got {sizes}; "
            f"did you mean {sorted(set(sizes))}?"
        )
    return sizes


def check_num_reqs(num_reqs: int, max_num_reqs: int) -> None:
    if num_reqs < 0:
        raise LabkitInputError(f"num_reqs must be >= 0, got {num_reqs}")
    if num_reqs > max_num_reqs:
        raise LabkitInputError(
            f"num_reqs={num_reqs} is above max_num_reqs={max_num_reqs}: the persistent buffers "
            "have one row per possible request; raise max_num_reqs or schedule fewer requests"
        )


def padded_slot_error(kernel: str, rows: list[int], slot: int = -1) -> PaddedSlotOutOfBoundsError:
    shown = ", ".join(str(r) for r in rows[:8]) + (" ..." if len(rows) > 8 else "")
    return PaddedSlotOutOfBoundsError(
        f"{kernel}: rows [{shown}] hold slot {slot} (padding), but the kernel was launched without "
        "the `slot >= 0` mask. It would read temperature[-1] and seeds[-1] and store to "
        "draft_logits[-1, ...]: an out-of-bounds access before the start of each buffer "
        "(another tensor's memory on a GPU, heap garbage or a crash on the CPU). Filling the "
        "padded rows with -1 is only half of the fix: also launch the masked kernel "
        "(mask loads with `other`, and store with `mask=in_vocab & (slot >= 0)`)."
    )
