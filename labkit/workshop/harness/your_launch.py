"""Your launch of exercise (b), drawn: who stored into each slot of q, and what touched the guard memory.

A check of (b) that fails shows the launch it failed on (:func:`replay`). The launch is replayed one
row at a time (the exercise's kernel is one program per row), each row on fresh guarded buffers, so
that every store and every access outside the buffers is told by row: the torch version has no
program id, and a compiled kernel shows reads only through their effect on a row's token. The rows
are put together in row order, the order in which the interpreter runs programs; on a GPU, which of
two stores to one slot lands last is a race.

    launch = replay(gumbel_kernel, "triton", kernel_case(0, "cpu"), "gumbel_kernel")
    launch.figure        the ownership map of the launch and its guard hits (matplotlib Figure)
    launch.table         who stored into each slot (:class:`~labkit.proofs.ownership.OwnershipTable`)
    launch.hits          e.g. ["row 7 (slot s) read temperature[s]", ...]
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import html
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from labkit.kernels.gumbel import WriteTrace
from labkit.proofs.guarded import wild_access_in
from labkit.proofs.ownership import OwnershipTable
from labkit.workshop.feedback import Shown
from labkit.workshop.harness.launches import KernelCase, LaunchOutcome, M, case_mappings, launch_torch, launch_triton

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Shown 1280 px wide, a figure W inches wide scales s-pt text to s * 1280 / (96 * W) pt: at 7.2 in, the
# ownership map's 7-pt labels read 13 pt, over the 10 pt a projected screen needs.
WIDTH_IN = 7.2
NOTHING_OUTSIDE = "nothing: no row read or wrote outside the buffers"
REPLAYED = "your launch replayed one row at a time, in row order; on a GPU, two stores to one slot race"


@dataclass(repr=False)
class YourLaunch(Shown):
    """One launch of the learner's kernel, row by row: where each row stored, and its guard hits."""

    title: str  # e.g. "Your gumbel_kernel, launch 1 of 3: idx_mapping [0, 1, 2, 4, 5, 6, 7, -1]"
    table: OwnershipTable  # who stored last into each slot of q, and whether that was its owner
    stores: dict[int, list[int]]  # row -> rows of draft_logits it stored into (-1: before the buffer)
    hits: list[str]  # accesses outside the buffers, one sentence each

    @property
    def went_wrong(self) -> bool:
        return bool(self.hits or self.table.collisions())

    def summary(self) -> list[str]:
        """What went wrong in q, one line per slot (at most three), and whether a row reached outside."""
        lines = [f"draft_logits[{e['slot']}]: {e['verdict']}" for e in self.table.collisions()][:3]
        lines = lines or ["every live request's q was written by its own row"]
        if self.hits:
            lines.append(f"{len(self.hits)} access{'es' if len(self.hits) > 1 else ''} outside the buffers (below)")
        return lines

    @functools.cached_property
    def figure(self) -> Figure:
        return draw_launch(self)

    def text(self) -> str:
        hits = "\n".join(f"  {h}" for h in self.hits) or f"  {NOTHING_OUTSIDE}"
        return (f"{self.title}\n({REPLAYED})\nOutside the buffers:\n{hits}\n"
                f"Who stored into each slot of q (draft_logits):\n{self.table}")

    def html(self) -> str:
        try:
            png = figure_png(self.figure)
        except Exception:  # a figure that cannot be drawn must not hide the verdict: show the text
            return f'<pre>{html.escape(self.text())}</pre>'
        alt = html.escape("; ".join([self.title, *self.hits, *self.summary()]), quote=True)
        return f'<img src="data:image/png;base64,{png}" alt="{alt}" style="max-width:100%">'


def figure_png(fig: Figure) -> str:
    """The figure as a base64 PNG, for an <img> in HTML."""
    from labkit.viz.style import DPI

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def replay(fn: Callable, variant: str, case: KernelCase, name: str) -> YourLaunch:
    """Launch `fn` ('triton' kernel or 'torch' function) on each row of `case` alone, on guarded buffers.

    The case's live rows come first (as in every launch of the checks), as a LaunchRecord assumes.
    Raises whatever the learner's code raises, except an access outside every buffer, which the
    harness refuses before it happens: that becomes one of the hits.
    """
    stores: dict[int, list[int]] = {}
    hits: list[str] = []
    launch = launch_triton if variant == "triton" else launch_torch
    for row, slot in enumerate(case.mapping_list):
        try:
            out = launch(fn, _one_row(case, row))
        except Exception as err:
            if wild_access_in(err) is None:
                raise
            hits.append(f"row {row} (slot {slot}) reached memory outside every buffer (the checker stopped it)")
            continue
        stores[row] = out.stored_rows()
        hits += [h for h in _row_hits(row, slot, out) if h not in hits]
    title = (f"Your {name}, launch {case.index + 1} of {len(case_mappings())}: "
             f"idx_mapping {list(case.mapping_list)}")
    return YourLaunch(title, _ownership(case, stores), stores, hits)


def _one_row(case: KernelCase, row: int) -> KernelCase:
    # Views of the row's own inputs; the slot-indexed buffers are whole, as in the launch.
    rows = slice(row, row + 1)
    return dataclasses.replace(case, mapping_list=case.mapping_list[rows], logits=case.logits[rows],
                               mapping=case.mapping[rows], positions=case.positions[rows])


def _row_hits(row: int, slot: int, out: LaunchOutcome) -> list[str]:
    who = f"row {row} (slot {slot})"
    how = " (seen by its effect on the row's token)" if out.reads_seen == "by effect" else ""
    reads = [f"{who} read {_at(a.buffer, a.index)}{how}" for a in out.reads]
    return reads + [f"{who} stored into draft_logits[{i}]" for i in out.q_guard_rows_written]


def _at(buffer: str, index: int) -> str:
    """'temperature[-1]', or 'temperature[-1] or seeds[-1]' where a compiled kernel cannot tell which."""
    return " or ".join(f"{b}[{index}]" for b in buffer.split(" or "))


def _ownership(case: KernelCase, stores: dict[int, list[int]]) -> OwnershipTable:
    """The write trace of the rows' stores, in row order: the last row to store into a slot is its writer."""
    trace = WriteTrace(torch.full((M, 1), -1, dtype=torch.int32), torch.zeros((M, 1), dtype=torch.int32))
    for row in sorted(stores):
        for slot in (s for s in stores[row] if 0 <= s < M):
            trace.writer[slot, 0] = row
            trace.writes[slot, 0] += 1
    live = [s for s in case.mapping_list if s >= 0]
    return OwnershipTable.from_trace(trace, live, mapping=case.mapping_list)


def draw_launch(launch: YourLaunch) -> Figure:
    """The ownership map of the launch (rows -> where they stored; the last writer of each slot) above
    its guard hits, legible shown 1280 px wide."""
    # matplotlib is imported when a figure is drawn, not with the checkers.
    from matplotlib.figure import Figure

    from labkit.viz.ownership_plots import draw_ownership, owner_legend_handles
    from labkit.viz.style import BAD_COLOR, add_caption, run_caption

    rows = len(launch.table.mapping or [])
    lines = launch.hits or [NOTHING_OUTSIDE]
    fig = Figure(figsize=(WIDTH_IN, 3.4 + 0.3 * rows + 0.25 * len(lines)), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=[1.3, 1.0], height_ratios=[max(rows, 4), 0.9 + 0.9 * len(lines)])
    draw_ownership(fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), launch.table.record,
                   stores=launch.stores)
    _draw_hits(fig.add_subplot(grid[1, :]), lines, bad=bool(launch.hits))
    fig.suptitle("\n".join([launch.title, *launch.summary()]), fontsize=9,
                 color=BAD_COLOR if launch.went_wrong else "black")
    legend = fig.legend(handles=owner_legend_handles(), loc="outside lower center", ncol=2, fontsize=7,
                        frameon=False)
    return add_caption(fig, f"{run_caption()}\n{REPLAYED}", legend=legend)


def _draw_hits(ax, lines: list[str], bad: bool) -> None:
    from labkit.viz.style import BAD_COLOR, OK_COLOR

    ax.axis("off")
    ax.set_title("outside the buffers (the guard memory the checker watches)", fontsize=9, loc="left")
    for i, line in enumerate(lines):
        ax.text(0.0, 1 - (i + 0.5) / len(lines), line, transform=ax.transAxes, va="center", fontsize=9,
                color=BAD_COLOR if bad else OK_COLOR)
