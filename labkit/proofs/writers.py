"""Naming the row that wrote a corrupted record: the write trace, else the mapping, else probing.

Used by :mod:`labkit.proofs.audit` once a live record differs between the unpadded and the padded
run. A write trace (:class:`~labkit.kernels.gumbel.WriteTrace`) names the row whose store landed
last; without one, a single padded row whose mapping points at the slot is the writer; failing
that, :class:`Prober` re-runs the padded step with one padded row's inputs changed and sees
whether the corrupted value moves. Where no writer is found, :meth:`Prober.inputs_read` names the
input records outside the live rows that the record reads instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.proofs.poisoning import STEP_RESULT, capture, differs, poison_like, restore


@dataclass
class PaddedRun:
    """What the padded run left behind, for naming the writer of a corrupted record."""

    got: dict  # the outputs' values
    writers: tuple  # (writer, writes) of the trace after the padded run (CPU copies or None)
    reference_writers: tuple  # the same after the unpadded run
    mappings: dict  # mapping buffer name -> its value after the padded run
    probes: "Prober | None"


def trace_copy(trace) -> tuple:
    """(writer, writes) of a trace as CPU copies; (None, None) without a trace."""
    writer = trace if trace is None or isinstance(trace, torch.Tensor) else trace.writer
    writes = None if writer is trace else getattr(trace, "writes", None)
    return tuple(None if t is None else t.cpu().clone() for t in (writer, writes))


def reset_trace(trace) -> None:
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


def from_trace(writer_t, writes_t, index) -> tuple[int | None, int | None]:
    """(row whose store landed last, how many stored) at record `index`, from a trace's tensors."""
    if writer_t is None:
        return None, None
    try:
        w = writer_t[index[: writer_t.dim()]]
    except IndexError:
        return None, None
    if w.numel() != 1:
        return None, None
    w = int(w)
    stores = int(writes_t[index[: writes_t.dim()]]) if writes_t is not None else None
    return (w if w >= 0 else None), stores


def attribute(plan, name: str, index: tuple, run: PaddedRun):
    """(writer row, stores, how) for one corrupted record: the write trace, else the mapping (a
    single padded row pointing at the slot), else probing."""
    buf = plan.output(name)
    candidates = None
    if buf is not None and buf.indexed_by == "slot":
        if name == plan.traced:
            writer, stores = from_trace(*run.writers, index)
            if writer is not None:
                return writer, stores, "write trace"
        if run.mappings:
            candidates = mapping_candidates(plan, run.mappings, index[0])
            if len(candidates) == 1:
                return candidates[0], None, "mapping"
    if run.probes is None:
        return None, None, "unknown"
    writer, how = run.probes.writer_of(name, index, candidates or None)
    return writer, None, how


def mapping_candidates(plan, mappings: dict, slot: int) -> list[int]:
    """Rows the padded step ran that are not live in their mapping and point at `slot`."""
    cands: list[int] = []
    for buf in plan.mappings:
        m, live = mappings[buf.name], set(buf.live)
        for r in range(min(plan.padded_rows, m.shape[0])):
            if int(m[r]) == slot and r not in live and r not in cands:
                cands.append(r)
    return cands


class Prober:
    """Find who wrote a record by changing one padded row's inputs and re-running the step on `rows`
    rows (default: the padded row count), or what it read outside the live rows."""

    def __init__(self, plan, poisoned: dict, got: dict, rows: int | None = None):
        self.plan, self.poisoned, self.got = plan, poisoned, got
        self.rows = plan.padded_rows if rows is None else rows
        self._runs: dict[int, dict] = {}
        self._reads: dict[tuple[str, int], dict] = {}

    def _run_with_row_changed(self, row: int) -> dict:
        plan = self.plan
        if row not in self._runs:
            restore(plan.buffers, self.poisoned)
            gen = torch.Generator().manual_seed(10_007 + row)
            for b in plan.buffers:
                if b.indexed_by == "row" and b.role == "input" and row < b.tensor.shape[0]:
                    b.tensor[row] = poison_like(b, b.tensor.shape[1:], gen)
            self._runs[row] = capture(plan.outputs, plan.step(self.rows), plan.live_rows)
        return self._runs[row]

    def _run_with_record_changed(self, buf, row: int) -> dict:
        key = (buf.name, row)
        if key not in self._reads:
            restore(self.plan.buffers, self.poisoned)
            gen = torch.Generator().manual_seed(20_011 + row)
            buf.tensor[row] = poison_like(buf, buf.tensor.shape[1:], gen)
            self._reads[key] = capture(self.plan.outputs, self.plan.step(self.rows), self.plan.live_rows)
        return self._reads[key]

    def inputs_read(self, buf_name, index) -> tuple[str, ...]:
        """The row-indexed input records outside the live rows whose change moves record `index` of
        output `buf_name`: what it reads that no live row owns (as "hidden[5, :]")."""
        at = index[:1] if buf_name == STEP_RESULT else index
        found = []
        for b in self.plan.buffers:
            if b.indexed_by != "row" or b.role != "input":
                continue
            for row in b.non_live:
                changed = self._run_with_record_changed(b, row)
                if differs(self.got[buf_name][at], changed[buf_name][at]):
                    found.append(b.location((row,)))
        restore(self.plan.buffers, self.poisoned)
        return tuple(found)

    def writer_of(self, buf_name, index, candidates):
        rows = candidates if candidates is not None else list(range(self.plan.live_rows, self.plan.padded_rows))
        movers = []
        for r in rows:
            changed = self._run_with_row_changed(r)
            at = index[:1] if buf_name == STEP_RESULT else index
            if differs(self.got[buf_name][at], changed[buf_name][at]):
                movers.append(r)
        restore(self.plan.buffers, self.poisoned)
        if not movers:
            return None, "unknown"
        # Several rows influence it: in grid order the last one stores last (the CPU interpreter's
        # order; on a GPU the order is a race, which is why the kit's kernel keeps a write trace).
        return movers[-1], "probe"
