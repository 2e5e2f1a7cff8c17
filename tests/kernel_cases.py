"""What the core tests share: where they run, what order stores land in, and random launch inputs.

The tests run on the kit's default device: the GPU under compiled Triton (real CUDA graphs), the
CPU under the interpreter and the torch backend. Two things differ on a GPU and the tests say so:

* Program order. The interpreter and the torch reference run rows one after another, so when two
  rows store to one q slot the later row wins. On a GPU the rows race: either may win, element by
  element. Tests keep the strict "last row wins" form where ORDERED and otherwise assert what holds
  on both (how many rows stored; q holds a value one of them computed).
* Fast math. The compiled kernel scales by a reciprocal (within 1.5 ulp of logits / T), so q is
  compared with Q_TOL: bit for bit on the CPU, a relative 1e-6 on the GPU.
"""

from __future__ import annotations

import torch

from labkit import backends

KERNEL_BACKEND = "interpreter" if backends.KERNELS_INTERPRETED else backends.backend()
DEVICE = backends.default_device()
ORDERED = KERNEL_BACKEND != "triton"
Q_TOL = dict(rtol=0, atol=0) if ORDERED else dict(rtol=1e-6, atol=0)


def launch_case(seed, num_rows, vocab, max_num_reqs=12, padded=0, stale=False, greedy_slots=()):
    """Random launch inputs on DEVICE; the last `padded` rows are padding (-1, or a stale live slot)."""
    g = torch.Generator().manual_seed(seed)
    live = num_rows - padded
    slots = torch.randperm(max_num_reqs, generator=g)[:live].to(torch.int32)
    if stale and live:
        pad = slots[torch.randint(0, live, (padded,), generator=g)]
    else:
        pad = torch.full((padded,), -1, dtype=torch.int32)
    mapping = torch.cat([slots, pad])
    temperature = 0.5 + torch.rand(max_num_reqs, generator=g)
    for s in greedy_slots:
        temperature[s] = 0.0
    seeds = torch.randint(0, 2**62, (max_num_reqs,), generator=g)
    logits = 3 * torch.randn(num_rows, vocab, generator=g)
    positions = torch.randint(0, 5000, (num_rows,), generator=g)
    return tuple(t.to(DEVICE) for t in (logits, mapping, temperature, seeds, positions))


def scaled_rows(logits, mapping, temperature, rows):
    """What each of `rows` stores as q: its logits divided by its slot's temperature (greedy: as is)."""
    out = []
    for r in rows:
        t = float(temperature[int(mapping[r])])
        out.append(logits[r].float().cpu() / t if t != 0 else logits[r].float().cpu())
    return out


def assert_q_from_rows(q, candidates, message=""):
    """Every element of q equals (within Q_TOL) the same element of one of the candidate rows.

    The race-free statement of a collision: whichever row's store landed last, element by element,
    q holds what some row holding that slot computed, and nothing else.
    """
    q = q.float().cpu()
    rtol = Q_TOL["rtol"]
    close = torch.zeros_like(q, dtype=torch.bool)
    for c in candidates:
        close |= (q - c).abs() <= rtol * c.abs()
    assert bool(close.all()), message or "q holds a value that no row holding its slot computed"
