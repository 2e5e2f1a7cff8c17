"""Case 4, SGLang PR #32555: Mamba2 decode saves tracked states through the stale tail of a static buffer.

With SGLang's mamba radix cache, a decode step that reaches a track boundary saves each request's
state (conv and SSM) from its working slot into a track slot, whose state the radix tree keeps for
later prefix hits. Under decode CUDA graphs the track slots come from a static buffer of
``max_bs`` entries, ``mamba_track_indices_buf``, zeros when allocated, which the host refreshes at
its front (``[:bs]``) before each replay. The reader takes the destinations from the buffer's
*end*, ``[-num_decodes:]``: right for a tensor as long as the batch, which is what the eager path
hands it. Before the fix the graph path handed it the whole buffer; the fix hands out ``[:bs]``.

The miniature: a pool of :data:`NUM_SLOTS` state slots (row r's working slot is ``1 + r``, its
track slot ``1 + MAX_ROWS + r``; slot 0 is held by no request of these batches), a track buffer of
:data:`MAX_ROWS` entries, graphs of :data:`CAPTURE_SIZES` rows, and batches of every size from 1 to
:data:`MAX_ROWS`, one after the other, every request at a track boundary. The captured work is one
decode update of each live row's working state, then the track-save, row by row, reading its
destinations from the end of what it is handed. Padded rows carry a working slot that SGLang's kernel
skips (notebook 09 says which, after the exercises).

Forms: ``"buggy"`` hands the reader the whole buffer; ``"fixed"`` hands it ``[:rows]``, the part the
host refreshed (PR #32555's fix).
"""

from __future__ import annotations

import torch

from labkit.errors import one_of
from labkit.family.symptom import Symptom, differs, largest_difference
from labkit.graphs import GraphRunner
from labkit.proofs.audit import Buffer, audit_step
from labkit.proofs.audit_report import AuditReport

MAX_ROWS = 8  # the track buffer's size: the largest graph's batch
HIDDEN = 16
NUM_SLOTS = 1 + 2 * MAX_ROWS
_PADDING_SLOT = -1  # SGLang's pad of the working slots, which its kernel skips
CAPTURE_SIZES = (2, 4, 8)
BATCH_SIZES = tuple(range(1, MAX_ROWS + 1))
FORMS = ("buggy", "fixed")
READER = "the radix cache"
# What the miniature models: a GPU record's case-4 entry measured another one when it says otherwise.
MINIATURE = "Mamba2 decode track-save through a static track-destination buffer"


def working_slot(row: int) -> int:
    """The pool slot row `row`'s decode state lives in."""
    return 1 + row


def track_slot(row: int) -> int:
    """The pool slot row `row`'s state is saved to at a track boundary (what the radix cache keeps)."""
    return 1 + MAX_ROWS + row


class TrackSave:
    """The step's persistent buffers, the host's copy before a replay, and the captured decode and track-save."""

    def __init__(self, form: str = "buggy", *, device="cpu", use_graphs: bool = True, seed: int = 0):
        one_of("form", form, FORMS)
        self.form = form
        self.device = torch.device(device)
        self.use_graphs = use_graphs
        gen = torch.Generator().manual_seed(seed)
        self.decay = torch.rand(HIDDEN, generator=gen).to(self.device)
        self.gain = torch.randn(HIDDEN, generator=gen).to(self.device)
        self._gen = gen
        self.states = torch.zeros(NUM_SLOTS, HIDDEN, device=self.device)  # the mamba state pool
        self.x = torch.zeros(MAX_ROWS, HIDDEN, device=self.device)  # this step's inputs, by row
        self.cache_indices = torch.full((MAX_ROWS,), _PADDING_SLOT, dtype=torch.int64, device=self.device)
        # The static track-destination buffer: allocated once, zeros, refreshed at its front.
        self.track_buf = torch.zeros(MAX_ROWS, dtype=torch.int64, device=self.device)
        self.num_reqs = 0
        self.fresh = torch.zeros(0, HIDDEN)
        self.batch_track = torch.zeros(0, dtype=torch.int64, device=self.device)
        self.runner = GraphRunner(CAPTURE_SIZES, mode="full" if use_graphs else "eager", device=self.device)

    def new_batch(self, num_reqs: int) -> None:
        """A new batch of `num_reqs` requests (seeded): their working states and this step's inputs;
        their track slots hold nothing yet."""
        self.num_reqs = num_reqs
        self.states.zero_()
        rows = range(num_reqs)
        start = torch.randn(num_reqs, HIDDEN, generator=self._gen).to(self.device)
        self.states[[working_slot(r) for r in rows]] = start
        self.fresh = torch.randn(num_reqs, HIDDEN, generator=self._gen).to(self.device)
        self.batch_track = torch.tensor([track_slot(r) for r in rows], dtype=torch.int64, device=self.device)

    def copy_inputs(self, rows: int) -> None:
        """The host, before the step on `rows` rows: live rows' inputs and working slots at the front,
        the skipped pad in the padded rows' working slots, and the track destinations into ``track_buf[:rows]``
        (the padded rows' destinations are zeros, as the caller's buffer holds them there)."""
        n = self.num_reqs
        self.x[:n].copy_(self.fresh)
        self.cache_indices[:n].copy_(torch.tensor([working_slot(r) for r in range(n)], device=self.device))
        self.cache_indices[n:rows].fill_(_PADDING_SLOT)
        if self.use_graphs:
            self.track_buf[:n].copy_(self.batch_track)
            self.track_buf[n:rows].zero_()

    def handed_out(self, rows: int) -> torch.Tensor:
        """The track destinations the reader is given: eagerly the batch's own; under a graph, the
        static buffer (whole, before the fix; its refreshed front ``[:rows]``, after)."""
        if not self.use_graphs:
            return self.batch_track
        return self.track_buf if self.form == "buggy" else self.track_buf[:rows]

    def step_on(self, rows: int) -> None:
        """The captured work on `rows` rows: decode, then save each live row's state to its track slot."""
        src = self.cache_indices[:rows]
        live = src >= 0
        safe = src.clamp(min=0)
        old = self.states[safe]
        new = torch.tanh(old * self.decay + self.x[:rows] * self.gain)
        self.states.index_copy_(0, safe, torch.where(live[:, None], new, old))
        dest = self.handed_out(rows)[-rows:]  # the reader's slice, as Mamba2's forward takes it
        for row in range(rows):  # row by row, in order: a row whose slot repeats lands last
            d = dest[row:row + 1]
            self.states.index_copy_(0, d, torch.where(live[row], self.states[safe[row:row + 1]], self.states[d]))

    def step(self, rows: int) -> None:
        self.copy_inputs(rows)
        self.step_on(rows)

    def run(self, num_reqs: int) -> torch.Tensor:
        """One decode step of a new batch of `num_reqs` requests at a track boundary; the states saved
        to their track slots (a copy, in row order)."""
        self.new_batch(num_reqs)
        self.copy_inputs(self.runner.rows_for(num_reqs))
        self.runner.run(num_reqs, self.step_on)
        return self.states[[track_slot(r) for r in range(num_reqs)]].cpu().clone()

    def buffers(self) -> list[Buffer]:
        """The step's buffers for the audit. The pool is one tensor; the audit sees its working half
        (an input: the live rows' own slots) and its track half (the output: the live rows' track
        slots) as views, so that slot i of each half is row i's."""
        rows = list(range(self.num_reqs))
        working = self.states[working_slot(0): working_slot(MAX_ROWS)]
        tracked = self.states[track_slot(0): track_slot(MAX_ROWS)]
        return [
            Buffer("x", self.x, "row", rows),
            Buffer("working_states", working, "slot", rows),
            Buffer("cache_indices", self.cache_indices, "row", rows, "mapping",
                   values=(working_slot(0), working_slot(MAX_ROWS))),
            Buffer("mamba_track_indices_buf", self.track_buf, "row", rows, values=(0, NUM_SLOTS)),
            Buffer("track_states", tracked, "slot", rows, "output", read_by=READER),
        ]


def symptom(form: str = "buggy", *, device="cpu") -> Symptom:
    """The live rows, as (batch size, row), whose saved state differs from the eager run's."""
    graphed, eager = TrackSave(form, device=device), TrackSave(form, device=device, use_graphs=False)
    corrupted, total, largest = [], 0, 0.0
    for n in BATCH_SIZES:
        got, want = graphed.run(n), eager.run(n)
        for row in range(n):
            total += 1
            if differs(got[row], want[row]):
                corrupted.append((n, row))
                largest = max(largest, largest_difference(got[row], want[row]))
    return Symptom("tracked states (batch size, row)", tuple(corrupted), total, largest)


def right_batch_sizes(form: str = "buggy", *, device="cpu") -> tuple[int, ...]:
    """The batch sizes whose every saved state matches the eager run."""
    wrong = {n for n, _ in symptom(form, device=device).corrupted}
    return tuple(n for n in BATCH_SIZES if n not in wrong)


def destinations_read(form: str = "buggy", num_reqs: int = 2) -> list[int]:
    """Which entries of the track buffer the live rows of a batch of `num_reqs` take their
    destinations from, under the graph that batch replays."""
    case = TrackSave(form)
    rows = case.runner.rows_for(num_reqs)
    handed = MAX_ROWS if form == "buggy" else rows
    return [handed - rows + row for row in range(num_reqs)]


def audit(form: str = "buggy", num_reqs: int = 2, *, device="cpu") -> AuditReport:
    """The padding-invariance audit of one step of `num_reqs` live rows in `form`, as the graph runs it."""
    case = TrackSave(form, device=device)
    case.new_batch(num_reqs)
    return audit_step(case.step, case.buffers(), live_rows=num_reqs, padded_rows=case.runner.rows_for(num_reqs),
                      name=f"decode track-save, {form}")
