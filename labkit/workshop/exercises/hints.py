"""Hints for the exercises of notebook 07: each gives more away than the one before; only the last one
shows the fix.

    hint("a")        the first hint of exercise (a)
    hint("b", 3)     the third (last) hint of (b): the fix

The hints are reached through :func:`hint` alone: the table is private, so that no learner meets
the last hint of an exercise by tab-completing a name.

Exercises (b) and (d) have a torch version for machines without Triton; ``hint("b")`` picks the
version this session runs (``hint("b-torch")`` or ``hint("b-triton")`` choose one).
"""

from __future__ import annotations

from labkit.workshop.feedback import Text
from labkit.workshop.harness.launches import triton_kernels_run

_HINTS: dict[str, list[str]] = {
    "a": [
        "Which rows does the padded graph process, and what do rows num_reqs and above hold when nobody "
        "writes them this step?",
        "Slot numbers are 0 .. max_num_reqs - 1, so every non-negative value in the buffer is somebody's slot. "
        "The buffer is signed on purpose: which value can no request own?",
        "Two lines, both in place: `idx_mapping[:num_reqs] = slots` and `idx_mapping[num_reqs:] = -1`.",
    ],
    "b-triton": [
        "Find every tl.load and tl.store whose address uses `slot`. Which of them run for a padded row, and "
        "which address do they touch when slot is -1?",
        "A padded row's token and q are thrown away, so it may compute anything, as long as it touches no "
        "memory through slot -1: no load of temperature or seeds there, no store into q.",
        "`is_valid = slot >= 0`; load with `mask=is_valid, other=0` (any `other` works), and store with "
        "`mask=in_vocab & ((offs * 0 + slot) >= 0)` (the scalar broadcast first, which every Triton accepts). "
        "Putting the whole body under `if slot >= 0:` works too.",
    ],
    "b-torch": [
        "Find every place that indexes temperature, seeds or q with `slot`. Which of them run for a padded "
        "row, and what do they touch when slot is -1? (These buffers index like pointers: -1 is the memory "
        "just before them.)",
        "A padded row's token and q are thrown away, so it may compute anything, as long as it touches no "
        "memory through slot -1.",
        "Skip the padded rows before any access: `if slot < 0: continue` at the top of the loop (or index "
        "with `idx_mapping.clamp(min=0)` and select with `torch.where(idx_mapping >= 0, ..., 0.0)`, storing "
        "only the rows with slot >= 0).",
    ],
    "c": [
        "0 looks like a harmless index. Harmless for whom? The sampling kernel stores q *by slot*.",
        "The masked kernel skips exactly the sample rows whose slot is negative.",
        "`sample_idx_mapping[num_reqs * k:] = -1`.",
    ],
    "d-triton": [
        "slot is int32 (loaded from the int32 mapping) and so is stride_slot: what is the type of their product?",
        "slot * stride_slot passes 2**31 - 1 once slot > 2**31 // stride_slot: 3533 for k = 4 and V = 151936. "
        "Casting the finished sum is too late: the product has wrapped by then.",
        "Widen before multiplying: `slot.to(tl.int64) * stride_slot + step * stride_step`.",
    ],
    "d-torch": [
        "slot is an int32 tensor and stride_slot a Python int: torch keeps the product int32. What happens past "
        "2**31 - 1?",
        "slot * stride_slot passes 2**31 - 1 once slot > 2**31 // stride_slot: 3533 for k = 4 and V = 151936. "
        "Casting the finished sum is too late: the product has wrapped by then.",
        "Widen before multiplying: `slot.to(torch.int64) * stride_slot + step * stride_step`.",
    ],
}
EXERCISES = ("a", "b", "c", "d")


class Hint(Text):
    """One hint; shows as its text."""


def _key(exercise) -> str | None:
    key = str(exercise).strip().strip("()").lower()
    if key in ("b", "d"):
        key += "-triton" if triton_kernels_run() else "-torch"
    return key if key in _HINTS else None


def hint(exercise, n: int = 1) -> Hint:
    """Hint number `n` (1, 2, 3: each gives more away; the last is the fix) for 'a', 'b', 'c' or 'd'."""
    key = _key(exercise)
    if key is None:
        return Hint(f"There is no exercise {exercise!r}; choose one of {', '.join(EXERCISES)}.")
    hints = _HINTS[key]
    if not isinstance(n, int) or not 1 <= n <= len(hints):
        return Hint(f"Exercise ({key[0]}) has hints 1 to {len(hints)}.")
    last = " (the fix)" if n == len(hints) else ""
    version = {"-torch": ", torch version", "-triton": ", Triton version"}.get(key[1:], "")
    return Hint(f"Hint {n}/{len(hints)}{last} for ({key[0]}{version}): {hints[n - 1]}")
