"""Exercise (d): the offset ``slot * stride_slot + step * stride_step`` without int32 overflow (vLLM #47383).

The learner writes ``q_offset(slot, step, stride_slot, stride_step)``: a ``@triton.jit`` helper
(slot is an int32 scalar loaded from the int32 mapping, the strides int32 arguments), or where
Triton cannot run a torch function with the same arithmetic (slot an int32 tensor of slots, the
rest Python ints: ``int32 tensor * int`` stays int32 in torch and wraps, as it does in a kernel).

The checker first stores through the offset into a small ``draft_logits [4, 3, 5]`` (does it
address the right row at all?), then computes it for vLLM-sized strides (k = 4 draft steps of a
151936-token vocabulary) and compares with exact Python integers. No 8 GiB buffer is needed: the
offsets themselves are stored.
"""

from __future__ import annotations

import torch

from labkit.workshop.exercises import record
from labkit.workshop.exercises.reveal import keeps_answer
from labkit.workshop.feedback import (
    CheckResult,
    explain_exception,
    is_triton_kernel,
    never_raises,
    not_yet,
    resolve,
    solved,
)
from labkit.workshop.harness.launches import kernel_device, triton_kernels_run

NAME = record.exercise("d").versions[0].function
BIG_V, BIG_K = 151936, 4  # vLLM-sized draft_logits: [max_num_reqs, 4, 151936] (Qwen's vocabulary)
BIG_SLOTS = (0, 1, 3533, 3534, 4095, 7066, 7067, 9000)
BIG_STEP = 3
SMALL_SHAPE = (4, 3, 5)
SMALL_MAPPING = (2, 0, 3)
SMALL_STEP = 1


def first_overflowing_slot(k: int = BIG_K, vocab: int = BIG_V) -> int:
    """The first slot whose ``slot * stride_slot`` (stride_slot = k * vocab) no longer fits in int32:
    what notebook 07's (d) and its checker's verdict say (3534 for k = 4 and V = 151936)."""
    return (2**31 - 1) // (k * vocab) + 1


@never_raises("d")
@keeps_answer("d")
def check_offset(q_offset) -> CheckResult:
    """(d) `q_offset(slot, step, stride_slot, stride_step)`: the element offset of draft_logits[slot, step, 0].

    Takes the function, or a namespace such as ``globals()`` where it looks up ``q_offset``.
    Solved, the result shows the PR's fix beside your code.
    """
    fn, name, verdict = resolve("d", q_offset, NAME)
    if verdict is not None:
        return verdict
    is_kernel = is_triton_kernel(fn)
    if is_kernel and not triton_kernels_run():
        return not_yet("d", f"`{name}` is a Triton helper, but this session cannot run Triton (no Triton, or "
                            "LABKIT_BACKEND=torch): write it as a plain torch function instead (no @triton.jit; "
                            "`slot` is then an int32 tensor).")
    if not is_kernel and triton_kernels_run():
        return not_yet("d", f"`{name}` is a plain Python function: a Triton helper needs `@triton.jit` above its "
                            "`def`.")
    variant = "triton" if is_kernel else "torch"
    try:
        stored = _small_store(fn, variant)
    except Exception as err:  # explained in words, never raised
        return not_yet("d", "storing through your offset into a small draft_logits [4, 3, 5]: "
                            + explain_exception(err, fn, name))
    for row, slot in enumerate(SMALL_MAPPING):
        expect = torch.arange(SMALL_SHAPE[2], dtype=torch.float32) + row * 1000
        if not torch.equal(stored[slot, SMALL_STEP].cpu(), expect):
            strides = (SMALL_SHAPE[1] * SMALL_SHAPE[2], SMALL_SHAPE[2])
            return not_yet("d", f"with a small draft_logits [4, 3, 5] (strides {strides[0]}, {strides[1]}), row "
                                f"{row} (slot {slot}) should have stored into draft_logits[{slot}, {SMALL_STEP}], "
                                "but the values landed elsewhere: the offset does not address [slot, step, 0].")
    try:
        got = _big_offsets(fn, variant)
    except Exception as err:  # explained in words, never raised
        return not_yet("d", explain_exception(err, fn, name))
    return _judge_big(got)


def _small_store(fn, variant: str) -> torch.Tensor:
    k, v = SMALL_SHAPE[1], SMALL_SHAPE[2]
    if variant == "triton":
        from labkit.workshop.harness.offset_kernels import store_kernel

        device = kernel_device()
        mapping = torch.tensor(SMALL_MAPPING, dtype=torch.int32, device=device)
        q = torch.full(SMALL_SHAPE, -1.0, device=device)
        store_kernel[(len(SMALL_MAPPING),)](q, mapping, q.stride(0), q.stride(1), SMALL_STEP, v, OFFSET=fn, BLOCK_V=8)
        return q
    q = torch.full(SMALL_SHAPE, -1.0)
    offsets = torch.as_tensor(fn(torch.tensor(SMALL_MAPPING, dtype=torch.int32), SMALL_STEP, k * v, v))
    lanes = torch.arange(v)
    values = torch.arange(len(SMALL_MAPPING))[:, None] * 1000.0 + lanes
    q.view(-1)[offsets.to(torch.int64).reshape(-1, 1) + lanes] = values
    return q


def _big_offsets(fn, variant: str) -> list[int]:
    stride_slot, stride_step = BIG_K * BIG_V, BIG_V
    if variant == "triton":
        from labkit.workshop.harness.offset_kernels import offsets_kernel

        device = kernel_device()
        slots = torch.tensor(BIG_SLOTS, dtype=torch.int32, device=device)
        out = torch.zeros(len(BIG_SLOTS), dtype=torch.int64, device=device)
        offsets_kernel[(len(BIG_SLOTS),)](slots, out, stride_slot, stride_step, BIG_STEP, OFFSET=fn)
        return out.tolist()
    result = fn(torch.tensor(BIG_SLOTS, dtype=torch.int32), BIG_STEP, stride_slot, stride_step)
    return [int(x) for x in torch.as_tensor(result).reshape(-1).tolist()]


def _judge_big(got: list[int]) -> CheckResult:
    stride_slot, stride_step = BIG_K * BIG_V, BIG_V
    results = [(slot, slot * stride_slot + BIG_STEP * stride_step, g) for slot, g in zip(BIG_SLOTS, got, strict=True)]
    wrong = [(slot, want, g) for slot, want, g in results if want != g]
    if not wrong:
        return solved("d", f"Your offsets are exact up to slot {max(BIG_SLOTS)} with vLLM-sized strides "
                           f"(slot * stride_slot passes 2^31 - 1 from slot {first_overflowing_slot()} on), and stores "
                           "land in the right rows.")
    slot, want, g = wrong[0]
    how = ""
    if all(g == w % 2**32 for _, w, g in wrong) and any(2**31 <= w < 2**32 for _, w, _ in results):
        how = (" It wrapped at 2^32: offsets between 2^31 and 2^32 came out right, larger ones did not, so the "
               "arithmetic ran in an unsigned 32-bit type.")
    elif g == ((want + 2**31) % 2**32) - 2**31:
        how = " It wrapped around at 2^31: the arithmetic that produced it ran in int32."
    gib = want * 4 / 2**30
    landed = (f"{-g * 4 / 2**30:.1f} GiB before the start of the buffer" if g < 0 else
              f"{g * 4 / 2**30:.1f} GiB into it, in another slot's rows")
    return not_yet("d", f"for slot {slot} in a draft_logits of [max_num_reqs, {BIG_K}, {BIG_V}] (stride_slot = "
                        f"{stride_slot:,}), the offset of [{slot}, {BIG_STEP}, 0] is {want:,} (float32: {gib:.1f} GiB "
                        f"into the buffer), but yours came out as {g:,}: the store would land {landed}.{how} vLLM "
                        "#47383 fixed this offset in its verification kernels.")
