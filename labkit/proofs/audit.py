"""A padding-invariance audit: the test that would have caught PR #47066.

Memory checkers (compute-sanitizer, triton-viz's sanitizer) flag accesses outside a buffer. The
stale-slot bug never leaves a buffer: padded row 7 stores to `draft_logits[7]`, a perfectly valid
address that happens to belong to the request in live row 6. What is wrong is *whose* data lands
there. So this audit checks a property instead of addresses:

    A step's live outputs must not depend on anything outside its live inputs.

Concretely, for one batch (which rows are live, which slots they own):

1. poison every part of the persistent buffers that the batch does not own -- padded rows,
   unused slots, and the whole of every output buffer -- with random values (several poisons);
2. run the step *unpadded* (exactly the live rows, as an eager run would) -> the reference;
3. restore the same poisoned state and run it *padded* (the graph's row count) -> the audited run;
4. every live part of every output (sampled tokens of live rows, live slots of slot-indexed
   buffers such as `draft_logits`) must be bit-identical between the two.

Mapping buffers (row -> slot, like `idx_mapping`) are poisoned with *valid* slot numbers, because
that is what stale rows hold; the first poison, ``"stale"``, puts live slots into every padded row,
exactly as a batch that shrank leaves them. When a live part differs, the report says which
buffer, which slot and which row wrote it, in words:
``padded row 7 wrote draft_logits[7, 0, :] owned by row 6``. The writer comes from a write trace
when the step has one (the kit's Gumbel kernel records, per (slot, step), the row whose store
landed last and how many stored there: :class:`~labkit.kernels.gumbel.WriteTrace`); otherwise from
the mapping (which padded rows point at the slot), and if that is ambiguous, by probing: re-run
the padded step with one padded row's inputs changed and see whether the corrupted value moves.
A record whose traced writer is the same row in both runs is reported as such: that row's own
result changed with the row count (a model that is not batch-invariant), no stale row stored there.
A record that no row can be named as the writer of, or that changes with the poison even unpadded,
is probed the other way round: which input records outside the live rows move it, named as what it
reads (``it reads hidden[5, :], which no live row owns``): a read of a stale part of a buffer.

:func:`audit_step` audits any ``step(rows)`` over buffers described with :class:`Buffer` (a
learner's own kernel, say); :mod:`labkit.proofs.speculator_audit` applies it to the kit's speculators.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from labkit.errors import LabkitInputError
from labkit.proofs.audit_report import AuditReport, Corruption
from labkit.proofs.poisoning import (
    DEFAULT_POISONS,
    STALE,
    STEP_RESULT,
    capture,
    compare,
    poison_buffers,
    restore,
)
from labkit.proofs.writers import PaddedRun, Prober, attribute, from_trace, reset_trace, trace_copy

__all__ = ["DEFAULT_POISONS", "STALE", "AuditReport", "Buffer", "Corruption", "audit_step"]

ROLES = ("input", "mapping", "output", "scratch")
INDEXED_BY = ("row", "slot")


# -- describing a step's buffers --------------------------------------------------------------

@dataclass
class Buffer:
    """One persistent buffer of a step, and which part of it the batch owns.

    indexed_by: "row" (dim 0 is the batch row) or "slot" (dim 0 is the request-state slot).
    live:       the live rows, or the live slots *in row order* (live slot i belongs to row i).
    role:       "input"   -- the step reads it; the non-live part is poisoned;
                "mapping" -- a row -> slot input like idx_mapping; the non-live rows are poisoned
                             with valid slots in [values[0], values[1]);
                "output"  -- the step writes it; poisoned whole, and its live part is checked
                             (with two or more poisons, a live part the step never writes is
                             caught as well: the reference then changes with the poison);
                "scratch" -- written and read by the step but not a result; poisoned outside the
                             live part, not checked.
    values:     poison range [lo, hi) -- required for integer buffers (token ids, slots, positions);
                for float buffers, uniform in the range (default: normal with scale 4).
    group_dims: how many leading indices name one record in the report (default: 2 for 3-D and
                larger tensors, as in draft_logits[slot, step, :]; else 1).
    read_by:    for an output, who reads it after the step ("the rejection sampler"): the report
                names it beside the record.
    """

    name: str
    tensor: torch.Tensor
    indexed_by: str
    live: Sequence[int]
    role: str = "input"
    values: tuple | None = None
    group_dims: int | None = None
    read_by: str = ""

    def __post_init__(self):
        if self.indexed_by not in INDEXED_BY:
            raise LabkitInputError(f"buffer {self.name}: indexed_by must be 'row' or 'slot', got {self.indexed_by!r}")
        if self.role not in ROLES:
            raise LabkitInputError(f"buffer {self.name}: role must be one of {ROLES}, got {self.role!r}")
        if not isinstance(self.tensor, torch.Tensor) or self.tensor.dim() < 1:
            raise LabkitInputError(f"buffer {self.name}: needs a tensor with at least one dimension")
        self.live = [int(i) for i in self.live]
        size = self.tensor.shape[0]
        bad = [i for i in self.live if not 0 <= i < size]
        if bad:
            raise LabkitInputError(f"buffer {self.name}: live {self.indexed_by}s {bad} outside [0, {size})")
        if len(set(self.live)) != len(self.live):
            raise LabkitInputError(f"buffer {self.name}: live {self.indexed_by}s repeat: {self.live}")
        integer = not (self.tensor.is_floating_point() or self.tensor.is_complex())
        if integer and self.tensor.dtype != torch.bool and self.values is None:
            raise LabkitInputError(
                f"buffer {self.name} holds integers ({self.tensor.dtype}): give values=(lo, hi), the range "
                "its poison is drawn from -- e.g. (0, max_num_reqs) for a slot mapping, (0, vocab) for "
                "tokens. Poison must stay in bounds: the audit looks for wrong owners, not wild addresses."
            )
        if self.role == "mapping" and self.indexed_by != "row":
            raise LabkitInputError(f"buffer {self.name}: a mapping maps rows to slots, so indexed_by='row'")
        if self.group_dims is None:
            self.group_dims = 2 if self.tensor.dim() >= 3 else 1
        if not 1 <= self.group_dims <= self.tensor.dim():
            raise LabkitInputError(f"buffer {self.name}: group_dims must be in [1, {self.tensor.dim()}]")

    @property
    def non_live(self) -> list[int]:
        live = set(self.live)
        return [i for i in range(self.tensor.shape[0]) if i not in live]

    def owner_of(self, index: int) -> int | None:
        """The live row that owns dim-0 entry `index` (None: not live)."""
        return self.live.index(index) if index in self.live else None

    def location(self, index: tuple[int, ...]) -> str:
        rest = ", :" * (self.tensor.dim() - len(index))
        return f"{self.name}[{', '.join(str(i) for i in index)}{rest}]"

    def records(self, value: torch.Tensor):
        """(index tuple, record tensor) for every live record of `value` (this buffer's shape)."""
        for i in self.live:
            inner = value.shape[1: self.group_dims]
            for sub in itertools.product(*(range(d) for d in inner)):
                yield (i, *sub), value[(i, *sub)]


# -- the audit ------------------------------------------------------------------------------

@dataclass
class _Plan:
    """Everything one audit needs, checked: the step, its buffers and how to name writers."""

    step: Callable[[int], object]
    buffers: list[Buffer]
    live_rows: int
    padded_rows: int
    trace: object
    traced: str | None
    writer_live_rows: int
    writer_label: Callable[[int], str]
    probe: bool

    @property
    def outputs(self) -> list[Buffer]:
        return [b for b in self.buffers if b.role == "output"]

    @property
    def mappings(self) -> list[Buffer]:
        return [b for b in self.buffers if b.role == "mapping"]

    @property
    def live_slots(self) -> list[int]:
        slots: list[int] = []
        for b in self.buffers:
            if b.indexed_by == "slot":
                slots += [s for s in b.live if s not in slots]
        return slots

    def output(self, name: str) -> Buffer | None:
        return next((b for b in self.outputs if b.name == name), None)

    def location(self, name: str, index: tuple) -> str:
        buf = self.output(name)
        return buf.location(index) if buf is not None else f"{STEP_RESULT}[{index[0]}]"

    def read_by(self, name: str) -> str:
        buf = self.output(name)
        return buf.read_by if buf is not None else ""

    def label(self, row: int) -> str:
        return f"{'padded' if row >= self.writer_live_rows else 'live'} {self.writer_label(row)}"


def audit_step(
    step: Callable[[int], object],
    buffers: Sequence[Buffer],
    *,
    live_rows: int,
    padded_rows: int,
    poisons: Sequence = DEFAULT_POISONS,
    trace=None,
    traced: str | None = None,
    writer_live_rows: int | None = None,
    writer_label: Callable[[int], str] | None = None,
    probe: bool = True,
    name: str = "step",
) -> AuditReport:
    """Audit `step(rows)` for padding invariance; returns an :class:`AuditReport`.

    step(rows) runs one step on the buffers in place over the first `rows` rows and may return a
    tensor whose first `live_rows` rows are compared as well (e.g. the sampled tokens). It is
    called with `live_rows` (the reference: what an eager run computes) and `padded_rows` (what
    the graph computes). trace: optional write trace of the step -- an object with `.writer`
    (and `.writes`) tensors like :class:`~labkit.kernels.gumbel.WriteTrace`, or a writer tensor
    alone -- indexed like the record of the slot-indexed output `traced` (default: the first
    slot-indexed output). Writer rows below `writer_live_rows` (default `live_rows`) are live;
    `writer_label(row)` names a row (default "row 7"). The buffers are left as they were found.
    """
    plan = _plan(step, buffers, live_rows, padded_rows, poisons, trace, traced, writer_live_rows,
                 writer_label, probe)
    checked = [b.name for b in plan.outputs]
    snapshot = {b.name: b.tensor.clone() for b in plan.buffers}
    findings: dict[tuple, Corruption] = {}
    try:
        runs = [_audit_one_poison(plan, poison, snapshot, findings, checked) for poison in poisons]
        _check_references(plan, poisons, runs, findings)
    finally:
        restore(plan.buffers, snapshot)
        reset_trace(trace)
    order = {n: i for i, n in enumerate(checked)}
    first = {p: i for i, p in enumerate(poisons)}
    ordered = sorted(findings.values(), key=lambda f: (f.how == "unpadded run", first[f.poisons[0]],
                                                       order.get(f.buffer, 99), f.index, f.writer or -1))
    return AuditReport(name, live_rows, padded_rows, tuple(poisons), checked, ordered)


def _plan(step, buffers, live_rows, padded_rows, poisons, trace, traced, writer_live_rows, writer_label,
          probe) -> _Plan:
    buffers = list(buffers)
    if not buffers:
        raise LabkitInputError("audit_step needs at least one Buffer")
    if not 0 < live_rows <= padded_rows:
        raise LabkitInputError(f"need 0 < live_rows <= padded_rows, got {live_rows} and {padded_rows}")
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise LabkitInputError(f"buffer names repeat: {names}")
    if not poisons:
        raise LabkitInputError("give at least one poison (\"stale\" or an integer seed)")
    for p in poisons:
        if p != STALE and (isinstance(p, bool) or not isinstance(p, int)):
            raise LabkitInputError(f"poisons are 'stale' or integer seeds, got {p!r}")
    if trace is not None and traced is None:
        slot_outputs = [b for b in buffers if b.role == "output" and b.indexed_by == "slot"]
        if not slot_outputs:
            raise LabkitInputError("a trace describes a slot-indexed output, but no Buffer is one")
        traced = slot_outputs[0].name
    return _Plan(step, buffers, live_rows, padded_rows, trace, traced,
                 live_rows if writer_live_rows is None else writer_live_rows,
                 writer_label or (lambda r: f"row {r}"), probe)


def _audit_one_poison(plan: _Plan, poison, snapshot: dict, findings: dict, checked: list) -> tuple[dict, dict]:
    """Poison, run unpadded and padded, and add what differs to `findings`; returns the reference and
    the poisoned state it ran from."""
    restore(plan.buffers, snapshot)
    poison_buffers(plan.buffers, poison, plan.live_slots)
    poisoned = {b.name: b.tensor.clone() for b in plan.buffers}

    reset_trace(plan.trace)
    reference = capture(plan.outputs, plan.step(plan.live_rows), plan.live_rows)
    reference_writers = trace_copy(plan.trace)

    restore(plan.buffers, poisoned)
    reset_trace(plan.trace)
    got = capture(plan.outputs, plan.step(plan.padded_rows), plan.live_rows)
    if STEP_RESULT in got and STEP_RESULT not in checked:
        checked.append(STEP_RESULT)
    prober = Prober(plan, poisoned, got) if plan.probe else None
    run = PaddedRun(got, trace_copy(plan.trace), reference_writers,
                     {b.name: b.tensor.cpu().clone() for b in plan.mappings}, prober)
    for buf_name, index, diff in compare(plan.outputs, reference, got, plan.live_rows):
        writer, stores, how = attribute(plan, buf_name, index, run)
        key = (buf_name, index, writer)
        if key in findings:
            f = findings[key]
            f.poisons = (*f.poisons, poison)
            f.max_abs_diff = max(f.max_abs_diff, diff)
            continue
        # The trace names the unpadded run's writer, the record's own row (see Corruption.sentence).
        own = how == "write trace" and writer == from_trace(*run.reference_writers, index)[0]
        reads = prober.inputs_read(buf_name, index) if writer is None and prober is not None else ()
        how = "read probe" if reads else how
        findings[key] = Corruption(buf_name, index, plan.location(buf_name, index),
                                   _owner(plan.output(buf_name), index), writer,
                                   plan.label(writer) if writer is not None else "", stores, how,
                                   (poison,), diff, own, reads, plan.read_by(buf_name))
    return reference, poisoned


def _check_references(plan: _Plan, poisons, runs: list, findings: dict) -> None:
    """The reference itself must not depend on the poison: a live output that does reads non-live
    data (or is never written) -- wrong with or without padding. What it reads is probed from the
    first poison's state, unpadded."""
    first, first_state = runs[0]
    prober = Prober(plan, first_state, first, rows=plan.live_rows) if plan.probe else None
    for poison, (later, _) in zip(poisons[1:], runs[1:], strict=True):
        for buf_name, index, diff in compare(plan.outputs, first, later, plan.live_rows):
            key = (buf_name, index, "unpadded run")
            if key in findings:
                findings[key].poisons = (*findings[key].poisons, poison)
                continue
            reads = prober.inputs_read(buf_name, index) if prober is not None else ()
            findings[key] = Corruption(buf_name, index, plan.location(buf_name, index),
                                       _owner(plan.output(buf_name), index), None, "", None, "unpadded run",
                                       (poisons[0], poison), diff, reads=reads, read_by=plan.read_by(buf_name))


def _owner(buf: Buffer | None, index) -> int | None:
    if buf is None:
        return index[0]
    return buf.owner_of(index[0]) if buf.indexed_by == "slot" else index[0]
