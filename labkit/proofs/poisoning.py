"""The audit's poison and comparison: what fills the state a batch does not own, and what counts as a difference.

:mod:`labkit.proofs.audit` poisons every part of a step's buffers that the batch does not own
(:func:`poison_buffers`), runs the step unpadded and padded, and compares the live records of the
two runs bit for bit (:func:`compare`). Buffers are described by :class:`labkit.proofs.audit.Buffer`;
this module reads only their attributes.
"""

from __future__ import annotations

import torch

STALE = "stale"
DEFAULT_POISONS = (STALE, 1, 2)
FLOAT_POISON_SCALE = 4.0
STEP_RESULT = "step result"  # the name under which the tensor a step returns is compared


# -- poisoning --------------------------------------------------------------------------------

def poison_like(buf, shape, gen: torch.Generator) -> torch.Tensor:
    t = buf.tensor
    if t.dtype == torch.bool:
        out = torch.randint(0, 2, shape, generator=gen).bool()
    elif t.is_floating_point():
        if buf.values is None:
            out = torch.randn(shape, generator=gen, dtype=torch.float64) * FLOAT_POISON_SCALE
        else:
            lo, hi = buf.values
            out = lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)
    else:
        lo, hi = buf.values
        out = torch.randint(int(lo), int(hi), shape, generator=gen, dtype=torch.int64)
    return out.to(dtype=t.dtype, device=t.device)


def stale_slots(count: int, live_slots: list[int]) -> list[int]:
    """What a shrinking batch leaves in padded rows: live slots, the last row's first."""
    return [live_slots[-1 - i % len(live_slots)] for i in range(count)]


def poison_buffers(buffers: list, poison, live_slots: list[int]) -> None:
    seed = 0 if poison == STALE else int(poison)
    gen = torch.Generator().manual_seed(seed)
    for buf in buffers:
        t = buf.tensor
        if buf.role == "output":
            t.copy_(poison_like(buf, t.shape, gen))
            continue
        rows = buf.non_live
        if not rows:
            continue
        if buf.role == "mapping" and poison == STALE and live_slots:
            values = torch.tensor(stale_slots(len(rows), live_slots), dtype=t.dtype, device=t.device)
        else:
            values = poison_like(buf, (len(rows), *t.shape[1:]), gen)
        t[torch.tensor(rows, device=t.device)] = values


def restore(buffers, saved) -> None:
    # In place: a captured CUDA graph holds these very tensors' addresses.
    for b in buffers:
        b.tensor.copy_(saved[b.name])


# -- comparing runs -------------------------------------------------------------------------

def capture(outputs, result, live_rows) -> dict:
    got = {b.name: b.tensor.cpu().clone() for b in outputs}
    if isinstance(result, torch.Tensor):
        got[STEP_RESULT] = result[:live_rows].cpu().clone()
    return got


def differs(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact inequality, counting NaN equal to NaN in the same place (a step may produce NaN in
    both runs; that is no difference)."""
    if a.is_floating_point():
        nan_a, nan_b = a.isnan(), b.isnan()
        if not torch.equal(nan_a, nan_b):
            return True
        return not torch.equal(a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0))
    return not torch.equal(a, b)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.is_floating_point():
        d = (a.double() - b.double()).abs()
        return float(d.nan_to_num(nan=float("inf")).max()) if d.numel() else 0.0
    return float((a.long() - b.long()).abs().max()) if a.numel() else 0.0


def compare(outputs, reference, got, live_rows):
    """(buffer name, record index, max |difference|) for every live record that differs."""
    bad = []
    for buf in outputs:
        ref_records = dict(buf.records(reference[buf.name]))
        for index, rec in buf.records(got[buf.name]):
            if differs(rec, ref_records[index]):
                bad.append((buf.name, index, max_diff(rec, ref_records[index])))
    if STEP_RESULT in reference and STEP_RESULT in got:
        a, b = reference[STEP_RESULT], got[STEP_RESULT]
        if a.shape != b.shape:
            bad.append((STEP_RESULT, (0,), float("inf")))
        else:
            for i in range(min(live_rows, a.shape[0])):
                if differs(a[i], b[i]):
                    bad.append((STEP_RESULT, (i,), max_diff(a[i], b[i])))
    return bad
