"""Exercise (b), the kernel masks: kernels written as a learner would, run through the checker.

`labkit` is imported first, so TRITON_INTERPRET is set before any kernel here is decorated.
Every way of skipping a padded row is right (masked loads with any `other`, `tl.where` on a safe
index, scalar guards, an early exit); every way of touching memory through slot -1, or of
changing a live row's result, is wrong, with a reason that is true.
"""

from __future__ import annotations

import pytest
from workshop_helpers import (
    assert_draws_the_launch,
    assert_rejected,
    assert_solved,
    figure_text,
    kept_answers,  # noqa: F401 (autouse)
)

import labkit  # noqa: F401  (first: sets TRITON_INTERPRET)
from labkit import backends
from labkit.workshop import checkers as ex
from labkit.workshop.checkers import row_key, tl, triton, uniform
from labkit.workshop.exercises.sampling_kernel import judge_launch
from labkit.workshop.harness.launches import kernel_case, launch_triton

KERNELS_RUN = backends.HAS_TRITON and (backends.KERNELS_INTERPRETED or backends.HAS_CUDA)
needs_kernels = pytest.mark.skipif(not KERNELS_RUN, reason="Triton kernels cannot run here (no Triton, or no GPU "
                                                           "and not interpreted)")
# Reads that leave no trace in any result are seen only where every access is logged (the interpreter).
needs_access_log = pytest.mark.skipif(not backends.KERNELS_INTERPRETED,
                                      reason="compiled kernels show reads only by their effect")

# ---------------------------------------------------------------------------------------- right


@triton.jit
def kernel_other_zero(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                      vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
    seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & ((offs * 0 + slot) >= 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_other_one(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                     vocab_size, salt, BLOCK_V: tl.constexpr):
    # A padded row gets temperature 1.0: it samples with noise, and its token is thrown away.
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=1.0)
    seed = tl.load(seeds_ptr + slot, mask=is_valid, other=12345)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & ((offs * 0 + slot) >= 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_where(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                 vocab_size, salt, BLOCK_V: tl.constexpr):
    # Point padded rows at slot 0 (in bounds) and throw away what they read and compute.
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    safe = tl.where(is_valid, slot, 0)
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.where(is_valid, tl.load(temperature_ptr + safe), 0.0)
    seed = tl.load(seeds_ptr + safe)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + safe * vocab_size + offs, scaled, mask=tl.where(is_valid, in_vocab, False))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_early_exit(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                      vocab_size, salt, BLOCK_V: tl.constexpr):
    # The whole body under one guard: a padded row does nothing at all (its token stays unwritten).
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    if slot >= 0:
        offs = tl.arange(0, BLOCK_V)
        in_vocab = offs < vocab_size
        logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
        temp = tl.load(temperature_ptr + slot)
        seed = tl.load(seeds_ptr + slot)
        scaled = logits
        if temp != 0.0:
            scaled = logits / temp
        tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab)
        scores = scaled
        if temp != 0.0:
            key = row_key(seed, tl.load(pos_ptr + row), salt)
            scores = scaled - tl.log(-tl.log(uniform(key, offs)))
        tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_scalar_guards(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                         vocab_size, salt, BLOCK_V: tl.constexpr):
    # Scalar `if` guards around the loads and the store; the seed is loaded only where it is used.
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = 0.0
    if slot >= 0:
        temp = tl.load(temperature_ptr + slot)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    if slot >= 0:
        tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab)
    scores = scaled
    if temp != 0.0:
        seed = tl.load(seeds_ptr + slot)  # temp != 0 only for a live row
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_no_other(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                    vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid)
    seed = tl.load(seeds_ptr + slot, mask=is_valid)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & ((offs * 0 + slot) >= 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_scalar_store_mask(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                             vocab_size, salt, BLOCK_V: tl.constexpr):
    # The block mask and the scalar condition side by side: docs/TRITON_MASKS.md's form that Triton 3.9's
    # interpreter refuses.
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
    seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & (slot >= 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_named_condition_store_mask(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr,
                                      token_ptr, vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
    seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & tl.broadcast_to(is_valid, [BLOCK_V]))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@needs_kernels
@pytest.mark.parametrize("learner", [kernel_other_zero, kernel_other_one, kernel_where, kernel_early_exit,
                                     kernel_scalar_guards])
def test_every_way_of_skipping_padded_rows_is_accepted(learner):
    result = ex.check_kernel(learner)
    assert_solved(result)
    assert result.warnings == []


@needs_kernels
@needs_access_log
def test_a_masked_load_without_other_is_accepted_with_a_warning():
    result = ex.check_kernel(kernel_no_other)
    assert_solved(result)
    assert [w.split("`")[1] for w in result.warnings] == ["temperature", "seeds"]
    assert all("undefined" in w for w in result.warnings)


@needs_kernels
@pytest.mark.parametrize("learner, mask", [(kernel_scalar_store_mask, "in_vocab & (slot >= 0)"),
                                           (kernel_named_condition_store_mask,
                                            "in_vocab & tl.broadcast_to(is_valid, [BLOCK_V])")])
def test_a_store_mask_another_supported_triton_refuses_is_accepted_with_a_warning(learner, mask):
    result = ex.check_kernel(learner)
    assert_solved(result)
    assert len(result.warnings) == 1 and f"`{mask}`" in result.warnings[0], result.warnings
    assert "Triton 3.9" in result.warnings[0] and "docs/TRITON_MASKS.md" in result.warnings[0]


# ---------------------------------------------------------------------------------------- wrong


@triton.jit
def kernel_unmasked(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                    vocab_size, salt, BLOCK_V: tl.constexpr):  # the skeleton: vLLM before the PR
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot)
    seed = tl.load(seeds_ptr + slot)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab)
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_store_mask_only(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                           vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot)  # reads temperature[-1] for a padded row
    seed = tl.load(seeds_ptr + slot)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & ((offs * 0 + slot) >= 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_slot_above_zero(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                           vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot > 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
    seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & ((offs * 0 + slot) > 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_store_without_in_vocab(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr,
                                  token_ptr, vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
    seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=(offs * 0 + slot) >= 0)
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_seed_unmasked(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                         vocab_size, salt, BLOCK_V: tl.constexpr):
    # Its value is never used by a padded row (temperature 0 skips the noise), but it is read.
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
    seed = tl.load(seeds_ptr + slot)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & ((offs * 0 + slot) >= 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_where_after_the_load(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                                vocab_size, salt, BLOCK_V: tl.constexpr):
    # tl.where picks after the load has happened: the load itself went through slot -1.
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.where(is_valid, tl.load(temperature_ptr + slot), 0.0)
    seed = tl.where(is_valid, tl.load(seeds_ptr + slot), 0)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & ((offs * 0 + slot) >= 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_early_exit_inverted(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                               vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    if slot < 0:
        offs = tl.arange(0, BLOCK_V)
        in_vocab = offs < vocab_size
        logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
        temp = tl.load(temperature_ptr + slot)
        scaled = logits
        if temp != 0.0:
            scaled = logits / temp
        tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab)
        tl.store(token_ptr + row, tl.argmax(scaled, axis=0))


@triton.jit
def kernel_q_unscaled(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                      vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
    seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, logits, mask=in_vocab & ((offs * 0 + slot) >= 0))
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_clamp_to_zero(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                         vocab_size, salt, BLOCK_V: tl.constexpr):
    # In bounds, but a padded row now reads and stores as slot 0: live slot 0's q is overwritten.
    row = tl.program_id(0)
    slot = tl.maximum(tl.load(mapping_ptr + row), 0)
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot)
    seed = tl.load(seeds_ptr + slot)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab)
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@triton.jit
def kernel_typo(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0  # noqa: F841 - the learner's typo below
    temp = tl.load(temperature_ptr + slot, mask=is_vaild, other=0.0)  # noqa: F821
    tl.store(token_ptr + row, temp.to(tl.int64))


def kernel_without_jit(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                       vocab_size, salt, BLOCK_V):
    pass


# Where the reason differs, the interpreter's (every access logged) and the compiled kernel's (a read
# seen only through a result it changed: a padded row's token tells temperature or seeds, not which;
# a read whose value is only stored into draft_logits[-1] changes nothing the checker compares).
_BY_BACKEND = {
    "store_mask_only": {
        "interpreter": ["Launch 1", "padded row 7 (slot -1) read temperature[-1] and seeds[-1]"],
        "compiled": ["Launch 1", "padded row 7 (slot -1) read temperature[-1] or seeds[-1]", "Seen by effect"]},
    # Compiled, which of two stores into slot 0 lands last is a race: the padded row's, or the live row's.
    "clamp_to_zero": {
        "interpreter": ["Launch 1", "live row 0's q (draft_logits[0]) holds padded row 7's logits",
                        "padded row 7 (slot -1) stored into draft_logits[0]"],
        "compiled": ["padded row 7"]},
    "early_exit_inverted": {
        "interpreter": ["padded row 7 (slot -1) read temperature[-1] and stored into draft_logits[-1]"],
        "compiled": ["padded row 7 (slot -1) stored into draft_logits[-1]"]},
}
_KERNEL_RUNS = "interpreter" if backends.KERNELS_INTERPRETED else "compiled"


@needs_kernels
@pytest.mark.parametrize("learner,fragments", [
    (kernel_store_mask_only, _BY_BACKEND["store_mask_only"][_KERNEL_RUNS]),
    (kernel_slot_above_zero, ["live row 0 holds slot 0, but nothing was stored into draft_logits[0]"]),
    # On a GPU the spilled lane races the next slot's own store; the race is not taken for a read.
    (kernel_store_without_in_vocab, ["Launch 1 (idx_mapping [0, 1, 2, 4, 5, 6, 7, -1]): a store went past the "
                                     "end of draft_logits (into row 8)", "32 lanes"]),
    (kernel_early_exit_inverted, _BY_BACKEND["early_exit_inverted"][_KERNEL_RUNS]),
    (kernel_clamp_to_zero, _BY_BACKEND["clamp_to_zero"][_KERNEL_RUNS]),
    (kernel_q_unscaled, ["live row 0's q (draft_logits[0]) differs from its logits divided by its temperature"]),
    (kernel_typo, ["raised NameError at line 7 of `kernel_typo`", "is_vaild"]),
    (kernel_without_jit, ["plain Python function", "@triton.jit"]),
])
def test_wrong_kernels_are_rejected_with_a_true_reason(learner, fragments):
    assert_rejected(ex.check_kernel(learner), *fragments)


@needs_kernels
@needs_access_log
@pytest.mark.parametrize("learner,fragments", [
    (kernel_seed_unmasked, ["padded row 7 (slot -1) read seeds[-1]"]),
    (kernel_where_after_the_load, ["padded row 7 (slot -1) read temperature[-1] and seeds[-1]"]),
])
def test_reads_whose_value_is_never_used_are_seen_in_the_interpreter(learner, fragments):
    # Compiled on a GPU these reads leave no trace in any result; the solved message says so.
    assert_rejected(ex.check_kernel(learner), *fragments)


@needs_kernels
@needs_access_log
def test_the_access_log_names_buffer_index_and_row():
    outcome = launch_triton(kernel_seed_unmasked, kernel_case(0, "cpu"))
    assert [(a.buffer, a.index, a.row) for a in outcome.reads] == [("seeds", -1, 7)]


@needs_kernels
def test_the_untouched_kernel_first_names_the_symptom_not_the_fix():
    result = ex.check_kernel(kernel_unmasked)
    assert_rejected(result, "Launch 1 (idx_mapping [0, 1, 2, 4, 5, 6, 7, -1])", "padded row 7 (slot -1)",
                    "stored into draft_logits[-1]")
    for fix_word in ("mask", "other=", ">= 0", "tl.where"):
        assert fix_word not in result.message
    assert "mask=" in repr(ex.hint("b", 3)) and "mask=" not in repr(ex.hint("b", 1))


# ---------------------------------------------------------------------------------------- your launch, drawn


@needs_kernels
def test_a_failed_check_draws_your_launch_with_its_guard_hits():
    result = ex.check_kernel({"gumbel_kernel": kernel_unmasked})  # the notebook's name, which gives nothing away
    launch = result.launch
    assert launch.stores == {0: [0], 1: [1], 2: [2], 3: [4], 4: [5], 5: [6], 6: [7], 7: [-1]}
    assert [int(launch.table.writer[s, 0]) for s in range(8)] == [0, 1, 2, -1, 3, 4, 5, 6]
    assert launch.table.collisions() == []  # no live q overwritten: the trouble is outside the buffers
    assert launch.hits[-1] == "row 7 (slot -1) stored into draft_logits[-1]"
    if backends.KERNELS_INTERPRETED:  # every read is seen
        assert launch.hits[:-1] == ["row 7 (slot -1) read temperature[-1]", "row 7 (slot -1) read seeds[-1]"]
    else:  # compiled, a read shows through the row's token: which buffer, the effect cannot tell
        assert all("read temperature[-1] or seeds[-1] (seen by its effect" in h for h in launch.hits[:-1])
    assert_draws_the_launch(result, "Your gumbel_kernel, launch 1 of 3: idx_mapping [0, 1, 2, 4, 5, 6, 7, -1]",
                            f"{len(launch.hits)} access", "last writer of draft_logits[slot, step]",
                            "slot -1 (guard)", "row 6", *launch.hits)


@needs_kernels
def test_the_drawn_launch_shows_what_the_rows_did_not_what_the_mapping_says():
    # A spill past the vocabulary: every live row also stores one lane into the next slot's q.
    spill = ex.check_kernel(kernel_store_without_in_vocab).launch
    assert spill.stores[0] == [0, 1] and spill.stores[6] == [7, 8] and spill.stores[7] == []
    assert "row 6 (slot 7) stored into draft_logits[8]" in spill.hits
    assert "slot 8 (guard)" in figure_text(spill.figure)
    # slot > 0: live row 0 stores nothing, and slot 0's q is missing.
    missing = ex.check_kernel({"gumbel_kernel": kernel_slot_above_zero})
    assert missing.launch.stores[0] == [] and missing.launch.hits == []
    assert_draws_the_launch(missing, "draft_logits[0]: MISSING: nobody stored this live q", "slot 0: no store",
                            "nothing: no row read or wrote outside the buffers")


@needs_kernels
def test_a_failed_check_shows_its_launch_in_a_notebook_and_as_text():
    result = ex.check_kernel(kernel_unmasked)
    page = result._repr_html_()
    assert page.startswith('<div class="labkit-verdict"') and ">Exercise (b) not solved yet: Launch 1" in page
    assert '<img src="data:image/png;base64,' in page
    assert "Who stored into each slot of q" in repr(result) and "row 7 (slot -1) stored into" in repr(result)
    assert result.reveal is None  # the fix is shown once solved, or when the instructor asks


@needs_kernels
def test_a_kernel_that_raises_has_no_launch_to_draw():
    result = ex.check_kernel(kernel_typo)
    assert_rejected(result, "raised NameError")
    assert result.launch is None and result.figure is None and '<table' not in result._repr_html_()


@needs_kernels
def test_a_solved_kernel_shows_the_prs_fix_beside_your_kernel():
    result = ex.check_kernel(kernel_early_exit)
    assert_solved(result)
    assert result.figure is None
    shown = repr(result)
    assert "gumbel_sample_kernel" in shown and "is_valid = slot >= 0" in shown  # the kit's masked loads
    assert "def kernel_early_exit(" in shown and "if slot >= 0:" in shown  # the learner's own kernel
    assert "int64" not in result.reveal.fix.text  # (d)'s answer waits for (d)
    page = result._repr_html_()
    assert page.count("<td") == 2 and "def kernel_early_exit(" in page


def test_missing_name_is_not_solved_yet():
    assert_rejected(ex.check_kernel({}), "is not defined yet")


@needs_kernels
@needs_access_log
def test_compiled_kernels_show_reads_by_their_effect(monkeypatch):
    """The GPU path, run here on the interpreter: launch twice with different guard contents."""
    monkeypatch.setattr(backends, "KERNELS_INTERPRETED", False)
    case = kernel_case(0, "cpu")
    seen = launch_triton(kernel_store_mask_only, case)
    assert seen.reads_seen == "by effect"
    assert [(a.buffer, a.row) for a in seen.reads] == [("temperature or seeds", 7)]
    # What the effect cannot show: a read whose value no result uses.
    assert launch_triton(kernel_seed_unmasked, case).reads == []
    assert launch_triton(kernel_other_zero, case).reads == []


class _RaceOnOneStore:
    """Stands in for a compiled kernel whose rows race to store draft_logits[1, 0].

    Every launch stores the right tokens and q, except that on the launches `spill_lands_last`
    picks, slot 0's spilled lane lands after slot 1's own store (as a GPU may order them).
    """

    def __init__(self, case, spill_lands_last):
        self.case, self.spill_lands_last, self.launches = case, spill_lands_last, 0

    def __getitem__(self, grid):
        return self._launch

    def _launch(self, logits, mapping, temperature, seeds, positions, q, tokens, vocab_size, salt, BLOCK_V):
        want_tokens, want_q = self.case.reference()
        tokens.copy_(want_tokens)
        q.copy_(want_q)
        if self.spill_lands_last(self.launches):
            q[1, 0] = float("-inf")
        self.launches += 1


@pytest.mark.parametrize("spill_lands_last", [lambda n: n % 2 == 1, lambda n: n >= 2],
                         ids=["alternating", "drifting"])
def test_compiled_a_race_between_stores_is_not_taken_for_a_read(monkeypatch, spill_lands_last):
    monkeypatch.setattr(backends, "KERNELS_INTERPRETED", False)
    case = kernel_case(0, "cpu")
    racing = _RaceOnOneStore(case, spill_lands_last)
    seen = launch_triton(racing, case)
    assert racing.launches == 4
    assert seen.reads == []


def test_compiled_a_steady_q_that_follows_the_guards_is_a_read(monkeypatch):
    """A padded row that reads temperature[-1] and stores into slot 0: q[0] follows the guard."""
    monkeypatch.setattr(backends, "KERNELS_INTERPRETED", False)
    case = kernel_case(0, "cpu")

    class ReadsTheGuard(_RaceOnOneStore):
        def _launch(self, logits, mapping, temperature, seeds, positions, q, tokens, vocab_size, salt, BLOCK_V):
            super()._launch(logits, mapping, temperature, seeds, positions, q, tokens, vocab_size, salt, BLOCK_V)
            before = temperature.as_strided((1,), (1,), temperature.storage_offset() - 1)
            q[0] = logits[7] / before

    seen = launch_triton(ReadsTheGuard(case, lambda n: False), case)
    assert [(a.buffer, a.row) for a in seen.reads] == [("temperature or seeds", None)]
    assert "(Seen by effect: draft_logits changed when only the memory before" in judge_launch(case, seen)


@pytest.mark.parametrize("race_only", [True, False])
def test_a_compiled_launchs_race_on_a_spilled_entry_is_not_taken_for_a_read_of_the_guards(monkeypatch, race_only):
    """On a GPU the checker sees reads only by their effect, comparing launches with two guard sets (A B B
    A). A kernel that stores past the vocabulary's end makes row s's last lane race row s + 1's first
    entry; on the H200 that race once repeated within each pair and differed between them, and the
    checker blamed a read of temperature[-1]. Simulated here, on any machine: the race alone (entry 0
    of a row differs between the sets) is not a read; a whole row that differs (what a guard read of the
    temperature does) still is."""
    import labkit.workshop.harness.launches as harness

    case = kernel_case(0, "cpu")
    tokens_ref, q_ref = case.reference()
    sets = iter([0, 1, 1, 0])

    def fake_launch(kernel, case, temp, seeds, q, tokens):
        q.view.copy_(q_ref)
        tokens.copy_(tokens_ref)
        if next(sets) == 1:  # guard set B
            if race_only:
                q.view[2, 0] = q_ref[1, -1] + 1.0  # the neighbour's spilled lane landed last
            else:
                q.view[2] = q_ref[2] * 2.0  # the row's q scaled by a temperature read from the guards

    monkeypatch.setattr(backends, "KERNELS_INTERPRETED", False)
    monkeypatch.setattr(harness, "_grid_launch", fake_launch)
    out = launch_triton(None, case)
    assert out.reads_seen == "by effect"
    assert (out.reads == []) == race_only, out.reads
