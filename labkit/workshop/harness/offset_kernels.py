"""The two small kernels that call the learner's offset helper of exercise (d).

Imported only when Triton kernels can run (this module imports Triton; the checkers do not).
"""

from __future__ import annotations

import triton
import triton.language as tl

# The integers handed to the learner's helper stay int32 tensors when compiled. Left to itself,
# Triton's JIT turns an integer argument equal to 1 (the small store's step) into a Python constant,
# and a right answer such as `step.to(tl.int64)` would fail with "'int' object has no attribute
# 'to'"; the interpreter never specializes, so only a GPU would reject it.
_LEARNER_INTEGERS = ["stride_slot", "stride_step", "step"]


@triton.jit(do_not_specialize=_LEARNER_INTEGERS)
def offsets_kernel(mapping_ptr, out_ptr, stride_slot, stride_step, step, OFFSET: tl.constexpr):
    """out[row] = OFFSET(slot, step, ...) as int64, with slot loaded from the int32 mapping."""
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    tl.store(out_ptr + row, OFFSET(slot, step, stride_slot, stride_step).to(tl.int64))


@triton.jit(do_not_specialize=_LEARNER_INTEGERS)
def store_kernel(q_ptr, mapping_ptr, stride_slot, stride_step, step, vocab_size,
                 OFFSET: tl.constexpr, BLOCK_V: tl.constexpr):
    """Each row stores row * 1000 + lane at q_ptr + OFFSET(slot, step, ...) + lane."""
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    offs = tl.arange(0, BLOCK_V)
    value = (row * 1000 + offs).to(tl.float32)
    tl.store(q_ptr + OFFSET(slot, step, stride_slot, stride_step) + offs, value, mask=offs < vocab_size)
