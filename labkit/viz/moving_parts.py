"""A map of the moving parts on one screen: which buffers exist, who indexes them by row or by slot,
where the CUDA graph's boundary is, and where the three parts of the fix act.

Blue boxes are indexed by batch row, orange ones by request slot. The arrows from the kernel (one
program per row: blue) into ``draft_logits`` (orange) are the stores of q, by ``slot =
idx_mapping[row]``: the orange one a live row's store into its own request's slot, the red one
the bug, padded row 7 whose stale entry names slot 7, which is live again. The load of
``temperature[slot]`` crosses the other way, through the same translation.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

from labkit.viz.style import BAD_COLOR, ROW_COLOR, SLOT_COLOR

ROW_FACE, SLOT_FACE, GRAPH_FACE, GRAPH_EDGE = "#deebf7", "#fee6ce", "#f7fcf5", "#31a354"
_CODE_PREFIXES = ("idx", "temp", "seeds", "draft", "input", "target", "q =")


def _box(ax, x, y, w, h, text, *, face="#ffffff", edge="#444444", size=7, dashed=False, gid=None):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", facecolor=face, edgecolor=edge,
                                linestyle="--" if dashed else "-", linewidth=1.2, gid=gid))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
                family="monospace" if text.startswith(_CODE_PREFIXES) else None)


def _arrow(ax, start, end, color="#444444", text=None, *, width=1.2, gid=None, offset=0.015):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=color, linewidth=width,
                                 gid=gid))
    if text:
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + offset, text, fontsize=7, ha="center",
                color=color)


def _region(ax, x, w, title, *, face="#fafafa", edge="#999999", dashed=False, color="black"):
    _box(ax, x, 0.08, w, 0.8, "", face=face, edge=edge, dashed=dashed)
    ax.text(x + w / 2, 0.83, title, ha="center", va="center", fontsize=9, weight="bold", color=color)


def _host(ax) -> None:
    """The step's inputs, for exactly num_reqs requests."""
    _region(ax, 0.01, 0.22, "host, every step\n(exact num_reqs)")
    _box(ax, 0.025, 0.66, 0.19, 0.1, "scheduler: live requests in\nbatch order -> their slots")
    _box(ax, 0.025, 0.46, 0.19, 0.14, "idx_mapping[:num_reqs] = slots\nFIX 1: idx_mapping[num_reqs:] = -1",
         face=ROW_FACE, gid="idx_mapping")
    _box(ax, 0.025, 0.28, 0.19, 0.12, "DFlash-style: sample_idx_mapping\nFIX 3: pad with -1, not 0", face=ROW_FACE)
    _box(ax, 0.025, 0.12, 0.19, 0.1, "temperature, seeds\n(copied whole)", face=SLOT_FACE, gid="temperature")
    _arrow(ax, (0.12, 0.66), (0.12, 0.6))


def _graph(ax) -> None:
    """Inside the graph: num_reqs_padded rows, and the two stores into q (a live row's, a padded row's)."""
    _region(ax, 0.27, 0.42, "inside the CUDA graph: num_reqs_padded rows\n(a batch of 7 replays the graph captured "
            "for 8)", face=GRAPH_FACE, edge=GRAPH_EDGE, dashed=True, color="#006d2c")
    _box(ax, 0.29, 0.62, 0.17, 0.12, "draft model forward\nover input_tokens[row]", face=ROW_FACE)
    _box(ax, 0.5, 0.5, 0.17, 0.24, "Gumbel sampling kernel\none program per row\nslot = idx_mapping[row]\n"
         "T = temperature[slot]\nq = logits[row] / T\nFIX 2: skip slot < 0\n(masked loads + store)",
         face=ROW_FACE, gid="kernel")
    _box(ax, 0.29, 0.12, 0.17, 0.1, "draft_tokens[row, step]", face=ROW_FACE)
    _box(ax, 0.5, 0.12, 0.17, 0.2, "draft_logits[slot, step, :]\n(this is q)\n\npadded rows holding a\n"
         "live slot overwrite it", face=SLOT_FACE, edge=BAD_COLOR, gid="draft_logits")
    _arrow(ax, (0.46, 0.68), (0.5, 0.68), text="logits")
    _arrow(ax, (0.5, 0.56), (0.41, 0.22), color=ROW_COLOR, text="token", offset=0.0)
    # Both stores go through slot = idx_mapping[row]: from row-indexed work into slot-indexed q.
    _arrow(ax, (0.535, 0.48), (0.535, 0.34), color=SLOT_COLOR, gid="store_q")
    _arrow(ax, (0.645, 0.48), (0.645, 0.34), color=BAD_COLOR, width=2.0, gid="padded_store")
    ax.text(0.59, 0.475, "store q at\n[slot, step]", fontsize=6.5, ha="center", va="top", color=SLOT_COLOR)
    ax.text(0.59, 0.425, "padded row 7\n(stale slot 7,\nlive again)", fontsize=6.5, ha="center", va="top",
            color=BAD_COLOR)
    _arrow(ax, (0.215, 0.53), (0.5, 0.585), color=ROW_COLOR)
    _arrow(ax, (0.215, 0.17), (0.5, 0.53), color=SLOT_COLOR, text="load T by slot", offset=0.03)


def _verification(ax) -> None:
    """Verification: exactly num_reqs rows again, reading q by slot."""
    _region(ax, 0.73, 0.26, "outside the graph\n(exact num_reqs rows)")
    _box(ax, 0.75, 0.6, 0.22, 0.14, "target model scores\nhistory + draft_tokens[row]\np = softmax(target / T)",
         face=ROW_FACE)
    _box(ax, 0.75, 0.3, 0.22, 0.2, "rejection sampler\naccept x if u < p(x) / q(x)\nq = softmax(draft_logits[slot])\n"
         "wrong q -> wrong output law")
    _box(ax, 0.75, 0.12, 0.22, 0.1, "emitted tokens -> next step")
    _arrow(ax, (0.67, 0.22), (0.75, 0.36), color=SLOT_COLOR)
    ax.text(0.715, 0.25, "q by\nslot", fontsize=7, ha="left", va="top", color=SLOT_COLOR)
    _arrow(ax, (0.86, 0.6), (0.86, 0.5))
    _arrow(ax, (0.86, 0.3), (0.86, 0.22))


def moving_parts() -> Figure:
    """One screen: which buffers exist, who indexes them by row or by slot, where the graph is."""
    fig = Figure(figsize=(12.0, 5.0))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.005, 1.005)
    ax.set_ylim(0.0, 0.92)
    ax.axis("off")
    _host(ax)
    _graph(ax)
    _verification(ax)
    handles = [Patch(facecolor=ROW_FACE, edgecolor="#444444", label="indexed by batch row"),
               Patch(facecolor=SLOT_FACE, edgecolor="#444444", label="indexed by request slot"),
               Patch(facecolor=GRAPH_FACE, edgecolor=GRAPH_EDGE, linestyle="--", label="graph boundary"),
               Patch(facecolor="white", edgecolor=BAD_COLOR, label="the bug: a padded row's store in a live slot")]
    ax.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.01))
    return fig
