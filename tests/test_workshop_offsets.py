"""Exercise (d), the int64 offset: Triton helpers and torch functions written as a learner would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from workshop_helpers import assert_rejected, assert_solved, kept_answers  # noqa: F401 (autouse)

import labkit  # noqa: F401  (first: sets TRITON_INTERPRET)
from labkit import backends
from labkit.workshop import checkers as ex
from labkit.workshop.checkers import tl, triton

KERNELS_RUN = backends.HAS_TRITON and (backends.KERNELS_INTERPRETED or backends.HAS_CUDA)
needs_kernels = pytest.mark.skipif(not KERNELS_RUN, reason="Triton kernels cannot run here")

# ---------------------------------------------------------------------------------------- Triton


@triton.jit
def offset_right(slot, step, stride_slot, stride_step):
    return slot.to(tl.int64) * stride_slot + step * stride_step


@triton.jit
def offset_wide_stride(slot, step, stride_slot, stride_step):
    return slot * stride_slot.to(tl.int64) + step * stride_step


@triton.jit
def offset_everything_wide(slot, step, stride_slot, stride_step):
    return slot.to(tl.int64) * stride_slot.to(tl.int64) + step.to(tl.int64) * stride_step.to(tl.int64)


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


@triton.jit
def offset_without_step(slot, step, stride_slot, stride_step):
    return slot.to(tl.int64) * stride_slot


@needs_kernels
@pytest.mark.parametrize("learner", [offset_right, offset_wide_stride, offset_everything_wide])
def test_offsets_widened_before_the_multiply_are_accepted(learner):
    assert_solved(ex.check_offset(learner))


# Loads the harness kernels as the GPU gets them: compiled JITFunctions (no TRITON_INTERPRET, no labkit).
_COMPILED_PARAMS = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("offset_kernels", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({name: sorted(p.name for p in getattr(module, name).params if p.do_not_specialize)
                  for name in ("offsets_kernel", "store_kernel")}))
"""


@pytest.mark.skipif(not backends.HAS_TRITON, reason="needs Triton")
def test_compiled_the_integers_given_to_the_helper_stay_tensors():
    # Compiled, Triton makes an integer argument equal to 1 (the small store's step) a Python
    # constant unless told not to, and `step.to(tl.int64)` then fails. The interpreter never does
    # that, so here the kernels are checked as a GPU compiles them; on a GPU,
    # test_offsets_widened_before_the_multiply_are_accepted launches them for real.
    path = Path(__file__).resolve().parent.parent / "labkit" / "workshop" / "harness" / "offset_kernels.py"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", _COMPILED_PARAMS, str(path)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    learner_integers = ["step", "stride_slot", "stride_step"]
    assert json.loads(out.stdout) == {"offsets_kernel": learner_integers, "store_kernel": learner_integers}


@needs_kernels
@pytest.mark.parametrize("learner,fragments", [
    (offset_cast_too_late, ["slot 3533", "-2,147,351,936", "wrapped around at 2^31"]),
    (offset_unsigned, ["slot 7067", "wrapped at 2^32"]),
    (offset_swapped_strides, ["small draft_logits", "should have stored into draft_logits[2, 1]"]),
    (offset_without_step, ["small draft_logits", "row 0 (slot 2)"]),
])
def test_wrong_offsets_are_rejected_with_a_true_reason(learner, fragments):
    assert_rejected(ex.check_offset(learner), *fragments)


@needs_kernels
def test_the_untouched_offset_first_names_the_symptom_not_the_fix():
    result = ex.check_offset(offset_int32)
    assert_rejected(result, "for slot 3533", "is 2,147,615,360", "came out as -2,147,351,936",
                    "8.0 GiB before the start of the buffer", "wrapped around at 2^31")
    assert "int64" not in result.message and "int64" in repr(ex.hint("d", 3))


@needs_kernels
def test_a_plain_function_where_triton_runs_asks_for_the_decorator():
    def q_offset(slot, step, stride_slot, stride_step):
        return slot * stride_slot + step * stride_step

    assert_rejected(ex.check_offset(q_offset), "plain Python function", "@triton.jit")


# ---------------------------------------------------------------------------------------- torch

def torch_right(slot, step, stride_slot, stride_step):
    return slot.to(torch.int64) * stride_slot + step * stride_step


def torch_long(slot, step, stride_slot, stride_step):
    return slot.long() * stride_slot + step * stride_step


def torch_both_wide(slot, step, stride_slot, stride_step):
    return slot.to(torch.int64) * torch.tensor(stride_slot, dtype=torch.int64) + step * stride_step


def torch_wide_scalar_tensor(slot, step, stride_slot, stride_step):
    # A 0-d int64 tensor does not widen an int32 tensor in torch's type promotion: still int32.
    return slot * torch.tensor(stride_slot, dtype=torch.int64) + step * stride_step


def torch_int32(slot, step, stride_slot, stride_step):  # the torch skeleton
    return slot * stride_slot + step * stride_step


def torch_cast_too_late(slot, step, stride_slot, stride_step):
    return (slot * stride_slot + step * stride_step).to(torch.int64)


def torch_float(slot, step, stride_slot, stride_step):
    return (slot.float() * stride_slot + step * stride_step).to(torch.int64)


def torch_swapped(slot, step, stride_slot, stride_step):
    return slot.long() * stride_step + step * stride_slot


def torch_without_step(slot, step, stride_slot, stride_step):
    return slot.long() * stride_slot


def torch_typo(slot, step, stride_slot, stride_step):
    return slot.to(torch.int46) * stride_slot + step * stride_step


@pytest.fixture
def no_triton(monkeypatch):
    monkeypatch.setattr(backends, "HAS_TRITON", False)


@pytest.mark.parametrize("learner", [torch_right, torch_long, torch_both_wide])
def test_torch_offsets_widened_first_are_accepted_without_triton(no_triton, learner):
    assert_solved(ex.check_offset(learner))


@pytest.mark.parametrize("learner,fragments", [
    (torch_int32, ["slot 3533", "came out as -2,147,351,936", "wrapped around at 2^31"]),
    (torch_cast_too_late, ["slot 3533", "wrapped around at 2^31"]),
    (torch_wide_scalar_tensor, ["slot 3533", "wrapped around at 2^31"]),
    (torch_float, ["in a draft_logits of [max_num_reqs, 4, 151936]", "but yours came out as"]),
    (torch_swapped, ["should have stored into draft_logits[2, 1]"]),
    (torch_without_step, ["small draft_logits"]),
    (torch_typo, ["raised AttributeError", "int46"]),
])
def test_wrong_torch_offsets_are_rejected_with_a_true_reason(no_triton, learner, fragments):
    assert_rejected(ex.check_offset(learner), *fragments)


@needs_kernels
def test_without_triton_a_triton_helper_is_refused_in_words(no_triton):
    assert_rejected(ex.check_offset(offset_right), "this session cannot run Triton", "plain torch function")


@needs_kernels
def test_a_solved_offset_shows_the_prs_int64_offset_beside_yours():
    result = ex.check_offset(offset_wide_stride)
    assert_solved(result)
    assert "slot.to(tl.int64) * q_stride_slot" in result.reveal.fix.text
    assert "stride_slot.to(tl.int64)" in result.reveal.your_text()  # the helper's own source, from `.fn`


def test_a_failed_offset_shows_no_fix(no_triton):
    result = ex.check_offset(torch_int32)
    assert_rejected(result, "wrapped around at 2^31")
    assert result.reveal is None and "int64" not in result.message
