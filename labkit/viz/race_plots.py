"""The race on a GPU, block by block: which row's store landed last in each vocab block of q.

Before the fix, a padded row holding a live request's slot and that request's own row both store
``draft_logits[slot, step, :]``. The sampling kernel splits each row's vocabulary into blocks of
``block_v`` entries, one program per (row, block), and on a GPU the programs of the two rows run
concurrently: each block of q ends up with whichever row's store landed last. At a toy vocabulary
one block covers the whole row, so one row wins the whole q; at a real vocabulary q comes out a
patchwork of both rows. :func:`plot_race_blocks` draws this from a recorded GPU run
(``record["race_blocks"]``, see :func:`labkit.viz.gpu_records.race_block_entries`).
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from labkit.errors import LabkitInputError
from labkit.viz.gpu_records import caption, race_block_entries
from labkit.viz.ownership_plots import OVERWRITTEN, OWN_OK, OWNER_COLORS
from labkit.viz.style import QUIET_COLOR, add_caption, legible

LIVE_WON, PADDED_WON = OWNER_COLORS[OWN_OK], OWNER_COLORS[OVERWRITTEN]


def block_edges(vocab: int, block_v: int, blocks: int) -> np.ndarray:
    """Token ids where the vocab blocks start, plus `vocab` at the end (the last block may be short)."""
    return np.minimum(np.arange(blocks + 1) * block_v, vocab)


def whole_launch_summary(entry: dict) -> str:
    """How many launches left the whole q to one row, and how many a mix of both."""
    wins = entry["whole_launch_wins"]
    padded, live, n = int(wins.get("padded", 0)), int(wins.get("live", 0)), int(entry["launches"])
    return (f"launches with the whole q from the padded row: {padded},\n"
            f"from the live row: {live}, mixed: {n - padded - live} (of {n})")


def _draw_example(ax, entry: dict, edges: np.ndarray) -> None:
    owner = np.asarray(entry["example_owner"], dtype=float)[None, :]
    ax.pcolormesh(edges, [0, 1], owner, cmap=ListedColormap([LIVE_WON, PADDED_WON]), vmin=0, vmax=1,
                  edgecolors="white", linewidth=0.3 if len(edges) < 80 else 0)
    ax.set_xlim(0, edges[-1])
    ax.set_yticks([])
    ax.set_xlabel("token id (vocab index)")
    ax.set_title(f"one launch: {float(owner.mean()):.0%} of the blocks\nfrom the padded row", fontsize=9)


def _draw_block_wins(ax, entry: dict, edges: np.ndarray) -> None:
    share = 100 * np.asarray(entry["padded_wins_per_block"], dtype=float) / entry["launches"]
    ax.stairs(share, edges, fill=True, color=PADDED_WON, alpha=0.85)
    ax.axhline(50, color=QUIET_COLOR, lw=0.7, ls="--")
    ax.set_xlim(0, edges[-1])
    ax.set_ylim(0, 100)
    ax.set_xlabel("token id (vocab index)")
    ax.set_ylabel("launches the padded\nrow won (%)")
    ax.set_title(f"per vocab block (BLOCK_V = {entry['block_v']}),\nover {entry['launches']} launches", fontsize=9)


def _draw_launch_shares(ax, entry: dict) -> None:
    shares = 100 * np.asarray(entry["padded_share_per_launch"], dtype=float)
    ax.hist(shares, bins=np.linspace(0, 100, 21), color=PADDED_WON, edgecolor="white")
    ax.set_xlim(0, 100)
    ax.set_xlabel("q's elements from the padded row (%)")
    ax.set_ylabel("launches")
    ax.set_title(whole_launch_summary(entry), fontsize=legible(8, ax.figure))


def plot_race_blocks(record: dict, vocab: int | None = None) -> Figure:
    """Per recorded vocabulary (or only `vocab`): one launch's blocks, per-block wins, per-launch shares."""
    entries = race_block_entries(record)
    if vocab is not None:
        entries = [e for e in entries if e["vocab"] == vocab]
        if not entries:
            raise LabkitInputError(f"vocab: the record has no race_blocks entry at vocab {vocab}")
    fig = Figure(figsize=(11.0, 1.6 + 2.9 * len(entries)), layout="constrained")
    grid = fig.subplots(len(entries), 3, squeeze=False)
    for axes, entry in zip(grid, entries, strict=True):
        edges = block_edges(entry["vocab"], entry["block_v"], len(entry["example_owner"]))
        _draw_example(axes[0], entry, edges)
        _draw_block_wins(axes[1], entry, edges)
        _draw_launch_shares(axes[2], entry)
        live_row, padded_row = entry["rows"]
        axes[0].set_ylabel(f"vocab {entry['vocab']}\nlive row {live_row}, padded row {padded_row}",
                           fontsize=legible(8, fig))
    legend = fig.legend(handles=[Patch(color=PADDED_WON, label="written last by the padded row (its stale slot is a "
                                                               "live request's: corrupted q)"),
                                 Patch(color=LIVE_WON, label="written last by the request's own live row (right q)")],
                        loc="outside lower center", ncol=2, fontsize=legible(8, fig), frameon=False)
    fig.suptitle("Before the fix, on a GPU: who wrote each vocab block of a live request's q", fontsize=10)
    return add_caption(fig, caption(record) + "\none program per (row, vocab block) and the two rows' programs run "
                       "concurrently; a block counts as the padded row's when most of its elements hold its values",
                       legend=legend)
