"""Write ownership of one launch: which row stored last to each draft_logits[slot, step], and which stores were wrong.

    ownership(launch)        -> Ownership   the classification, and sentences naming each overwrite
    ownership_map(launch)    -> Figure      rows -> slots they stored to, and the last writer per (slot, step)
    draw_ownership(ax_rows, ax_table, launch)   the same on two axes of your own figure

The arrows follow the mapping (the kit's kernels store where it says), or, with ``stores=`` (row ->
the rows of draft_logits it stored into), what a kernel really did: a learner's kernel may store
nowhere, into two slots, or outside the buffer (an arrow to the guard memory there).

Colours: blue is a live row (indexed by batch row), orange a request slot; red marks a padded row's
store over a live request's q, the one thing that corrupts output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Patch

from labkit.errors import LabkitInputError
from labkit.viz.mapping_plots import LIVE, PAD_COLLIDES, PAD_EMPTY, PAD_STALE, classify_mapping
from labkit.viz.style import BAD_COLOR, OK_COLOR, QUIET_COLOR, ROW_COLOR, SLOT_COLOR, add_caption, legible, run_caption

OWN_OK, OVERWRITTEN, STALE_WRITE, NO_WRITE = range(4)
OWNER_COLORS = {OWN_OK: "#c7e9c0", OVERWRITTEN: "#e34a33", STALE_WRITE: "#fdd49e", NO_WRITE: "#f0f0f0"}
OWNER_LABELS = {
    OWN_OK: "q written by its own live row",
    OVERWRITTEN: "q of a live request, last written by a padded row",
    STALE_WRITE: "q of a free slot, stored into anyway",
    NO_WRITE: "not written in this launch",
}
EDGE_NAMES = {LIVE: "live", PAD_COLLIDES: "collides", PAD_STALE: "stale", PAD_EMPTY: "empty"}
# With `stores=`: "guard" is a store outside draft_logits' rows, "none" a row that stored nothing.
NO_STORE_KINDS = ("empty", "none")


@dataclass
class Ownership:
    """Who stored to draft_logits[slot, step] in one launch, and which stores were wrong."""

    kinds: np.ndarray  # [max_num_reqs, k] OWN_OK / OVERWRITTEN / STALE_WRITE / NO_WRITE
    writer: np.ndarray  # [max_num_reqs, k] the row whose store landed last (-1: none)
    writes: np.ndarray  # [max_num_reqs, k] how many rows stored there
    edges: list[tuple[int, int, str]] = field(default_factory=list)  # (row, slot, one of EDGE_NAMES' or "guard"/"none")
    sentences: list[str] = field(default_factory=list)


def _row_word(row: int, launch) -> str:
    kind = "padded " if row >= launch.num_reqs * launch.samples_per_req else ""
    return f"{kind}{'sample row' if launch.samples_per_req > 1 else 'row'} {row}"


def _classify_writes(launch, writer: np.ndarray) -> np.ndarray:
    owner_row = {slot: row for row, slot in enumerate(launch.live_slots)}
    kinds = np.full(writer.shape, NO_WRITE, dtype=np.int64)
    for slot, step in zip(*np.nonzero(writer >= 0), strict=True):
        if slot in owner_row:
            own = launch.own_sample_row(owner_row[int(slot)], int(step))
            kinds[slot, step] = OWN_OK if writer[slot, step] == own else OVERWRITTEN
        else:
            kinds[slot, step] = STALE_WRITE
    return kinds


def _overwrite_sentences(launch) -> list[str]:
    # One sentence per (padded row, slot): "padded row 7 wrote slot 7's q (draft steps 0, 1) after row 6 did".
    grouped: dict[tuple[int, int, int], list[int]] = {}
    for slot, step, w, live_row in launch.collisions():
        grouped.setdefault((w, slot, live_row), []).append(step)
    sentences = []
    for (w, slot, live_row), steps in grouped.items():
        victim = launch.own_sample_row(live_row, steps[0])
        which = ", ".join(str(s) for s in steps)
        sentences.append(f"{_row_word(w, launch)} wrote slot {slot}'s q (draft step{'s' if len(steps) > 1 else ''} "
                         f"{which}) after {_row_word(victim, launch)} did")
    return sentences


def _store_kind(launch, row: int, slot: int) -> str:
    if not 0 <= slot < launch.writer.shape[0]:
        return "guard"
    if row < launch.num_reqs * launch.samples_per_req and slot == launch.live_slots[row // launch.samples_per_req]:
        return "live"
    return "collides" if slot in launch.live_slots else "stale"


def _store_edges(launch, values: np.ndarray, stores: dict[int, list[int]]) -> list[tuple[int, int, str]]:
    """One edge per store a row made; a row that stored nothing gets a "none" stub at its mapped slot."""
    edges = []
    for r in range(launch.rows * launch.samples_per_req):
        targets = stores.get(r, [])
        edges += [(r, int(s), _store_kind(launch, r, int(s))) for s in targets] or [(r, int(values[r]), "none")]
    return edges


def ownership(launch, *, stores: dict[int, list[int]] | None = None) -> Ownership:
    """Classify each (slot, draft step) of one launch, and say in words which q were overwritten.

    stores: row -> the rows of draft_logits it stored into (any index, outside the buffer too), where they are
    not what the mapping says; the arrows then follow them.
    """
    if launch.writer is None:
        raise LabkitInputError("this launch kept no write trace (greedy drafting stores no q, or record=False)")
    writer = launch.writer.detach().to("cpu", torch.int64).numpy()
    writes = launch.writes.detach().to("cpu", torch.int64).numpy()
    values, row_kinds = classify_mapping(launch)
    if stores is None:
        edges = [(r, int(values[r]), EDGE_NAMES[int(row_kinds[r])])
                 for r in range(launch.rows * launch.samples_per_req)]
    else:
        edges = _store_edges(launch, values, stores)
    return Ownership(_classify_writes(launch, writer), writer, writes, edges, _overwrite_sentences(launch))


def _draw_row_arrows(ax, launch, own: Ownership, n_slots: int) -> None:
    """Left panel: a bipartite map, rows at x=0, slots at x=1, an arrow per store."""
    n_rows = launch.rows * launch.samples_per_req
    span = max(n_rows, n_slots)

    def y_of(i, n):
        return span - 1 - i * (span - 1) / max(n - 1, 1) if n > 1 else span / 2

    size = legible(7, ax.figure)
    style = {"live": (ROW_COLOR, 1.0, "-"), "collides": (BAD_COLOR, 2.2, "-"), "stale": (QUIET_COLOR, 1.0, "--"),
             "guard": (BAD_COLOR, 2.2, "-")}
    for r, slot, kind in own.edges:
        if kind in NO_STORE_KINDS:
            ax.plot([0, 0.28], [y_of(r, n_rows)] * 2, color=QUIET_COLOR, linewidth=1, linestyle=":")
            ax.text(0.3, y_of(r, n_rows), f"slot {slot}: no store", fontsize=size, va="center", color=QUIET_COLOR)
            continue
        color, width, line = style[kind]
        ax.add_patch(FancyArrowPatch((0.04, y_of(r, n_rows)), (0.96, y_of(slot, n_slots)), arrowstyle="-|>",
                                     mutation_scale=8, color=color, linewidth=width, linestyle=line))
    for r in range(n_rows):
        padded = r >= launch.num_reqs * launch.samples_per_req
        ax.plot(0, y_of(r, n_rows), "o", color=QUIET_COLOR if padded else ROW_COLOR, markersize=6)
        ax.text(-0.04, y_of(r, n_rows), f"{'pad ' if padded else ''}{r}", ha="right", va="center", fontsize=size)
    live_slots = set(launch.live_slots)
    for s in range(n_slots):
        ax.plot(1, y_of(s, n_slots), "s", color=SLOT_COLOR if s in live_slots else "#fdd0a2", markersize=6)
        ax.text(1.04, y_of(s, n_slots), f"slot {s}", ha="left", va="center", fontsize=size)
    # A store outside the buffer lands where the slot axis continues: slot -1 above slot 0.
    guards = sorted({s for _, s, kind in own.edges if kind == "guard"})
    guard_ys = [y_of(s, n_slots) for s in guards]
    for s, y in zip(guards, guard_ys, strict=True):
        ax.plot(1, y, "x", color=BAD_COLOR, markersize=7)
        ax.text(1.04, y, f"slot {s} (guard)", ha="left", va="center", fontsize=size, color=BAD_COLOR)
    ax.set_xlim(-0.35, 1.35)
    ax.set_ylim(min([-1.0] + [y - 0.6 for y in guard_ys]), max([float(span)] + [y + 0.6 for y in guard_ys]))
    ax.axis("off")
    ax.set_title("rows -> draft_logits[slot] they store to", fontsize=legible(9, ax.figure))


def _draw_writer_table(ax, own: Ownership, n_slots: int) -> None:
    """Right panel: draft_logits[slot, step] coloured by who wrote it last."""
    size = legible(7, ax.figure)
    ax.imshow(own.kinds[:n_slots], cmap=ListedColormap([OWNER_COLORS[k] for k in range(4)]), vmin=-0.5, vmax=3.5,
              aspect="auto", interpolation="nearest")
    for slot, step in zip(*np.nonzero(own.writer[:n_slots] >= 0), strict=True):
        count = int(own.writes[slot, step])
        text = f"row {int(own.writer[slot, step])}" + (f"\n{count} stores" if count > 1 else "")
        color = "white" if own.kinds[slot, step] == OVERWRITTEN else "black"
        ax.text(step, slot, text, ha="center", va="center", fontsize=size, color=color)
    ax.set_xticks(range(own.kinds.shape[1]))
    ax.set_yticks(range(n_slots))
    ax.set_yticklabels([f"slot {s}" for s in range(n_slots)], fontsize=size)
    ax.set_xlabel("draft step")
    ax.set_title("last writer of draft_logits[slot, step]", fontsize=legible(9, ax.figure))


def draw_ownership(ax_rows, ax_table, launch, *, title: str | None = None,
                   stores: dict[int, list[int]] | None = None) -> Ownership:
    """Left: rows -> slots they stored to. Right: draft_logits[slot, step] with its last writer.

    stores: as in :func:`ownership` (what each row really stored into; default: the mapping).
    """
    own = ownership(launch, stores=stores)
    # Slots that play a part in this launch (live, or stored into); the rest of the table is empty.
    used = [s for _, s, kind in own.edges if s >= 0 and kind != "guard"] + list(launch.live_slots)
    n_slots = min(own.kinds.shape[0], max(used + [launch.rows - 1]) + 1)
    _draw_row_arrows(ax_rows, launch, own, n_slots)
    _draw_writer_table(ax_table, own, n_slots)
    if title:
        ax_rows.figure.suptitle(title, fontsize=10)
    return own


def owner_legend_handles() -> list[Patch]:
    """The legend of the last-writer table's colours."""
    return [Patch(facecolor=OWNER_COLORS[k], edgecolor="#555555", label=OWNER_LABELS[k]) for k in range(4)]


def ownership_map(launch, *, title: str | None = None, source: str | None = None) -> Figure:
    """The write-ownership map of one launch, with the overwrites spelled out above it.

    `source`: the provenance line under the figure (default: the labkit backend and device in use).
    """
    n = max(launch.rows * launch.samples_per_req, launch.writer.shape[0] if launch.writer is not None else 1)
    fig = Figure(figsize=(10.0, max(3.8, 0.28 * n + 2.0)), layout="constrained")
    ax_rows, ax_table = fig.subplots(1, 2, width_ratios=[1.3, 1.0])
    own = draw_ownership(ax_rows, ax_table, launch)
    legend = fig.legend(handles=owner_legend_handles(), loc="outside lower center", ncol=2,
                        fontsize=legible(7, fig), frameon=False)
    summary = "\n".join(own.sentences[:3]) if own.sentences else "every live request's q was written by its own row"
    fig.suptitle((title + "\n" if title else "") + summary, fontsize=9, color=BAD_COLOR if own.sentences else OK_COLOR)
    return add_caption(fig, source or run_caption(), legend=legend)
