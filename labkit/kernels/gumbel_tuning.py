"""How the sampling kernel is launched: block size, warps, fast math, and where blocks are reduced.

None of this changes which token a row samples (except at float-rounding ties, for the fast-math
levels): it is what makes :func:`labkit.kernels.gumbel.gumbel_sample_kernel` fast on a GPU, kept
out of the kernel's file so that the kernel reads as the lesson. In the interpreter the kernel
keeps its teaching configuration: blocks of 1024 and exact libdevice math.

The single-pass reduction lives here too: the row's last program to finish reduces the block
partials, instead of two torch launches after the kernel. Both give the same tokens.
"""

from __future__ import annotations

import torch

from labkit import backends as _backend
from labkit.checks import check_int, check_power_of_two
from labkit.errors import LabkitInputError
from labkit.kernels.triton_import import tl, triton

DEFAULT_BLOCK_V = 1024
MIN_BLOCK_V, MAX_BLOCK_V = 16, 65536  # the block sizes a caller may ask for (powers of two)

# On a GPU the kernel is bound by its per-element arithmetic (a 32-bit hash and two logs) as much
# as by memory: each program's loads, arithmetic and stores must overlap with other programs'. Blocks
# of 2048 with 4 warps (16 elements per thread) did that best in the issue-17 measurements on an H200,
# against the earlier 4096 with 8 warps, for the kernel alone and for the whole call; the ``sweep``
# section of labkit/data/gpu/h200.json (labkit/gpu/kernel.py, bench_sweep) records every block size
# and warp count, with the whole call in one and in two passes.
GPU_BLOCK_V = 2048
GPU_NUM_WARPS = 4
# The fast-math level of compiled kernels (levels: labkit/kernels/fast_math.py; the interpreter
# always runs level 0).
GPU_FAST_MATH = 2
# The reduction over a row's blocks, compiled: in the kernel, by the row's last program to finish
# (True: one launch), or after it in torch (False: an argmax and a gather, two more launches). The
# same tokens either way. The single pass costs the kernel its counting (an atomic per program) and
# saves the two launches, which weigh most at few rows; in the ``kernel`` section of the record
# (single_pass_call against two_pass_call) it is the faster whole call at the sizes issue 17 targets.
# The interpreter keeps two passes: the lesson kernel without the counting.
SINGLE_PASS = True


def launch_config(num_rows: int, vocab: int, *, interpreted: bool | None = None) -> dict:
    """Block size, warps, fast-math level and reduction the launcher picks for a launch of this shape.

    In the interpreter (and for the torch backend's reference semantics) the kernel keeps its
    teaching configuration: blocks of 1024, exact libdevice math, the reduction in torch. Compiled, it takes big blocks
    unless that would leave most of the GPU idle (few rows, small vocabularies).
    """
    if interpreted is None:
        interpreted = _backend.KERNELS_INTERPRETED
    pow2 = max(MIN_BLOCK_V, 1 << max(0, (vocab - 1).bit_length()))
    if interpreted:
        return dict(block_v=min(DEFAULT_BLOCK_V, pow2), num_warps=4, fast_math=0, single_pass=False)
    block_v = min(GPU_BLOCK_V, pow2)
    # Fewer, bigger programs only pay off when they still fill the machine.
    while block_v > DEFAULT_BLOCK_V and num_rows * -(-vocab // block_v) < 264:
        block_v //= 2
    num_warps = max(1, min(GPU_NUM_WARPS, block_v // 256))
    return dict(block_v=block_v, num_warps=num_warps, fast_math=GPU_FAST_MATH, single_pass=SINGLE_PASS)


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
            cfg["num_warps"] = max(1, min(GPU_NUM_WARPS, block_v // 256))
    if num_warps is not None:
        cfg["num_warps"] = int(num_warps)
    if fast_math is not None:
        if fast_math and _backend.KERNELS_INTERPRETED:
            raise LabkitInputError("fast_math uses inline PTX, which Triton's interpreter cannot run; "
                                   "use fast_math=0 on the CPU")
        cfg["fast_math"] = int(fast_math)
    return cfg


@triton.jit
def last_program_reduces(block_max_ptr, block_idx_ptr, counter_ptr, token_ptr, row, num_blocks,
                         MAX_BLOCKS: tl.constexpr):
    """The reduction over a row's blocks, done by the row's last program to finish (one pass).

    Every program has stored its block's (max, first index of the max); an atomic counts them,
    with release/acquire order, so the program that counts last sees all of its row's partials.
    It takes the largest max and, among equal ones, the smallest index -- the first index of the
    row's maximum, as torch.argmax and the two-pass reduction pick -- and sets the counter back
    to 0 for the next launch (a CUDA graph replays with the same counters)."""
    tl.debug_barrier()  # this program's partial stores are issued before it counts itself done
    done = tl.atomic_add(counter_ptr + row, 1, sem="acq_rel")
    if done == num_blocks - 1:
        blocks = tl.arange(0, MAX_BLOCKS)
        valid = blocks < num_blocks
        part = row * num_blocks + blocks
        maxes = tl.load(block_max_ptr + part, mask=valid, other=float("-inf"), cache_modifier=".cg")
        idxs = tl.load(block_idx_ptr + part, mask=valid, other=0, cache_modifier=".cg")
        best = tl.max(maxes, axis=0)
        tl.store(token_ptr + row, tl.min(tl.where(valid & (maxes == best), idxs, 1 << 62), axis=0))
        tl.store(counter_ptr + row, 0)


_ROW_COUNTERS: dict[tuple[str, int | None], list[torch.Tensor]] = {}


def row_counters(device, num_rows: int) -> torch.Tensor:
    """The single pass's per-row counters on `device` (int32, at least `num_rows`), zero between launches.

    Each launch leaves them at zero (a row's last program resets its counter), so they are made
    once per device and reused, with no fill launched before each call. Keyed by the device; never
    freed, because a captured CUDA graph keeps the address it was captured with (a bigger set is
    added when a launch needs more rows). Launches that run concurrently on several streams of one
    device would share them: the kit launches on one stream."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    made = _ROW_COUNTERS.setdefault((device.type, device.index), [])
    if not made or made[-1].numel() < num_rows:
        made.append(torch.zeros(max(num_rows, 4096, 2 * (made[-1].numel() if made else 0)), dtype=torch.int32,
                                device=device))
    return made[-1]
