"""How the sampling kernel is launched: block size, warps, fast math, and where blocks are reduced.

None of this changes which token a row samples (except at float-rounding ties, for the fast-math
levels): it is what makes :func:`labkit.kernels.gumbel.gumbel_sample_kernel` fast on a GPU, kept
out of the kernel's file so that the kernel reads as the lesson. In the interpreter the kernel
keeps its teaching configuration: blocks of 1024 and exact libdevice math.

The reductions live here too: within a block (:func:`block_argmax`, NaN and the vocabulary's end
handled off the per-element path) and over a row's blocks (the single pass: one packed word per
program and one small launch that reduces a row's words, instead of torch's argmax and gather). The
same tokens either way.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from labkit import backends as _backend
from labkit import interpreter
from labkit.checks import check_int, check_power_of_two
from labkit.errors import LabkitInputError
from labkit.kernels.triton_import import tl, triton

DEFAULT_BLOCK_V = 1024
MIN_BLOCK_V, MAX_BLOCK_V = 16, 65536  # the block sizes a caller may ask for (powers of two)

# On a GPU each program's loads, arithmetic (a 32-bit hash and two logs per element) and stores must
# overlap with other programs'. Small programs with 2 warps (16 elements per thread) pack many to an
# SM. The ``sweep`` section of labkit/data/gpu/runs.json (labkit/gpu/kernel.py, bench_sweep: every
# block size and warp count, the whole call in one and in two passes, at 64-512 rows) is what chose
# them; notebook 08 prints this default beside the fastest configuration per shape, and the
# ``kernel`` section times it at every size.
GPU_BLOCK_V = 1024
GPU_NUM_WARPS = 2
# CUDA caps a grid's second axis, the kernel's rows, at 65535: bigger batches launch in parts.
MAX_GRID_ROWS = 65535
# The fast-math level of compiled kernels (levels: labkit/kernels/fast_math.py; the interpreter
# always runs level 0).
GPU_FAST_MATH = 2
# The reduction over a row's blocks, compiled: in Triton (True: one packed word per program, then one
# small launch for the tokens), or after the kernel in torch (False: an argmax and a gather over the
# partials). The same tokens either way. In the ``kernel`` section of the record (single_pass_call
# against two_pass_call) the single pass is the faster whole call at every recorded size. The
# interpreter keeps two passes: the lesson's partials, readable in torch.
SINGLE_PASS = True
# The single pass's read-out kernel with programmatic dependent launch, where the GPU has it
# (compute capability 9.0 and up; elsewhere the read-out is an ordinary second launch).
DEPENDENT_LAUNCH = True


def launch_config(num_rows: int, vocab: int, *, interpreted: bool | None = None) -> dict:
    """Block size, warps, fast-math level and reduction the launcher picks for a launch of this shape.

    In the interpreter (and for the torch backend's reference semantics) the kernel keeps its
    teaching configuration: blocks of 1024, exact libdevice math, the reduction in torch. Compiled, it
    takes blocks of GPU_BLOCK_V (or the vocabulary's power of two, if smaller) with GPU_NUM_WARPS,
    fast math and the single pass, its read-out launched early (``pdl``) where the launch's GPU allows it.
    The row count changes none of this today; it stays an argument because the sweep measures per shape.
    """
    if interpreted is None:
        interpreted = _backend.KERNELS_INTERPRETED
    pow2 = max(MIN_BLOCK_V, 1 << max(0, (vocab - 1).bit_length()))
    if interpreted:
        return dict(block_v=min(DEFAULT_BLOCK_V, pow2), num_warps=4, fast_math=0, single_pass=False, pdl=False)
    block_v = min(GPU_BLOCK_V, pow2)
    return dict(block_v=block_v, num_warps=min(GPU_NUM_WARPS, warps_for(block_v)), fast_math=GPU_FAST_MATH,
                single_pass=SINGLE_PASS, pdl=DEPENDENT_LAUNCH)


def dependent_launch_on(device: torch.device) -> bool:
    """Whether `device` has programmatic dependent launch (PTX griddepcontrol: compute capability 9.0
    or newer); elsewhere a ``pdl`` launch runs its read-out as an ordinary second launch."""
    return device.type == "cuda" and _capability_major(device.index) >= 9


@functools.lru_cache(maxsize=None)
def _capability_major(index: int | None) -> int:
    return torch.cuda.get_device_capability(index)[0]


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
def program_row_and_block(row_start, ALTERNATE_ROWS: tl.constexpr):
    """The (row, vocab block) a program samples, on a grid of (vocab blocks, rows from `row_start`).

    A GPU starts programs in the order of the grid's first axis, then its second: a row's blocks run
    side by side, and the launch streams through memory as a copy does. The row comes from the
    second axis rather than from dividing a one-axis program id: a division by a run-time block
    count costs every program about two dozen instructions before it can address its row.

    With `ALTERNATE_ROWS` the rows come from the front and the back of the launch in turn (0, R-1,
    1, R-2, ...). The sampling kernel alternates only with early exit. A padded row then costs a
    program almost nothing, but a GPU still starts each of its programs, and a batch is padded at its
    end: in row order every quick program would come after the last slow one, with nothing left to
    overlap, and early exit saved almost nothing (the half-padded runs of the ``kernel`` sections in
    labkit/data/gpu/runs.json, the superseded one in row order; notebook 04 prints both). Early exit
    runs only masked, where padded rows store nothing and live rows hold distinct (slot, step)
    places, so the order changes no result; the kernel before the fix keeps row order, in which
    padded rows run after the live ones, as in vLLM's grid."""
    blk = tl.program_id(0)
    i = tl.program_id(1)
    if ALTERNATE_ROWS:
        i = tl.where(i % 2 == 0, i // 2, tl.num_programs(1) - 1 - i // 2)
    return row_start + i, blk


def grid_parts(num_rows: int):
    """(first row, rows) of each launch a batch of `num_rows` rows takes: one, unless the batch has
    more rows than a grid's second axis holds (MAX_GRID_ROWS)."""
    return [(start, min(MAX_GRID_ROWS, num_rows - start)) for start in range(0, num_rows, MAX_GRID_ROWS)]


@triton.jit
def _max_nan_first(a, b):
    # NaN-propagating max: one instruction (max.NaN) where the plain max would ignore a NaN.
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


def _max_nan_first_in_numpy(data, axis):
    """What the interpreter's fold of _max_nan_first over `axis` gives, in numpy at once: the maximum,
    whose bits any order of folding gives -- except where a lane holds a NaN (which NaN the fold
    returns is its business) or its maximum is zero (-0.0 and +0.0 tie, and the fold's order picks
    the sign): None there, and the interpreter folds as before. Those are bad inputs and exact
    ties at zero, rare blocks."""
    best = np.max(data, axis=axis)  # NaN wherever the lane holds one
    return None if np.any(np.isnan(best) | (best == 0)) else best


interpreter.interpret_reduction_as(_max_nan_first, _max_nan_first_in_numpy)


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


# The single pass: every program leaves its block's (max, first index) as one packed 64-bit word, and
# one small launch reduces each row's words to its token -- one pass over the partials, in Triton,
# where the two-pass reduction makes two in torch (an argmax, then a gather). The second launch stays:
# without it, a row's programs would have to meet at one address (an atomic max into the row's word,
# or the row's last program reducing behind a counter), where all of a row's blocks, running side by
# side, queue. On a GPU that has
# programmatic dependent launch (compute capability 9.0 and up) the read-out launch starts while the
# sampling kernel runs and waits for it on the device, which hides the second launch's latency; the
# ``kernel`` section of labkit/data/gpu/runs.json times the whole call (single_pass_call,
# two_pass_call) beside the kernel alone.


@triton.jit
def packed_best(best, best_idx):
    """(score, first index) as one int64 whose integer order is the argmax's: the larger score wins,
    and among equal scores the smaller index (the first index of the row's maximum, as torch.argmax)."""
    bits = best.to(tl.int32, bitcast=True)
    ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # int32 order = float order (no NaN here)
    return (ordered.to(tl.int64) << 32) | (2147483647 - best_idx).to(tl.int64)


@triton.jit
def let_the_read_out_start(PDL: tl.constexpr):
    """With programmatic dependent launch, the read-out kernel may be scheduled from here on (it waits
    on the device for this launch to finish before it reads anything)."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def row_tokens_kernel(packed_ptr, token_ptr, num_blocks, CHUNK: tl.constexpr, PDL: tl.constexpr):
    """One row's token: the largest of its blocks' packed words, unpacked to the index."""
    if PDL:
        tl.extra.cuda.gdc_wait()  # until the sampling kernel has finished and its words are visible
    row = tl.program_id(0)
    words = packed_ptr + row.to(tl.int64) * num_blocks
    best = tl.full([CHUNK], -9223372036854775807 - 1, tl.int64)  # below every packed word
    for start in range(0, num_blocks, CHUNK):
        offs = start + tl.arange(0, CHUNK)
        best = tl.maximum(best, tl.load(words + offs, mask=offs < num_blocks, other=-9223372036854775807 - 1))
    tl.store(token_ptr + row, 2147483647 - (tl.max(best, axis=0) & 0xFFFFFFFF))
