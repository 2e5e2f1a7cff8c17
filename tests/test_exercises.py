"""The checkers of notebook 07: each accepts the right answer and rejects plausible wrong ones, in words.

Learner code is written here as a learner would write it in the notebook: host functions for (a)
and (c), @triton.jit kernels for (b) and (d) (`labkit` is imported first, so TRITON_INTERPRET is set
before any of them is decorated).
"""

from __future__ import annotations

import pytest
import torch

import labkit  # noqa: F401  (first: sets TRITON_INTERPRET)
from labkit import backends
from labkit.workshop import checkers as ex
from labkit.workshop.checkers import row_key, tl, triton, uniform

KERNELS_RUN = backends.HAS_TRITON and (backends.KERNELS_INTERPRETED or backends.HAS_CUDA)
needs_kernels = pytest.mark.skipif(not KERNELS_RUN, reason="Triton kernels cannot run here (no Triton, or no GPU "
                                                           "and not interpreted)")


def _solved(result):
    assert result.solved, result.message
    assert "solved" in result.message and "not solved" not in result.message


def _rejected(result, *fragments):
    assert not result.solved, result.message
    assert result.message.startswith(f"Exercise ({result.exercise}) not solved yet:"), result.message
    for fragment in fragments:
        assert fragment in result.message, f"{fragment!r} not in: {result.message}"
    assert "Traceback" not in result.message


# ---------------------------------------------------------------------------------------- (a)

def fill_right(idx_mapping, slots):
    num_reqs = slots.numel()
    idx_mapping[:num_reqs] = slots
    idx_mapping[num_reqs:] = -1


def fill_right_other_way(idx_mapping, slots):
    idx_mapping.fill_(-1)
    idx_mapping[: len(slots)].copy_(slots)


def fill_nothing(idx_mapping, slots):  # the notebook's skeleton: vLLM before the PR
    idx_mapping[: slots.numel()] = slots


def fill_zero(idx_mapping, slots):
    idx_mapping[: slots.numel()] = slots
    idx_mapping[slots.numel():] = 0


def fill_one_row(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    if n < len(idx_mapping):
        idx_mapping[n] = -1


def fill_off_by_one(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n + 1:] = -1


def make_fill_only_when_shrinking():
    seen = {}

    def fill_when_shrinking(idx_mapping, slots):
        n = slots.numel()
        idx_mapping[:n] = slots
        if "n" in seen and n < seen["n"]:
            idx_mapping[n:] = -1
        seen["n"] = n

    return fill_when_shrinking


def fill_up_to_graph_size(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n: triton.next_power_of_2(n)] = -1


def fill_new_tensor(idx_mapping, slots):
    n = slots.numel()
    idx_mapping = torch.cat([slots, torch.full((len(idx_mapping) - n,), -1, dtype=slots.dtype, device=slots.device)])
    return idx_mapping


def fill_past_the_slots(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n:] = len(idx_mapping)


def fill_wrong_size(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n:] = torch.full((3,), -1, device=slots.device)


def test_fill_accepts_the_fix():
    _solved(ex.check_fill(fill_right))
    _solved(ex.check_fill(fill_right_other_way))
    _solved(ex.check_fill({"copy_idx_mapping": fill_right}))


@pytest.mark.parametrize("learner,fragments", [
    (fill_nothing, ["padded row 7 still holds slot 7", "q of live row 6", "idx_mapping[num_reqs:] with -1"]),
    (fill_zero, ["padded row 7 holds 0", "request slot 0", "q of live row 0"]),
    (fill_one_row, ["step 2", "padded row 6 still holds slot 7", "live row 4"]),
    (fill_off_by_one, ["padded row 7 still holds slot 7"]),
    (make_fill_only_when_shrinking(), ["fresh engine", "the buffer starts as zeros", "q of live row 0"]),
    (fill_up_to_graph_size, ["past this step's graph", "Fill all of idx_mapping[num_reqs:]"]),
    (fill_new_tensor, ["did not change at all", "returned a tensor", "in place"]),
    (fill_past_the_slots, ["holds 8, which is not a slot at all"]),
    (fill_wrong_size, ["raised RuntimeError at line 4 of `copy_idx_mapping`", "torch.full((3,), -1"]),
])
def test_fill_rejects_wrong_answers_with_a_reason(learner, fragments):
    _rejected(ex.check_fill(learner), *fragments)


def test_missing_or_odd_names_are_not_solved_yet_and_do_not_raise():
    _rejected(ex.check_fill({}), "`copy_idx_mapping` is not defined yet")
    _rejected(ex.check_fill(None), "not defined yet")
    _rejected(ex.check_fill({"copy_idx_mapping": 3}), "should be a function")
    _rejected(ex.check_dflash(globals()), "`build_sample_mapping` is not defined yet")
    _rejected(ex.check_kernel({}), "`gumbel_kernel` is not defined yet")
    _rejected(ex.check_offset({}), "`q_offset` is not defined yet")


def test_the_audit_also_runs_the_learners_fill_when_the_kit_has_one():
    audit = pytest.importorskip("labkit.proofs.audit")
    if not hasattr(audit, "audit_speculator"):
        pytest.skip("labkit.proofs.audit has no audit_speculator")
    assert ex._audit("a", "copy_idx_mapping", fill_right, ex._fill_speculator, "x") is None
    # Which row and which draft step the report names first comes from the write trace: on a GPU
    # that is a race, so only the corrupted slot and its owner are asserted.
    _rejected(ex._audit("a", "copy_idx_mapping", fill_nothing, ex._fill_speculator, "idx_mapping[num_reqs:]"),
              "padding-invariance audit", "wrote draft_logits[7, ", "owned by row 6")
    _rejected(ex._audit("c", "build_sample_mapping", dflash_pad_zero, ex._dflash_speculator, "x"),
              "wrote draft_logits[0, ", "owned by row 0")


# ---------------------------------------------------------------------------------------- (c)

def dflash_right(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:] = -1


def dflash_pad_zero(idx_mapping, num_reqs, k, sample_idx_mapping):  # the skeleton: vLLM before the PR
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:] = 0


def dflash_no_pad(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)


def dflash_repeat(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat(k)
    sample_idx_mapping[live:] = -1


def dflash_pad_one_request(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live: live + k] = -1


def test_dflash_accepts_the_fix():
    _solved(ex.check_dflash(dflash_right))


@pytest.mark.parametrize("learner,fragments", [
    (dflash_pad_zero, ["padded sample row 14 holds 0", "request slot 0", "q of live row 0",
                       "sample_idx_mapping[num_reqs * k:] with -1"]),
    (dflash_no_pad, ["padded sample row 14 still holds slot 7", "live row 6"]),
    (dflash_repeat, ["Sample row 1 is live request row 0's draft step 1", "repeat_interleave"]),
    (dflash_pad_one_request, ["step 2", "padded sample row 12 still holds slot 7"]),
])
def test_dflash_rejects_wrong_answers_with_a_reason(learner, fragments):
    _rejected(ex.check_dflash(learner), *fragments)


# ---------------------------------------------------------------------------------------- (b)

@triton.jit
def kernel_right(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
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
def kernel_other_one(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                     vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=1.0)
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
def kernel_typo(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    temp = tl.load(temperature_ptr + slot, mask=is_vaild, other=0.0)  # noqa: F821 - the learner's typo
    tl.store(token_ptr + row, temp.to(tl.int64))


def kernel_without_jit(*args):
    pass


@needs_kernels
def test_kernel_accepts_the_fix():
    _solved(ex.check_kernel(kernel_right))


@needs_kernels
@pytest.mark.parametrize("learner,fragments", [
    (kernel_unmasked, ["stored into draft_logits[-1]", "Padded row 7 holds slot -1", "slot >= 0"]),
    (kernel_store_mask_only, ["padded row 7 (slot -1) loaded temperature[-1] and seeds[-1]",
                              "Masking the store is not enough", "other=0"]),
    (kernel_slot_above_zero, ["live row 0 holds slot 0", "not `slot > 0`"]),
    (kernel_store_without_in_vocab, ["past the end of draft_logits", "in_vocab"]),
    (kernel_seed_unmasked, ["`tl.load(seeds_ptr + slot)` at line 11", "without a mask"]),
    (kernel_other_one, ["padded row 7 (slot -1) sampled token", "plain argmax", "other=0"]),
    (kernel_typo, ["raised NameError at line 7 of `gumbel_kernel`", "is_vaild"]),
    (kernel_without_jit, ["plain Python function", "@triton.jit"]),
])
def test_kernel_rejects_wrong_answers_with_a_reason(learner, fragments):
    _rejected(ex.check_kernel(learner), *fragments)


# ---------------------------------------------------------------------------------------- (d)

@triton.jit
def offset_right(slot, step, stride_slot, stride_step):
    return slot.to(tl.int64) * stride_slot + step * stride_step


@triton.jit
def offset_wide_stride(slot, step, stride_slot, stride_step):
    return slot * stride_slot.to(tl.int64) + step * stride_step


@triton.jit
def offset_int32(slot, step, stride_slot, stride_step):  # the skeleton
    return slot * stride_slot + step * stride_step


@triton.jit
def offset_cast_too_late(slot, step, stride_slot, stride_step):
    return (slot * stride_slot + step * stride_step).to(tl.int64)


@triton.jit
def offset_unsigned(slot, step, stride_slot, stride_step):
    return slot.to(tl.uint32) * stride_slot + step * stride_step


@triton.jit
def offset_swapped_strides(slot, step, stride_slot, stride_step):
    return slot.to(tl.int64) * stride_step + step * stride_slot


@needs_kernels
def test_offset_accepts_int64_before_the_multiply():
    _solved(ex.check_offset(offset_right))
    _solved(ex.check_offset(offset_wide_stride))


@needs_kernels
@pytest.mark.parametrize("learner,fragments", [
    (offset_int32, ["slot 3533", "-2,147,351,936", "wrapped around at 2^31", "tl.int64 *before*"]),
    (offset_cast_too_late, ["wrapped around at 2^31", "too late"]),
    (offset_unsigned, ["slot 7067", "wrapped at 2^32", "4294967295"]),
    (offset_swapped_strides, ["small draft_logits", "should have stored into draft_logits[2, 1]"]),
])
def test_offset_rejects_wrong_answers_with_a_reason(learner, fragments):
    _rejected(ex.check_offset(learner), *fragments)


# ---------------------------------------------------------------------------------------- hints

def test_hints_give_more_away_step_by_step_and_never_raise():
    assert "Hint 1/3 for (a)" in repr(ex.hint("a"))
    assert "idx_mapping[num_reqs:] = -1" in repr(ex.hint("(a)", 3))
    assert "no exercise 'z'" in repr(ex.hint("z"))
    assert "hints 1 to 3" in repr(ex.hint("b", 9))
