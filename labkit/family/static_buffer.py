"""Case 4, as reported in SGLang #32555: a static buffer refreshed at one end and read at the other.

A draft-extend step: the hidden state of each live request's last accepted token goes in, the next
hidden state comes out, row by row (``tanh(x * weight + bias)``). The step was written for the
eager path, where it is handed the batch's own hidden states, and it takes the last ``rows`` rows
of what it is handed. Under a graph it is handed the graph's static input buffer, :data:`MAX_ROWS`
rows, into which the host copies the batch before each replay, at the front (``[:num_reqs]``).
Graphs of :data:`CAPTURE_SIZES` rows; batches of every size from 1 to :data:`MAX_ROWS`, one after
the other.

Forms: ``"buggy"`` reads ``[-rows:]`` of what it is handed; ``"fixed"`` reads ``[:rows]``, where the
host writes.
"""

from __future__ import annotations

import torch

from labkit.errors import one_of
from labkit.family.symptom import Symptom, differs, largest_difference
from labkit.graphs import GraphRunner
from labkit.proofs.audit import Buffer, audit_step
from labkit.proofs.audit_report import AuditReport

MAX_ROWS = 8
HIDDEN = 16
CAPTURE_SIZES = (2, 4, 8)
BATCH_SIZES = tuple(range(1, MAX_ROWS + 1))
FORMS = ("buggy", "fixed")
READER = "the next draft step"


class DraftExtend:
    """The step's persistent buffers, the host copy, and the row-wise work, in `form`."""

    def __init__(self, form: str = "buggy", *, device="cpu", use_graphs: bool = True, seed: int = 0):
        one_of("form", form, FORMS)
        self.form = form
        self.device = torch.device(device)
        self.use_graphs = use_graphs
        gen = torch.Generator().manual_seed(seed)
        self.weight = torch.randn(HIDDEN, generator=gen).to(self.device)
        self.bias = torch.randn(HIDDEN, generator=gen).to(self.device)
        self._gen = gen
        self.static_hidden = torch.zeros(MAX_ROWS, HIDDEN, device=self.device)  # the graph's input buffer
        self.next_hidden = torch.zeros(MAX_ROWS, HIDDEN, device=self.device)
        self.handed = self.static_hidden
        self.fresh = self.new_batch(MAX_ROWS)
        self.runner = GraphRunner(CAPTURE_SIZES, mode="full" if use_graphs else "eager", device=self.device)

    def new_batch(self, num_reqs: int) -> torch.Tensor:
        """The hidden states of a batch of `num_reqs` requests' last accepted tokens (seeded)."""
        self.fresh = torch.randn(num_reqs, HIDDEN, generator=self._gen).to(self.device)
        return self.fresh

    def copy_inputs(self) -> None:
        """The host side: eagerly, the step is handed the batch itself; under a graph, the batch is
        copied into the front of the static buffer, which the graph reads."""
        if self.use_graphs:
            self.static_hidden[: len(self.fresh)].copy_(self.fresh)
            self.handed = self.static_hidden
        else:
            self.handed = self.fresh

    def extend(self, rows: int) -> None:
        """The captured work on `rows` rows."""
        x = self.handed[-rows:] if self.form == "buggy" else self.handed[:rows]
        torch.mul(x, self.weight, out=self.next_hidden[:rows])
        self.next_hidden[:rows].add_(self.bias).tanh_()

    def step(self, rows: int) -> None:
        self.copy_inputs()
        self.extend(rows)

    def run(self, num_reqs: int) -> torch.Tensor:
        """One step for a new batch of `num_reqs` requests; the live rows' next hidden states (a copy)."""
        self.new_batch(num_reqs)
        self.copy_inputs()
        self.runner.run(num_reqs, self.extend)
        return self.next_hidden[:num_reqs].cpu().clone()

    def buffers(self, num_reqs: int) -> list[Buffer]:
        rows = range(num_reqs)
        return [Buffer("static_hidden", self.static_hidden, "row", rows),
                Buffer("next_hidden", self.next_hidden, "row", rows, "output", read_by=READER)]


def symptom(form: str = "buggy", *, device="cpu") -> Symptom:
    """The live rows, as (batch size, row), whose next hidden state differs from the eager run's."""
    graphed, eager = DraftExtend(form, device=device), DraftExtend(form, device=device, use_graphs=False)
    corrupted, total, largest = [], 0, 0.0
    for n in BATCH_SIZES:
        got, want = graphed.run(n), eager.run(n)
        for row in range(n):
            total += 1
            if differs(got[row], want[row]):
                corrupted.append((n, row))
                largest = max(largest, largest_difference(got[row], want[row]))
    return Symptom("live rows (batch size, row)", tuple(corrupted), total, largest)


def right_batch_sizes(form: str = "buggy", *, device="cpu") -> tuple[int, ...]:
    """The batch sizes whose every live row matches the eager run."""
    wrong = {n for n, _ in symptom(form, device=device).corrupted}
    return tuple(n for n in BATCH_SIZES if n not in wrong)


def audit(form: str = "buggy", num_reqs: int = 3, *, device="cpu") -> AuditReport:
    """The padding-invariance audit of one step of `num_reqs` live rows in `form`, as the graph runs it."""
    case = DraftExtend(form, device=device)
    case.new_batch(num_reqs)
    return audit_step(case.step, case.buffers(num_reqs), live_rows=num_reqs,
                      padded_rows=case.runner.rows_for(num_reqs), name=f"draft extend, {form}")
