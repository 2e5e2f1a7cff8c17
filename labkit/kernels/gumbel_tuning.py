"""How the sampling kernel is launched: block size, warps, fast math, and where blocks are reduced.

None of this changes which token a row samples (except at float-rounding ties, for the fast-math
levels): it is what makes :func:`labkit.kernels.gumbel.gumbel_sample_kernel` fast on a GPU, kept
out of the kernel's file so that the kernel reads as the lesson. In the interpreter the kernel
keeps its teaching configuration: blocks of 1024 and exact libdevice math.

The reductions live here too: within a block (:func:`block_argmax`, NaN and the vocabulary's end
handled off the per-element path) and over a row's blocks (the single pass: a packed atomic max per
program and one small launch after, instead of torch's argmax and gather). The same tokens either way.
"""

from __future__ import annotations

import torch

from labkit import backends as _backend
from labkit.checks import check_int, check_power_of_two, resolved_device
from labkit.errors import LabkitInputError
from labkit.kernels.triton_import import tl, triton

DEFAULT_BLOCK_V = 1024
MIN_BLOCK_V, MAX_BLOCK_V = 16, 65536  # the block sizes a caller may ask for (powers of two)

# On a GPU the kernel is bound by its per-element arithmetic (a 32-bit hash and two logs) as much
# as by memory: each program's loads, arithmetic and stores must overlap with other programs'. Blocks
# of 1024 with 2 warps (16 elements per thread, small programs that pack many to an SM) did that best
# in the issue-17 measurements on an H200, against 2048 with 4 warps and the earlier 4096 with 8,
# for the kernel alone and for the whole call; the ``sweep`` section of labkit/data/gpu/h200.json
# (labkit/gpu/kernel.py, bench_sweep) records every block size and warp count, with the whole call
# in one and in two passes.
GPU_BLOCK_V = 1024
GPU_NUM_WARPS = 2
# The fast-math level of compiled kernels (levels: labkit/kernels/fast_math.py; the interpreter
# always runs level 0).
GPU_FAST_MATH = 2
# The reduction over a row's blocks, compiled: folded in by each program (True: a packed atomic max,
# then one small launch for the tokens), or after the kernel in torch (False: an argmax and a gather
# over the partials). The same tokens either way. In the ``kernel`` section of the record
# (single_pass_call against two_pass_call) the single pass is the faster whole call at every size
# issue 17 targets. The interpreter keeps two passes: the lesson's partials, readable in torch.
SINGLE_PASS = True


def launch_config(num_rows: int, vocab: int, *, interpreted: bool | None = None) -> dict:
    """Block size, warps, fast-math level and reduction the launcher picks for a launch of this shape.

    In the interpreter (and for the torch backend's reference semantics) the kernel keeps its
    teaching configuration: blocks of 1024, exact libdevice math, the reduction in torch. Compiled, it
    takes :data:`GPU_BLOCK_V` (or the vocabulary's power of two, if smaller), fast math and the single
    pass. `num_rows` does not change the choice today: small blocks fill the GPU at every row count.
    """
    if interpreted is None:
        interpreted = _backend.KERNELS_INTERPRETED
    pow2 = max(MIN_BLOCK_V, 1 << max(0, (vocab - 1).bit_length()))
    if interpreted:
        return dict(block_v=min(DEFAULT_BLOCK_V, pow2), num_warps=4, fast_math=0, single_pass=False)
    block_v = min(GPU_BLOCK_V, pow2)
    return dict(block_v=block_v, num_warps=min(GPU_NUM_WARPS, warps_for(block_v)), fast_math=GPU_FAST_MATH,
                single_pass=SINGLE_PASS)


def warps_for(block_v: int) -> int:
    """Warps for a block: 16 elements per thread (what the sweep found best at every block size)."""
    return max(1, min(16, block_v // 512))


def check_tuning(block_v, num_warps, fast_math) -> None:
    """The tuning switches, checked on every backend (the torch reference ignores valid ones)."""
    if block_v is not None:
        check_power_of_two("block_v", block_v, MIN_BLOCK_V, MAX_BLOCK_V)
    if num_warps is not None:
        check_power_of_two("num_warps", num_warps, 1, 32)
    if fast_math is not None:
        check_int("fast_math", fast_math, low=0, high=2)


def resolve_config(num_rows, vocab, block_v=None, num_warps=None, fast_math=None, single_pass=None) -> dict:
    """launch_config with the caller's (checked) overrides."""
    cfg = launch_config(num_rows, vocab)
    if single_pass is not None:
        cfg["single_pass"] = bool(single_pass)
    if block_v is not None:
        cfg["block_v"] = int(block_v)
        if num_warps is None:
            cfg["num_warps"] = warps_for(block_v)
    if num_warps is not None:
        cfg["num_warps"] = int(num_warps)
    if fast_math is not None:
        if fast_math and _backend.KERNELS_INTERPRETED:
            raise LabkitInputError("fast_math uses inline PTX, which Triton's interpreter cannot run; "
                                   "use fast_math=0 on the CPU")
        cfg["fast_math"] = int(fast_math)
    return cfg


@triton.jit
def _max_nan_first(a, b):
    # NaN-propagating max: one instruction (max.NaN) where the plain max would ignore a NaN.
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def block_argmax(scores, offs, in_vocab, is_tail):
    """(max, first index of the max) of a block of scores, NaN counting as +inf and lanes past the
    vocabulary never winning -- the torch reference's argmax -- with the least work per element.

    The plain way pays three selects per element (NaN to +inf, lanes past the vocabulary to -inf, then
    the index search). Here the max propagates NaN, so a NaN is seen once per block and handled on
    a scalar branch that almost never runs; and only the row's last block (`is_tail`) masks its lanes
    past the vocabulary (they loaded -inf, which only a negative temperature could turn into +inf)."""
    if is_tail:
        scores = tl.where(in_vocab, scores, float("-inf"))
    best = tl.reduce(scores, 0, _max_nan_first)
    if best != best:  # a NaN in the block: NaN and +inf tie, the first of them wins
        top = (scores != scores) | (scores == float("inf"))
        best_idx = tl.min(tl.where(top, offs, 2147483647), axis=0)
        best = float("inf")
    else:
        best_idx = tl.min(tl.where(scores == best, offs, 2147483647), axis=0)
    return best, best_idx


# The single pass: every program folds its block's (max, index) into its row's best with one atomic
# max on a packed 64-bit word, fire and forget (no program waits for another); a tiny second launch,
# part of every launch, turns the words into tokens and empties them. It replaced the row's last
# program reducing the partials (an acquire/release atomic each program had to wait for); against
# torch's argmax and gather, the ``kernel`` section of labkit/data/gpu/h200.json times both
# (single_pass_call, two_pass_call) beside the kernel alone.
ROW_BEST_EMPTY = -(2**63)  # below every packed (max, index)


@triton.jit
def fold_into_row_best(row_best_ptr, row, best, best_idx):
    """Atomic max of (best, first index) into the row's packed word: the larger score wins, and
    among equal scores the smaller index (the first index of the row's maximum, as torch.argmax)."""
    bits = best.to(tl.int32, bitcast=True)
    ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # int32 order = float order (no NaN here)
    packed = (ordered.to(tl.int64) << 32) | (2147483647 - best_idx).to(tl.int64)
    tl.atomic_max(row_best_ptr + row, packed, sem="relaxed")


@triton.jit
def row_best_to_tokens_kernel(row_best_ptr, token_ptr, num_rows, BLOCK: tl.constexpr):
    """Tokens from the rows' packed words, and the words back to empty for the next launch (a CUDA
    graph replays with the same buffer)."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = rows < num_rows
    packed = tl.load(row_best_ptr + rows, mask=live, other=0)
    tl.store(token_ptr + rows, 2147483647 - (packed & 0xFFFFFFFF), mask=live)
    tl.store(row_best_ptr + rows, tl.full([BLOCK], -9223372036854775807 - 1, tl.int64), mask=live)


_ROW_BEST: dict[tuple[str, int | None], list[torch.Tensor]] = {}


def row_best_buffer(device, num_rows: int) -> torch.Tensor:
    """The single pass's packed per-row words on `device` (int64, at least `num_rows`), empty between launches.

    Each call leaves them empty (its second launch resets them), so they are made once per device and
    reused, with no fill launched before each call. Keyed by the device; never freed, because a
    captured CUDA graph keeps the address it was captured with (a bigger set is added when a launch
    needs more rows). Launches that run concurrently on several streams of one device would share
    them: the kit launches on one stream."""
    device = resolved_device(device)
    made = _ROW_BEST.setdefault((device.type, device.index), [])
    if not made or made[-1].numel() < num_rows:
        size = max(num_rows, 4096, 2 * (made[-1].numel() if made else 0))
        made.append(torch.full((size,), ROW_BEST_EMPTY, dtype=torch.int64, device=device))
    return made[-1]
