"""The padding-invariance audit as a recipe, applied to a step written from scratch.

The step: a serving engine keeps, for every request, the log-probability of the token it just
sampled and that token's rank (how many tokens the model scored higher) -- what an API returns as
`logprobs`. The two numbers live in persistent buffers indexed by the request's state slot, where
the output processor reads them later. Each engine step

1. on the host, copies the live rows' slots into a persistent row -> slot mapping;
2. on the device, inside a graph captured for `rows` rows, computes each row's log-softmax and
   stores the sampled token's logprob and rank at the row's slot.

A batch of 7 live requests replays the graph captured for 8, so row 7 runs too. The buggy form
rewrites only the live rows of the mapping, so row 7 still names a slot from an earlier, larger
batch -- with the audit's "stale" poison, the slot of live row 6 -- and its store lands on that
request's numbers. The fixed form fills the padded rows with -1 on the host and skips a row whose
slot is negative. This is the shape of vLLM PR #47066 in a step that has nothing to do with
drafting.

The audit (labkit.proofs.audit) needs only `step(rows)` and a description of each buffer. It
poisons everything the batch does not own, runs the step on the live rows (the reference: what an
eager run computes) and on the padded rows (what the graph computes), and compares the live part of
every output. Then this script walks every capture size with every live count that pads into it.

    python examples/audit_recipe.py                   # the step in plain torch (any CPU)
    python examples/audit_recipe.py --kernel triton   # the same step as a Triton kernel, run in
                                                      # Triton's CPU interpreter

docs/AUDIT_RECIPE.md explains the recipe and how to write the same test for a GPU serving engine.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import random
from dataclasses import dataclass, field

import torch

from labkit import backends  # first: it decides whether Triton runs in its interpreter
from labkit.proofs.audit import STALE, Buffer, audit_step
from labkit.proofs.audit_report import AuditReport

CAPTURE_SIZES = (1, 2, 4, 8)  # the graphs the engine captured
NUM_SLOTS = 8  # request-state slots (max_num_reqs)
MAX_ROWS = max(CAPTURE_SIZES)  # rows of the row-indexed buffers
VOCAB = 32
POISONS = (STALE, 1, 2)
# docs/MECHANICS.md's step t+1: slot 3's request finished, the rows below it shifted up, and 7 live
# requests replay the graph captured for 8.
HEADLINE_BATCH = (0, 1, 2, 4, 5, 6, 7)
# name -> (host fills padded rows with -1, kernel skips rows whose slot is negative). Fill without
# the mask is left out: an unmasked kernel would store before the buffers' start (see scatter_torch).
FORMS = {"buggy": (False, False), "mask-only": (False, True), "fixed": (True, True)}
KERNELS = ("torch", "triton")


def rows_for(num_reqs: int) -> int:
    """The rows a full graph runs for `num_reqs` live requests: the smallest capture size that fits."""
    return CAPTURE_SIZES[bisect.bisect_left(CAPTURE_SIZES, num_reqs)]


# -- the step's device part, twice ------------------------------------------------------------

def scatter_torch(logits, sampled, idx_mapping, out_logprob, out_rank, *, rows: int, mask: bool) -> None:
    """One "program" per row, in grid order (as Triton's interpreter runs a kernel's programs).

    Rows store one after another, so of two rows holding one slot the later one's store lands last.
    A vectorised `out[slots] = x` with a repeated slot would leave the winner unspecified.
    """
    for row in range(rows):
        slot = int(idx_mapping[row])
        if mask and slot < 0:
            continue  # the fix, in the kernel: a row that serves no request stores nothing by slot
        if slot < 0:
            # On a GPU an unmasked store at slot -1 lands before the buffer's start; Python indexing
            # would silently wrap it to the last slot instead. Refuse rather than hide it.
            raise IndexError(f"row {row} holds slot {slot} and the kernel has no mask: out-of-bounds store")
        logprobs = torch.log_softmax(logits[row].to(torch.float32), dim=-1)
        chosen = logprobs[sampled[row]]
        out_logprob[slot] = chosen
        out_rank[slot] = int((logprobs > chosen).sum())


@functools.cache
def _triton_kernel():
    """The same step as a @triton.jit kernel, built on first use (after labkit chose the mode)."""
    import triton
    import triton.language as tl

    @triton.jit
    def logprob_scatter_kernel(logits_ptr, logits_stride, sampled_ptr, mapping_ptr, out_logprob_ptr,
                               out_rank_ptr, vocab_size, BLOCK_V: tl.constexpr, MASK: tl.constexpr):
        row = tl.program_id(0)
        slot = tl.load(mapping_ptr + row).to(tl.int64)
        offs = tl.arange(0, BLOCK_V)
        x = tl.load(logits_ptr + row * logits_stride + offs, mask=offs < vocab_size, other=float("-inf"))
        x = x.to(tl.float32)
        top = tl.max(x, axis=0)
        logprobs = x - (top + tl.log(tl.sum(tl.exp(x - top), axis=0)))
        token = tl.load(sampled_ptr + row)
        chosen = tl.sum(tl.where(offs == token, logprobs, 0.0), axis=0)
        rank = tl.sum((logprobs > chosen).to(tl.int32), axis=0)
        if MASK:
            valid = slot >= 0  # the fix, in the kernel
            tl.store(out_logprob_ptr + slot, chosen, mask=valid)
            tl.store(out_rank_ptr + slot, rank, mask=valid)
        else:
            tl.store(out_logprob_ptr + slot, chosen)
            tl.store(out_rank_ptr + slot, rank)

    return triton, logprob_scatter_kernel


def scatter_triton(logits, sampled, idx_mapping, out_logprob, out_rank, *, rows: int, mask: bool) -> None:
    if not mask and bool((idx_mapping[:rows] < 0).any()):
        raise IndexError("a row holds slot -1 and the kernel has no mask: out-of-bounds store")
    triton, kernel = _triton_kernel()
    kernel[(rows,)](logits, logits.stride(0), sampled, idx_mapping, out_logprob, out_rank, logits.shape[1],
                    BLOCK_V=triton.next_power_of_2(logits.shape[1]), MASK=mask)


def triton_interpreted() -> bool:
    """Whether the Triton form can run here as this script expects: in Triton's CPU interpreter,
    whose programs run in grid order (compiled on a GPU, two stores to one slot race)."""
    return backends.KERNELS_INTERPRETED


# -- the step, its buffers, the audit -----------------------------------------------------------

class LogprobScatter:
    """The persistent buffers of the step and the step itself, for one batch of live slots."""

    def __init__(self, live_slots, *, form: str = "fixed", kernel: str = "torch", seed: int = 0):
        if form not in FORMS:
            raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
        if kernel == "triton" and not triton_interpreted():
            raise RuntimeError("the Triton form runs in Triton's interpreter: install Triton and set "
                               "LABKIT_BACKEND=interpreter")
        self.fill, self.mask = FORMS[form]
        self.launch = scatter_triton if kernel == "triton" else scatter_torch
        self.live_slots = [int(s) for s in live_slots]
        g = torch.Generator().manual_seed(seed)
        # Indexed by batch row: this step's model output and sampled tokens.
        self.logits = 3 * torch.randn(MAX_ROWS, VOCAB, generator=g)
        self.sampled = torch.randint(0, VOCAB, (MAX_ROWS,), generator=g)
        # Row -> slot. Signed on purpose: -1 says "no request in this row".
        self.idx_mapping = torch.zeros(MAX_ROWS, dtype=torch.int32)
        # Indexed by request slot: the request's state, read later by the output processor.
        self.sampled_logprob = torch.zeros(NUM_SLOTS, dtype=torch.float32)
        self.sampled_rank = torch.zeros(NUM_SLOTS, dtype=torch.int32)

    def copy_inputs(self) -> None:
        """The host part, before every replay: this step's live slots into the persistent mapping."""
        n = len(self.live_slots)
        self.idx_mapping[:n] = torch.tensor(self.live_slots, dtype=torch.int32)
        if self.fill:
            self.idx_mapping[n:] = -1  # the fix, on the host: padded rows name no request

    def step(self, rows: int) -> None:
        """One engine step as the graph runs it: the host copy, then the device part on `rows` rows."""
        self.copy_inputs()
        self.launch(self.logits, self.sampled, self.idx_mapping, self.sampled_logprob, self.sampled_rank,
                    rows=rows, mask=self.mask)

    def buffers(self) -> list[Buffer]:
        """Each buffer, how it is indexed, and the part this batch owns."""
        rows, slots = range(len(self.live_slots)), self.live_slots
        return [
            Buffer("logits", self.logits, "row", rows),
            Buffer("sampled", self.sampled, "row", rows, values=(0, VOCAB)),
            Buffer("idx_mapping", self.idx_mapping, "row", rows, "mapping", values=(0, NUM_SLOTS)),
            Buffer("sampled_logprob", self.sampled_logprob, "slot", slots, "output"),
            Buffer("sampled_rank", self.sampled_rank, "slot", slots, "output", values=(0, VOCAB)),
        ]


def audit(form: str, live_slots=HEADLINE_BATCH, *, kernel: str = "torch", poisons=POISONS) -> AuditReport:
    """Audit one form of the step on one batch (live slots in row order), padded as the graph pads it."""
    scatter = LogprobScatter(live_slots, form=form, kernel=kernel)
    n = len(scatter.live_slots)
    return audit_step(scatter.step, scatter.buffers(), live_rows=n, padded_rows=rows_for(n), poisons=poisons,
                      name=f"{form} logprob scatter ({kernel})")


# -- walking the capture sizes ------------------------------------------------------------------

def batch_shapes(size: int, n: int, rng: random.Random) -> dict[str, list[int]]:
    """Batches of `n` live requests, in row order, that replay the graph captured for `size`."""
    lost = size - n  # requests of a batch of `size` that finished, from the middle: the rows shift up
    cut = n // 2
    return {
        "in order": list(range(n)),
        "shrunk": [s for i, s in enumerate(range(size)) if not cut <= i < cut + lost],
        "reordered": rng.sample(range(NUM_SLOTS), n),
    }


@dataclass
class Case:
    size: int  # the capture size replayed
    live_slots: list[int]
    shape: str
    report: AuditReport

    @property
    def padded(self) -> bool:
        return len(self.live_slots) < self.size


def sweep(form: str, *, kernel: str = "torch", seed: int = 0) -> list[Case]:
    """Every capture size, with every live count that pads into it, in each batch shape."""
    rng = random.Random(seed)
    cases = []
    smaller = 0
    for size in CAPTURE_SIZES:
        for n in range(smaller + 1, size + 1):
            for shape, live in batch_shapes(size, n, rng).items():
                cases.append(Case(size, live, shape, audit(form, live, kernel=kernel)))
        smaller = size
    return cases


@dataclass
class Results:
    kernel: str
    reports: dict[str, AuditReport] = field(default_factory=dict)  # form -> the headline batch's report
    sweeps: dict[str, list[Case]] = field(default_factory=dict)  # form -> every case of the walk


def sweep_table(sweeps: dict[str, list[Case]]) -> str:
    lines = [f"{'form':<10} {'cases':>5} {'padded':>6} {'failed':>6} {'failed unpadded':>15}"]
    for form, cases in sweeps.items():
        failed = [c for c in cases if not c.report.passed]
        lines.append(f"{form:<10} {len(cases):>5} {sum(c.padded for c in cases):>6} {len(failed):>6} "
                     f"{sum(not c.padded for c in failed):>15}")
    return "\n".join(lines)


def main(argv=None) -> Results:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=KERNELS, default="torch",
                        help="the device part in plain torch (default) or as a Triton kernel in the interpreter")
    parser.add_argument("--no-sweep", action="store_true", help="audit the headline batch only")
    args = parser.parse_args(argv)
    if args.kernel == "triton" and not triton_interpreted():
        parser.error("--kernel triton runs in Triton's CPU interpreter: install Triton and set "
                     "LABKIT_BACKEND=interpreter")

    results = Results(args.kernel)
    n = len(HEADLINE_BATCH)
    print(f"batch: live slots {list(HEADLINE_BATCH)} in rows 0..{n - 1}, replayed in the graph of {rows_for(n)} "
          f"rows; the step in {args.kernel}\n")
    for form in ("buggy", "fixed"):
        report = results.reports[form] = audit(form, kernel=args.kernel)
        print(report, end="\n\n")

    if not args.no_sweep:
        for form in FORMS:
            results.sweeps[form] = sweep(form, kernel=args.kernel)
        print(f"every capture size {CAPTURE_SIZES} with every live count that pads into it; batches in "
              "order, shrunk (requests finished in the middle) and reordered:")
        print(sweep_table(results.sweeps))
        first = next((c for c in results.sweeps["buggy"] if not c.report.passed), None)
        if first is not None:
            print(f"\nsmallest failing case of the buggy form: live slots {first.live_slots} ({first.shape}) in "
                  f"the graph of {first.size}:\n{first.report.sentences()[0]}")
    return results


if __name__ == "__main__":
    main()
