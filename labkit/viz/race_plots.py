"""The race on a GPU, block by block: which row's store landed last in each vocab block of q.

Before the fix, a padded row holding a live request's slot and that request's own row both store
``draft_logits[slot, step, :]``. The sampling kernel splits each row's vocabulary into blocks of
``block_v`` entries, one program per (row, block), and on a GPU the programs of the two rows run
concurrently: each block of q ends up with whichever row's store landed last. At a toy vocabulary
one block covers the whole row, so one row wins the whole q; at a real vocabulary q comes out a
patchwork of both rows. :func:`plot_race_blocks` draws this from the recorded GPU runs: the
per-block panels from ``record["race_blocks"]`` (run 2, see
:func:`labkit.viz.gpu_records.race_block_entries`), and a last row with every recorded run side by
side (run 1, ``record["race"]``, holds whole-launch counts only; :func:`~labkit.viz.gpu_records.race_runs`),
with the percentages the README and docs/MECHANICS.md print.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from labkit.errors import LabkitInputError
from labkit.viz.gpu_records import race_block_entries, race_runs, section_caption
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
    return (f"whole q from the padded row: {padded},\n"
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


def _run_label(run: dict) -> str:
    when = str(run["provenance"].get("date", ""))[:10]
    return (f"V={run['vocab']}, run {run['run']}{' (graph)' if run['graph'] else ''}\n{when}"
            f"{chr(10) + 'superseded' if run.get('superseded') else ''}")


def _draw_runs(ax, runs: list[dict]) -> None:
    """Every recorded run: the share of q from the padded row (red) and from the live row (green),
    and the launches each row won whole."""
    y = np.arange(len(runs))[::-1]
    padded = np.array([100 * r["padded_share"] for r in runs])
    ax.barh(y, padded, color=PADDED_WON, height=0.7)
    ax.barh(y, 100 - padded, left=padded, color=LIVE_WON, height=0.7)
    for yi, share, r in zip(y, padded, runs, strict=True):
        ax.text(1, yi, f"{share:.0f}% from the padded row", va="center", ha="left", color="white",
                fontsize=legible(8, ax.figure), fontweight="bold")
        ax.text(99, yi, f"whole launches won: padded {r['padded_won']}, live {r['live_won']}, mixed {r['mixed']} "
                f"(of {r['launches']})", va="center", ha="right", fontsize=legible(8, ax.figure),
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1})
    ax.set_yticks(y, [_run_label(r) for r in runs], fontsize=legible(8, ax.figure))
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of q's elements from each row, over all launches (%)")
    ax.set_title("every recorded run, superseded ones too: run 1 = section race (whole-launch counts), "
                 "run 2 = section race_blocks (panels above)", fontsize=9)


def plot_race_blocks(record: dict, vocab: int | None = None) -> Figure:
    """Per recorded vocabulary (or only `vocab`): one launch's blocks, per-block wins, per-launch shares."""
    entries = race_block_entries(record)
    if vocab is not None:
        entries = [e for e in entries if e["vocab"] == vocab]
        if not entries:
            raise LabkitInputError(f"vocab: the record has no race_blocks entry at vocab {vocab}")
    runs = [r for r in race_runs(record, include_superseded=True) if vocab is None or r["vocab"] == vocab]
    fig = Figure(figsize=(11.0, 1.6 + 2.9 * len(entries) + 0.65 * len(runs)), layout="constrained")
    outer = fig.add_gridspec(len(entries) + 1, 3, height_ratios=[2.9] * len(entries) + [0.65 * len(runs) + 0.4])
    grid = [[fig.add_subplot(outer[i, j]) for j in range(3)] for i in range(len(entries))]
    summary = fig.add_subplot(outer[len(entries), :])
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
    _draw_runs(summary, runs)
    fig.suptitle("Before the fix, on a GPU: who wrote each vocab block of a live request's q", fontsize=10)
    return add_caption(fig, section_caption(record, "race_blocks", "race") + "\none program per (row, vocab block) "
                       "and the two rows' programs run concurrently; a block counts as the padded row's when most "
                       "of its elements hold its values", legend=legend)
