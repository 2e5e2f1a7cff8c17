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

Entry points:

* :func:`audit_step` -- any step function ``step(rows)`` over buffers you describe with
  :class:`Buffer` (a learner's own kernel, for instance);
* :func:`audit_speculator` -- the kit's speculators, by mode name (``"graph-buggy"``, ...) or a
  factory;
* :func:`trace_launch`, :class:`OwnershipTable` -- who wrote which `draft_logits[slot, step]` in one
  launch of the sampling kernel, as a table (interpreter or torch backend);
* :func:`batch_compositions`, :func:`smallest_failing_batch` -- random batches with `hypothesis`,
  and the smallest batch that breaks a mode.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from labkit.checks import LabkitInputError

ROLES = ("input", "mapping", "output", "scratch")
INDEXED_BY = ("row", "slot")
STALE = "stale"
DEFAULT_POISONS = (STALE, 1, 2)
FLOAT_POISON_SCALE = 4.0


class PaddingInvarianceError(AssertionError):
    """A step's live outputs changed when only its padded or unused parts were changed."""


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
    """

    name: str
    tensor: torch.Tensor
    indexed_by: str
    live: Sequence[int]
    role: str = "input"
    values: tuple | None = None
    group_dims: int | None = None

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


def _poison_like(buf: Buffer, shape, gen: torch.Generator) -> torch.Tensor:
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


def _stale_slots(count: int, live_slots: list[int]) -> list[int]:
    """What a shrinking batch leaves in padded rows: live slots, the last row's first."""
    return [live_slots[-1 - i % len(live_slots)] for i in range(count)]


def _poison(buffers: list[Buffer], poison, live_slots: list[int]) -> None:
    seed = 0 if poison == STALE else int(poison)
    gen = torch.Generator().manual_seed(seed)
    for buf in buffers:
        t = buf.tensor
        if buf.role == "output":
            t.copy_(_poison_like(buf, t.shape, gen))
            continue
        rows = buf.non_live
        if not rows:
            continue
        if buf.role == "mapping" and poison == STALE and live_slots:
            values = torch.tensor(_stale_slots(len(rows), live_slots), dtype=t.dtype, device=t.device)
        else:
            values = _poison_like(buf, (len(rows), *t.shape[1:]), gen)
        t[torch.tensor(rows, device=t.device)] = values


# -- findings and the report ----------------------------------------------------------------

@dataclass
class Corruption:
    """One live record that differs between the unpadded and the padded run."""

    buffer: str
    index: tuple[int, ...]
    location: str  # e.g. "draft_logits[7, 0, :]"
    owner: int | None  # live row that owns it
    writer: int | None  # row (program) that wrote it, if known
    writer_text: str  # e.g. "padded row 7"
    stores: int | None  # how many rows stored there (from a write trace)
    how: str  # "write trace", "mapping", "probe", "unknown"; "unpadded run": the reference moved
    poisons: tuple = ()
    max_abs_diff: float = 0.0

    def sentence(self) -> str:
        owner = f"row {self.owner}" if self.owner is not None else "no live row"
        if self.how == "unpadded run":
            return (f"{self.location} owned by {owner} changes with the poison even without padding: "
                    "the step reads something outside the live rows and slots, or never writes it")
        if self.writer is None:
            return (f"{self.location} owned by {owner} differs from the unpadded run; "
                    "no row could be named as its writer")
        text = f"{self.writer_text} wrote {self.location} owned by {owner}"
        if self.stores is not None and self.stores > 1:
            text += f" ({self.stores} rows stored there; this one landed last)"
        return text


@dataclass
class AuditReport:
    """What the audit ran and what it found. ``str(report)`` is the report in words."""

    name: str
    live_rows: int
    padded_rows: int
    poisons: tuple
    checked: list[str]
    findings: list[Corruption] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.findings

    def sentences(self) -> list[str]:
        return [f.sentence() for f in self.findings]

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        shape = f"{self.live_rows} live rows run as {self.padded_rows}"
        poisons = ", ".join(str(p) for p in self.poisons)
        head = f"{verdict} {self.name}: {shape}, poisons {poisons}; checked {', '.join(self.checked)}"
        if not self.passed:
            head += f" -- {len(self.findings)} corrupted live record(s)"
        return head

    def __str__(self) -> str:
        lines = [self.summary()]
        for f in self.findings:
            poisons = ", ".join(str(p) for p in f.poisons)
            lines.append(f"  {f.sentence()}  [{f.how}; poison {poisons}]")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def raise_if_failed(self) -> "AuditReport":
        if not self.passed:
            raise PaddingInvarianceError(str(self))
        return self


# -- the audit ------------------------------------------------------------------------------

def _trace_tensors(trace):
    if trace is None:
        return None, None
    if isinstance(trace, torch.Tensor):
        return trace, None
    return trace.writer, getattr(trace, "writes", None)


def _reset_trace(trace) -> None:
    if trace is None:
        return
    if isinstance(trace, torch.Tensor):
        trace.fill_(-1)
    elif hasattr(trace, "reset"):
        trace.reset()
    else:
        trace.writer.fill_(-1)
        if getattr(trace, "writes", None) is not None:
            trace.writes.zero_()


def _records(buf: Buffer, value: torch.Tensor):
    """(index tuple, record tensor) for every live record of an output buffer."""
    for i in buf.live:
        rec = value[i]
        if buf.group_dims == 1:
            yield (i,), rec
            continue
        inner = rec.shape[: buf.group_dims - 1]
        for sub in _ndindex(inner):
            yield (i, *sub), rec[sub]


def _ndindex(shape):
    if not shape:
        yield ()
        return
    head, *tail = shape
    for i in range(head):
        for rest in _ndindex(tuple(tail)):
            yield (i, *rest)


def _differs(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact inequality, counting NaN equal to NaN in the same place (a step may produce NaN in
    both runs; that is no difference)."""
    if a.is_floating_point():
        nan_a, nan_b = a.isnan(), b.isnan()
        if not torch.equal(nan_a, nan_b):
            return True
        return not torch.equal(a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0))
    return not torch.equal(a, b)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.is_floating_point():
        d = (a.double() - b.double()).abs()
        return float(d.nan_to_num(nan=float("inf")).max()) if d.numel() else 0.0
    return float((a.long() - b.long()).abs().max()) if a.numel() else 0.0


def _label(row: int, writer_live_rows: int, writer_label: Callable[[int], str]) -> str:
    return f"{'padded' if row >= writer_live_rows else 'live'} {writer_label(row)}"


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
    outputs = [b for b in buffers if b.role == "output"]
    slot_outputs = [b for b in outputs if b.indexed_by == "slot"]
    if trace is not None and traced is None:
        if not slot_outputs:
            raise LabkitInputError("a trace describes a slot-indexed output, but no Buffer is one")
        traced = slot_outputs[0].name
    writer_live_rows = live_rows if writer_live_rows is None else writer_live_rows
    writer_label = writer_label or (lambda r: f"row {r}")
    live_slots: list[int] = []
    for b in buffers:
        if b.indexed_by == "slot":
            live_slots += [s for s in b.live if s not in live_slots]
    mappings = [b for b in buffers if b.role == "mapping"]

    checked = [b.name for b in outputs]
    snapshot = {b.name: b.tensor.clone() for b in buffers}
    findings: dict[tuple, Corruption] = {}
    references = []
    try:
        for poison in poisons:
            _restore(buffers, snapshot)
            _poison(buffers, poison, live_slots)
            poisoned = {b.name: b.tensor.clone() for b in buffers}

            ref_result = step(live_rows)
            reference = _capture(outputs, ref_result, live_rows)
            references.append(reference)

            _restore(buffers, poisoned)
            _reset_trace(trace)
            result = step(padded_rows)
            got = _capture(outputs, result, live_rows)
            if "step result" not in checked and "step result" in got:
                checked.append("step result")
            writer_t, writes_t = _trace_tensors(trace)
            writer_t = writer_t.cpu().clone() if writer_t is not None else None
            writes_t = writes_t.cpu().clone() if writes_t is not None else None
            mapping_after = {b.name: b.tensor.cpu().clone() for b in mappings}

            bad = _compare(outputs, reference, got, live_rows)
            probes = _Prober(step, buffers, poisoned, padded_rows, live_rows, got, outputs) if probe else None
            for buf_name, index, diff in bad:
                buf = next((b for b in outputs if b.name == buf_name), None)
                key_owner = _owner(buf, index)
                writer, stores, how = _attribute(buf_name, buf, index, key_owner, (writer_t, writes_t), traced,
                                                 mapping_after, padded_rows, probes)
                text = _label(writer, writer_live_rows, writer_label) if writer is not None else ""
                key = (buf_name, index, writer)
                if key in findings:
                    f = findings[key]
                    f.poisons = (*f.poisons, poison)
                    f.max_abs_diff = max(f.max_abs_diff, diff)
                else:
                    location = buf.location(index) if buf is not None else f"step result[{index[0]}]"
                    findings[key] = Corruption(buf_name, index, location, key_owner, writer, text, stores,
                                               how, (poison,), diff)
        # The reference itself must not depend on the poison: a live output that does reads
        # non-live data (or is never written) -- wrong with or without padding.
        for poison, later in zip(poisons[1:], references[1:]):
            for buf_name, index, diff in _compare(outputs, references[0], later, live_rows):
                key = (buf_name, index, "unpadded run")
                if key in findings:
                    findings[key].poisons = (*findings[key].poisons, poison)
                    continue
                buf = next((b for b in outputs if b.name == buf_name), None)
                location = buf.location(index) if buf is not None else f"step result[{index[0]}]"
                findings[key] = Corruption(buf_name, index, location, _owner(buf, index), None, "", None,
                                           "unpadded run", (poisons[0], poison), diff)
    finally:
        _restore(buffers, snapshot)
        _reset_trace(trace)
    order = {n: i for i, n in enumerate(checked)}
    first = {p: i for i, p in enumerate(poisons)}
    ordered = sorted(findings.values(), key=lambda f: (f.how == "unpadded run", first[f.poisons[0]],
                                                       order.get(f.buffer, 99), f.index, f.writer or -1))
    return AuditReport(name, live_rows, padded_rows, tuple(poisons), checked, ordered)


def _attribute(name, buf, index, owner, trace_tensors, traced, mapping_after, padded_rows, probes):
    """(writer row, stores, how) for one corrupted record: the write trace, else the mapping (a
    single other row pointing at the slot), else probing."""
    candidates = None
    if buf is not None and buf.indexed_by == "slot":
        writer_t, writes_t = trace_tensors
        if writer_t is not None and name == traced:
            writer, stores = _from_trace(writer_t, writes_t, index)
            if writer is not None:
                return writer, stores, "write trace"
        if mapping_after:
            candidates = _mapping_candidates(mapping_after, index[0], owner, padded_rows)
            if len(candidates) == 1:
                return candidates[0], None, "mapping"
    if probes is None:
        return None, None, "unknown"
    writer, how = probes.writer_of(name, index, candidates or None)
    return writer, None, how


def _restore(buffers, saved) -> None:
    # In place: a captured CUDA graph holds these very tensors' addresses.
    for b in buffers:
        b.tensor.copy_(saved[b.name])


def _capture(outputs, result, live_rows) -> dict:
    got = {b.name: b.tensor.cpu().clone() for b in outputs}
    if isinstance(result, torch.Tensor):
        got["step result"] = result[:live_rows].cpu().clone()
    return got


def _compare(outputs, reference, got, live_rows):
    bad = []
    for buf in outputs:
        ref_records = dict(_records(buf, reference[buf.name]))
        for index, rec in _records(buf, got[buf.name]):
            if _differs(rec, ref_records[index]):
                bad.append((buf.name, index, _max_diff(rec, ref_records[index])))
    if "step result" in reference and "step result" in got:
        a, b = reference["step result"], got["step result"]
        if a.shape != b.shape:
            bad.append(("step result", (0,), float("inf")))
        else:
            for i in range(min(live_rows, a.shape[0])):
                if _differs(a[i], b[i]):
                    bad.append(("step result", (i,), _max_diff(a[i], b[i])))
    return bad


def _owner(buf: Buffer | None, index) -> int | None:
    if buf is None:
        return index[0]
    return buf.owner_of(index[0]) if buf.indexed_by == "slot" else index[0]


def _from_trace(writer_t, writes_t, index):
    try:
        w = writer_t[index[: writer_t.dim()]]
    except IndexError:
        return None, None
    if w.numel() != 1:
        return None, None
    w = int(w)
    stores = int(writes_t[index[: writes_t.dim()]]) if writes_t is not None else None
    return (w if w >= 0 else None), stores


def _mapping_candidates(mapping_after: dict, slot: int, owner: int | None, padded_rows: int) -> list[int]:
    cands: list[int] = []
    for m in mapping_after.values():
        rows = min(padded_rows, m.shape[0])
        for r in range(rows):
            if int(m[r]) == slot and r != owner and r not in cands:
                cands.append(r)
    return cands


class _Prober:
    """Find who wrote a record by changing one padded row's inputs and re-running the padded step."""

    def __init__(self, step, buffers, poisoned, padded_rows, live_rows, got, outputs):
        self.step, self.buffers, self.poisoned = step, buffers, poisoned
        self.padded_rows, self.live_rows, self.got, self.outputs = padded_rows, live_rows, got, outputs
        self._runs: dict[int, dict] = {}

    def _run_with_row_changed(self, row: int) -> dict:
        if row not in self._runs:
            _restore(self.buffers, self.poisoned)
            gen = torch.Generator().manual_seed(10_007 + row)
            for b in self.buffers:
                if b.indexed_by == "row" and b.role == "input" and row < b.tensor.shape[0]:
                    b.tensor[row] = _poison_like(b, b.tensor.shape[1:], gen)
            self._runs[row] = _capture(self.outputs, self.step(self.padded_rows), self.live_rows)
        return self._runs[row]

    def writer_of(self, buf_name, index, candidates):
        rows = candidates if candidates is not None else list(range(self.live_rows, self.padded_rows))
        movers = []
        for r in rows:
            changed = self._run_with_row_changed(r)
            if buf_name == "step result":
                a, b = self.got[buf_name][index[0]], changed[buf_name][index[0]]
            else:
                a, b = self.got[buf_name][index], changed[buf_name][index]
            if _differs(a, b):
                movers.append(r)
        _restore(self.buffers, self.poisoned)
        if not movers:
            return None, "unknown"
        # Several rows influence it: in grid order the last one stores last (the CPU interpreter's
        # order, and usually the GPU race's winner too).
        return movers[-1], "probe"


# -- the kit's speculators ------------------------------------------------------------------

MECHANICS_BATCH = (0, 1, 2, 4, 5, 6, 7)  # MECHANICS.md step t+1: slot 3 finished, 7 rows padded to 8


@contextlib.contextmanager
def _eager(spec):
    """Run the speculator's step on exactly num_reqs rows, as vLLM's eager mode does."""
    previous = spec.runner.mode
    spec.runner.mode = "eager"
    try:
        yield
    finally:
        spec.runner.mode = previous


def build_speculator(mode: str, models=None, *, num_steps: int = 2, max_num_reqs: int = 8,
                     capture_sizes=(1, 2, 4, 8)):
    """The speculator of one bench mode (see :data:`labkit.repro.MODES`), recording its writes."""
    from labkit import backends
    from labkit.models import load_toy_models
    from labkit.modes import MODES
    from labkit.speculator import make_speculator

    if mode not in MODES:
        raise LabkitInputError(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}")
    m = MODES[mode]
    models = models or load_toy_models(backends.default_device())
    return make_speculator(m.drafter, models.draft, max_num_reqs=max_num_reqs, num_steps=num_steps,
                           capture_sizes=capture_sizes, use_graphs=m.use_graphs, fix=m.fix,
                           probabilistic=m.probabilistic, record=True)


def speculator_inputs(spec, batch: Sequence[int], seed: int = 0):
    """Deterministic step inputs for live slots `batch` (in row order): slots, temperature, seeds,
    contexts, positions."""
    from labkit.models import encode_context

    g = torch.Generator().manual_seed(1000 + seed)
    n, M = len(batch), spec.max_num_reqs
    histories = [torch.randint(1, spec.vocab_size, (24,), generator=g).tolist() for _ in range(n)]
    contexts = encode_context(histories, spec.window).to(spec.device)
    temperature = torch.linspace(0.6, 1.0, M, device=spec.device)
    seeds = torch.arange(M, dtype=torch.int64, device=spec.device) * 1000 + 7 + seed
    positions = torch.arange(n, dtype=torch.int64, device=spec.device) + 24
    slots = torch.tensor(list(batch), dtype=torch.int32, device=spec.device)
    return slots, temperature, seeds, contexts, positions


def speculator_buffers(spec, batch: Sequence[int]) -> list[Buffer]:
    """The persistent buffers of a speculator, with the part that `batch` owns."""
    n, M, k, V = len(batch), spec.max_num_reqs, spec.num_steps, spec.vocab_size
    rows = range(n)
    bufs = [
        Buffer("idx_mapping", spec.idx_mapping, "row", rows, "mapping", values=(0, M)),
        Buffer("input_tokens", spec.input_tokens, "row", rows, "input", values=(1, V)),
        Buffer("positions", spec.positions, "row", rows, "input", values=(0, 1000)),
        Buffer("temperature", spec.temperature, "slot", batch, "input", values=(0.3, 1.5)),
        Buffer("seeds", spec.seeds, "slot", batch, "input", values=(0, 2**31)),
    ]
    if spec.kind == "dflash":
        bufs += [
            Buffer("sample_idx_mapping", spec.sample_idx_mapping, "row", range(n * k), "mapping", values=(0, M)),
            Buffer("sample_pos", spec.sample_pos, "row", range(n * k), "input", values=(0, 1000)),
        ]
    if spec.draft_logits is not None:
        bufs.append(Buffer("draft_logits", spec.draft_logits, "slot", batch, "output"))
    bufs.append(Buffer("draft_tokens", spec.draft_tokens, "row", rows, "output", values=(0, V)))
    return bufs


def audit_speculator(
    spec_or_mode,
    batch: Sequence[int] = MECHANICS_BATCH,
    *,
    poisons: Sequence = DEFAULT_POISONS,
    models=None,
    num_steps: int = 2,
    max_num_reqs: int = 8,
    capture_sizes=(1, 2, 4, 8),
    inputs_seed: int = 0,
) -> AuditReport:
    """Audit one of the kit's speculators on one batch of live slots (in row order).

    spec_or_mode: a bench mode name ("graph-buggy", "graph-fixed", "dflash-buggy", ...), a
    :class:`~labkit.speculator.Speculator`, or a function that returns one. The reference is the
    same speculator run eagerly (exactly the live rows); the audited run is its graph replay. A
    speculator without a write trace gets one attached (:class:`~labkit.kernels.gumbel.WriteTrace`).
    A mode that refuses to run (graph-fill-only) raises PaddedSlotOutOfBoundsError, as it should.
    """
    from labkit.kernels.gumbel import WriteTrace

    name = spec_or_mode if isinstance(spec_or_mode, str) else None
    if isinstance(spec_or_mode, str):
        spec = build_speculator(spec_or_mode, models, num_steps=num_steps, max_num_reqs=max_num_reqs,
                                capture_sizes=capture_sizes)
    elif callable(spec_or_mode) and not hasattr(spec_or_mode, "propose"):
        spec = spec_or_mode()
    else:
        spec = spec_or_mode
    if not hasattr(spec, "propose") or not hasattr(spec, "runner"):
        raise LabkitInputError("audit_speculator needs a Speculator, a function returning one, or a mode name")
    name = name or f"{type(spec).__name__}"
    batch = [int(s) for s in batch]
    n, k = len(batch), spec.num_steps
    if spec.trace is None and spec.draft_logits is not None:
        spec.trace = WriteTrace.empty(spec.max_num_reqs, k, spec.device)
    inputs = speculator_inputs(spec, batch, inputs_seed)
    padded = spec.runner.rows_for(n)

    def step(rows: int):
        if rows == n and padded != n:
            with _eager(spec):
                return spec.propose(*inputs)
        return spec.propose(*inputs)

    dflash = spec.kind == "dflash"
    report = audit_step(
        step, speculator_buffers(spec, batch), live_rows=n, padded_rows=padded, poisons=poisons,
        trace=spec.trace if spec.draft_logits is not None else None, traced="draft_logits",
        writer_live_rows=n * k if dflash else n,
        writer_label=(lambda r: f"sample row {r} (request row {r // k}, draft step {r % k})") if dflash else None,
        name=name,
    )
    if padded == n:
        report.notes.append(f"a batch of {n} runs on exactly {n} rows here (no padding), so there was "
                            "nothing for padded rows to corrupt")
    return report


# -- random batches with hypothesis -----------------------------------------------------------

def batch_compositions(max_num_reqs: int = 8, capture_sizes=(1, 2, 4, 8), padded_only: bool = True):
    """A `hypothesis` strategy: live slots in row order (distinct, any order, any subset).

    padded_only: only sizes that are not capture sizes, so every batch has padded rows.
    """
    from hypothesis import strategies as st

    sizes = [n for n in range(1, min(max_num_reqs, capture_sizes[-1]) + 1)
             if not (padded_only and n in capture_sizes)]
    if not sizes:
        raise LabkitInputError(f"no batch size up to {max_num_reqs} needs padding with capture sizes {capture_sizes}")
    return st.sampled_from(sizes).flatmap(
        lambda n: st.permutations(list(range(max_num_reqs))).map(lambda p: tuple(p[:n])))


def smallest_failing_batch(mode: str, *, max_examples: int = 30, poisons: Sequence = (STALE,), models=None,
                           **kwargs):
    """The smallest batch (after `hypothesis` shrinks it) on which the audit of `mode` fails, or None."""
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import NoSuchExample

    from labkit import backends
    from labkit.models import load_toy_models

    models = models or load_toy_models(backends.default_device())
    max_num_reqs = kwargs.get("max_num_reqs", 8)
    capture_sizes = kwargs.get("capture_sizes", (1, 2, 4, 8))
    strategy = batch_compositions(max_num_reqs, capture_sizes, padded_only=False)
    config = settings(max_examples=max_examples, database=None, derandomize=True, deadline=None,
                      suppress_health_check=list(HealthCheck))
    try:
        return list(find(strategy, lambda b: not audit_speculator(mode, b, poisons=poisons, models=models,
                                                                   **kwargs).passed, settings=config))
    except NoSuchExample:
        return None


# -- write ownership of one launch ----------------------------------------------------------

@dataclass
class OwnershipTable:
    """Who stored to each `draft_logits[slot, step]` in one launch, and whether that was its owner.

    writer[slot, step]: the row whose store landed last (-1: nobody); writes: how many stored.
    live_slots: the live slots in row order (live row i owns slot live_slots[i]);
    samples_per_req: 1, or k for a DFlash-style launch (sample row r is request r // k, step r % k).
    """

    writer: torch.Tensor
    writes: torch.Tensor | None
    live_slots: list[int]
    samples_per_req: int = 1
    mapping: list[int] | None = None  # the row -> slot mapping the launch read (for the header)

    @classmethod
    def from_trace(cls, trace, live_slots, samples_per_req: int = 1, mapping=None) -> "OwnershipTable":
        writer, writes = _trace_tensors(trace)
        writer = writer.cpu().clone()
        if writer.dim() == 1:
            writer = writer[:, None]
        writes = writes.cpu().clone().reshape(writer.shape) if writes is not None else None
        return cls(writer, writes, [int(s) for s in live_slots], samples_per_req,
                   [int(s) for s in mapping] if mapping is not None else None)

    @classmethod
    def from_record(cls, record) -> "OwnershipTable":
        """From a speculator's :class:`~labkit.speculator.LaunchRecord` (record=True)."""
        if record.writer is None:
            raise LabkitInputError("this launch record has no write trace (greedy drafting keeps no q)")
        rows = record.rows * record.samples_per_req
        return cls(record.writer.clone(), record.writes.clone(), list(record.live_slots),
                   record.samples_per_req, [int(s) for s in record.mapping[:rows]])

    @property
    def live_writer_rows(self) -> int:
        return len(self.live_slots) * self.samples_per_req

    def own_row(self, slot: int, step: int) -> int | None:
        if slot not in self.live_slots:
            return None
        row = self.live_slots.index(slot)
        return row * self.samples_per_req + (step if self.samples_per_req > 1 else 0)

    def row_name(self, row: int) -> str:
        kind = "live" if row < self.live_writer_rows else "padded"
        return f"{kind} {'sample ' if self.samples_per_req > 1 else ''}row {row}"

    def entries(self) -> list[dict]:
        out = []
        for slot in range(self.writer.shape[0]):
            for step in range(self.writer.shape[1]):
                w = int(self.writer[slot, step])
                n = int(self.writes[slot, step]) if self.writes is not None else (1 if w >= 0 else 0)
                own = self.own_row(slot, step)
                owner = None if own is None else self.live_slots.index(slot)
                if own is None:
                    verdict = "free slot" if w < 0 else f"written by {self.row_name(w)} (no live owner: harmless)"
                elif w < 0:
                    verdict = "MISSING: nobody stored this live q"
                elif w != own:
                    verdict = f"OVERWRITTEN by {self.row_name(w)}"
                elif n > 1:
                    verdict = f"ok this time, but {n} rows stored (a race on a GPU)"
                else:
                    verdict = "ok"
                out.append(dict(slot=slot, step=step, owner=owner, writer=w, stores=n, verdict=verdict))
        return out

    def collisions(self) -> list[dict]:
        return [e for e in self.entries() if not (e["verdict"] == "ok" or e["verdict"] == "free slot"
                                                  or e["verdict"].endswith("harmless)"))]

    def __str__(self) -> str:
        lines = []
        if self.mapping is not None:
            lines.append(f"mapping read by the launch (row -> slot): {self.mapping}")
        lines.append(f"{'slot':>4} {'step':>4}  {'owner':<7} {'last store by':<20} {'stores':>6}  verdict")
        for e in self.entries():
            owner = "-" if e["owner"] is None else f"row {e['owner']}"
            writer = "-" if e["writer"] < 0 else self.row_name(e["writer"])
            lines.append(f"{e['slot']:>4} {e['step']:>4}  {owner:<7} {writer:<20} {e['stores']:>6}  {e['verdict']}")
        return "\n".join(lines)


def trace_launch(
    logits: torch.Tensor,
    idx_mapping: torch.Tensor,
    temperature: torch.Tensor,
    seeds: torch.Tensor,
    positions: torch.Tensor,
    *,
    live_slots: Sequence[int],
    num_steps: int = 1,
    draft_step: int = 0,
    samples_per_req: int = 1,
    masked: bool = True,
    draft_logits: torch.Tensor | None = None,
    backend: str | None = None,
):
    """One launch of the Gumbel sampling kernel with its write trace on; returns
    (OwnershipTable, tokens, draft_logits). Runs in whichever backend is active, or `backend`
    ("interpreter" or "torch"): both record the same writers.
    """
    from labkit.kernels.gumbel import WriteTrace, gumbel_sample

    M, V = temperature.numel(), logits.shape[1]
    if draft_logits is None:
        draft_logits = torch.zeros(M, num_steps, V, dtype=torch.float32, device=logits.device)
    trace = WriteTrace.empty(M, draft_logits.shape[1], logits.device)
    tokens = gumbel_sample(logits, idx_mapping, temperature, seeds, positions, draft_logits, draft_step,
                           samples_per_req=samples_per_req, masked=masked, trace=trace, backend=backend)
    table = OwnershipTable.from_trace(trace, live_slots, samples_per_req, idx_mapping[: logits.shape[0]].tolist())
    return table, tokens, draft_logits
