"""Who wrote each q in one launch of the sampling kernel, and whether that was its owner.

The sampling kernel stores a row's draft logits into `draft_logits[slot, step]`, by *slot*. Live
row i owns slot ``live_slots[i]``; the row that should store there is its own sample row
(:meth:`~labkit.speculator.LaunchRecord.own_sample_row`: row i itself for an autoregressive
drafter, sample row ``i * k + step`` for a DFlash-style one). The kernel's write trace
(:class:`~labkit.kernels.gumbel.WriteTrace`) says which row's store landed last and how many rows
stored; :class:`OwnershipTable` puts the two side by side, one line per (slot, step).

    trace_launch(logits, state, ...)    -> (OwnershipTable, tokens, draft_logits)   one launch
    OwnershipTable.from_record(record)                                              a speculator step
    OwnershipTable.from_trace(trace, live_slots)                                    your own kernel's trace
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from labkit.errors import LabkitInputError
from labkit.kernels.sampling_state import SamplingState
from labkit.speculator import LaunchRecord

# What happened at one draft_logits[slot, step]: a live q stored by its own row alone ("ok"), by its
# own row last of several ("raced"), last by another row ("overwritten"), by nobody ("missing");
# a slot no live request owns, stored to ("harmless") or not ("free").
KINDS = ("ok", "raced", "overwritten", "missing", "harmless", "free")


@dataclass
class OwnershipTable:
    """Who stored to each `draft_logits[slot, step]` in one launch (the launch's
    :class:`~labkit.speculator.LaunchRecord`, with its write trace), and whether that was its owner."""

    record: LaunchRecord

    @classmethod
    def from_record(cls, record: LaunchRecord) -> "OwnershipTable":
        """From a speculator's :class:`~labkit.speculator.LaunchRecord` (record=True)."""
        if record.writer is None:
            raise LabkitInputError("this launch record has no write trace (greedy drafting keeps no q)")
        return cls(record)

    @classmethod
    def from_trace(cls, trace, live_slots: Sequence[int], samples_per_req: int = 1,
                   mapping: Sequence[int] | None = None) -> "OwnershipTable":
        """From a bare write trace: a WriteTrace, or a writer tensor [slots] or [slots, steps] alone
        (a negative writer: nobody stored). live_slots in row order; mapping: the row -> slot mapping the launch
        read (shown in the header). Temperature and q are unknown to a bare trace (left None)."""
        writer = trace if isinstance(trace, torch.Tensor) else trace.writer
        writes = None if isinstance(trace, torch.Tensor) else getattr(trace, "writes", None)
        writer = writer.cpu().clone()
        if writer.dim() == 1:
            writer = writer[:, None]
        if writer.dim() != 2:
            raise LabkitInputError(f"a writer trace is [slots] or [slots, steps], got shape {tuple(writer.shape)}")
        if samples_per_req < 1:
            raise LabkitInputError(f"samples_per_req must be >= 1, got {samples_per_req}")
        writes = writes.cpu().clone().reshape(writer.shape) if writes is not None else (writer >= 0).int()
        live_slots = [int(s) for s in live_slots]
        mapping_t = torch.tensor([int(s) for s in mapping], dtype=torch.int32) if mapping is not None else None
        rows = len(mapping_t) // samples_per_req if mapping_t is not None else len(live_slots)
        return cls(LaunchRecord(num_reqs=len(live_slots), rows=rows, live_slots=live_slots, mapping=mapping_t,
                                samples_per_req=samples_per_req, writer=writer, writes=writes, row_logits=None,
                                temperature=None, draft_logits=None))

    # -- the table's parts ----------------------------------------------------------------------

    @property
    def writer(self) -> torch.Tensor:
        return self.record.writer

    @property
    def writes(self) -> torch.Tensor:
        return self.record.writes

    @property
    def live_slots(self) -> list[int]:
        return list(self.record.live_slots)

    @property
    def samples_per_req(self) -> int:
        return self.record.samples_per_req

    @property
    def mapping(self) -> list[int] | None:
        """The row -> slot mapping the launch's rows read (None: not known)."""
        m = self.record.mapping
        return None if m is None else [int(s) for s in m[: self.record.rows * self.samples_per_req]]

    @property
    def live_writer_rows(self) -> int:
        return len(self.record.live_slots) * self.samples_per_req

    def own_row(self, slot: int, step: int) -> int | None:
        """The row that should store `draft_logits[slot, step]` (None: no live row owns the slot)."""
        if slot not in self.record.live_slots:
            return None
        return self.record.own_sample_row(self.record.live_slots.index(slot), step)

    def row_name(self, row: int) -> str:
        kind = "live" if row < self.live_writer_rows else "padded"
        return f"{kind} {'sample ' if self.samples_per_req > 1 else ''}row {row}"

    # -- verdicts -------------------------------------------------------------------------------

    def _verdict(self, own: int | None, writer: int, stores: int) -> tuple[str, str]:
        """(kind, words): kind is one of KINDS."""
        if own is None:
            if writer < 0:
                return "free", "free slot"
            return "harmless", f"written by {self.row_name(writer)} (no live owner: harmless)"
        if writer < 0:
            return "missing", "MISSING: nobody stored this live q"
        if writer != own:
            return "overwritten", f"OVERWRITTEN by {self.row_name(writer)}"
        if stores > 1:
            return "raced", f"ok this time, but {stores} rows stored (a race on a GPU)"
        return "ok", "ok"

    def entries(self) -> list[dict]:
        """One dict per (slot, step): slot, step, owner (live row or None), writer (negative: nobody),
        stores, kind (one of KINDS) and verdict (in words)."""
        out = []
        live = self.record.live_slots
        for slot in range(self.writer.shape[0]):
            for step in range(self.writer.shape[1]):
                w, n = int(self.writer[slot, step]), int(self.writes[slot, step])
                owner = live.index(slot) if slot in live else None
                kind, verdict = self._verdict(self.own_row(slot, step), w, n)
                out.append(dict(slot=slot, step=step, owner=owner, writer=w, stores=n, kind=kind, verdict=verdict))
        return out

    def collisions(self) -> list[dict]:
        """The entries where a live q is missing, overwritten, or was stored by several rows."""
        return [e for e in self.entries() if e["kind"] in ("missing", "overwritten", "raced")]

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
    state: SamplingState,
    *,
    live_slots: Sequence[int],
    k: int = 1,
    draft_step: int = 0,
    samples_per_req: int = 1,
    masked: bool = True,
    backend: str | None = None,
):
    """One launch of the Gumbel sampling kernel with its write trace on; returns
    (OwnershipTable, tokens, draft_logits). `state` is the launch's
    :class:`~labkit.kernels.sampling_state.SamplingState`; without a q (``draft_logits=None``) the
    launch stores into a fresh zero one with `k` steps. Runs in whichever backend is active, or
    `backend` ("interpreter" or "torch"): both record the same writers. On a GPU, which of two
    colliding rows stores last is a race, so the table is one outcome of it.
    """
    from labkit.kernels.gumbel import WriteTrace, gumbel_sample

    M, V = state.temperature.numel(), logits.shape[1]
    if state.draft_logits is None:
        state = state.with_q(torch.zeros(M, k, V, dtype=torch.float32, device=logits.device))
    draft_logits = state.draft_logits
    trace = WriteTrace.empty(M, draft_logits.shape[1], logits.device)
    tokens = gumbel_sample(logits, state, draft_step=draft_step, samples_per_req=samples_per_req, masked=masked,
                           trace=trace, backend=backend)
    rows = logits.shape[0]
    record = LaunchRecord(
        num_reqs=len(live_slots), rows=rows // samples_per_req, live_slots=[int(s) for s in live_slots],
        mapping=state.idx_mapping[:rows].cpu().clone(), samples_per_req=samples_per_req,
        writer=trace.writer.cpu().clone(), writes=trace.writes.cpu().clone(), row_logits=None,
        temperature=state.temperature.cpu().clone(), draft_logits=draft_logits.cpu().clone())
    return OwnershipTable(record), tokens, draft_logits
