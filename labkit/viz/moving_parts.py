"""A map of the moving parts on one screen: which buffers exist, who indexes them by row or by slot,
where the CUDA graph's boundary is, and where the bug is.

    moving_parts()               -> Figure   marks the bug's three places (red, 1-3)
    moving_parts(notes)          -> Figure   the same, with a bold line of `notes` under each place

Blue boxes are indexed by batch row, orange ones by request slot. The arrows from the kernel (one
program per row: blue) into ``draft_logits`` (orange) are the stores of q, by ``slot =
idx_mapping[row]``: the orange one a live row's store into its own request's slot, the red one
the bug, padded row 7 whose stale entry names slot 7, which is live again. The load of
``temperature[slot]`` crosses the other way, through the same translation.

It is shown before the exercises (notebook 00), so it says where the bug is and nothing more;
notebook 03 draws it again with its own notes (:mod:`labkit.viz.fixed_map`).
"""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

from labkit.viz.style import BAD_COLOR, ROW_COLOR, SLOT_COLOR, legible

# The graph's box is purple: green means "right" in every figure of the kit (labkit.viz.style).
ROW_FACE, SLOT_FACE, GRAPH_FACE, GRAPH_EDGE = "#deebf7", "#fee6ce", "#f7f5fb", "#6a51a3"
GRAPH_TITLE = "#3f007d"
_CODE_PREFIXES = ("idx", "temp", "seeds", "draft", "input", "target", "q =")
WIDTH, HEIGHT = 12.0, 7.0  # inches; the axes' data coordinates are inches too, so the layout reads as sizes
LINE = 0.165  # inches from one line of box text to the next (9 pt text)

# The three places of the bug.
BUG = {
    1: "padded rows keep the slots of an\nearlier, larger batch (stale)",
    2: "padded row 7\n(stale slot 7,\nlive again)",
    3: "padded sample rows: what do they\nhold? (exercise (c) asks)",
}
def _line_style(kind: str, code: bool) -> dict:
    """Text properties of one line of a box: red prose for the bug, bold for a note, monospace in a box of code."""
    if kind == "bug":
        return {"color": BAD_COLOR}
    return ({"family": "monospace"} if code else {}) | ({"weight": "bold"} if kind == "note" else {})


def _box(ax, x, y, w, h, lines, *, face="#ffffff", edge="#444444", dashed=False, gid=None) -> None:
    """A rounded box with `lines` ((kind, text) pairs or plain strings) stacked around its middle."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.04", facecolor=face, edgecolor=edge,
                                linestyle="--" if dashed else "-", linewidth=1.2, gid=gid))
    rows = [(kind, row) for kind, text in (ln if isinstance(ln, tuple) else ("text", ln) for ln in lines)
            for row in text.split("\n")]
    code = bool(rows) and rows[0][1].startswith(_CODE_PREFIXES)  # a box whose first line is code is all code
    top = y + h / 2 + LINE * (len(rows) - 1) / 2
    for i, (kind, row) in enumerate(rows):
        ax.text(x + w / 2, top - i * LINE, row, ha="center", va="center", fontsize=legible(9, ax.figure),
                **_line_style(kind, code))


def _badge(ax, x, y, number: int) -> None:
    """A red disc with the number of one of the bug's places (a note under a place carries its number)."""
    ax.text(x, y, str(number), ha="center", va="center", fontsize=legible(9, ax.figure), weight="bold",
            color="white", bbox={"boxstyle": "circle,pad=0.25", "facecolor": BAD_COLOR, "edgecolor": "none"})


def _arrow(ax, start, end, color="#444444", text=None, *, width=1.2, gid=None, at=None, ha="center") -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, linewidth=width,
                                 gid=gid))
    if text:
        x, y = at or ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.12)
        ax.text(x, y, text, fontsize=legible(9, ax.figure), ha=ha, va="center", color=color)


def _region(ax, x, w, title, *, face="#fafafa", edge="#999999", dashed=False, color="black") -> None:
    _box(ax, x, 0.7, w, 6.15, [], face=face, edge=edge, dashed=dashed)
    ax.text(x + w / 2, 6.5, title, ha="center", va="center", fontsize=legible(11, ax.figure), weight="bold",
            color=color)


def _note(notes: dict[int, str], place: int) -> list:
    return [("note", notes[place])] if place in notes else []


def _host(ax, notes: dict[int, str]) -> None:
    """The step's inputs, for exactly num_reqs requests."""
    _region(ax, 0.1, 3.2, "host, every step\n(exact num_reqs)")
    _box(ax, 0.3, 5.35, 2.8, 0.55, ["scheduler: live requests in\nbatch order -> their slots"])
    _box(ax, 0.3, 3.95, 2.8, 1.05, ["idx_mapping[:num_reqs] = slots", ("bug", BUG[1])]
         + _note(notes, 1), face=ROW_FACE, edge=BAD_COLOR, gid="idx_mapping")
    _box(ax, 0.3, 2.55, 2.8, 1.05, ["DFlash-style: sample_idx_mapping", ("bug", BUG[3])]
         + _note(notes, 3), face=ROW_FACE, edge=BAD_COLOR, gid="sample_idx_mapping")
    _box(ax, 0.3, 1.0, 2.8, 0.6, ["temperature, seeds\n(copied whole)"], face=SLOT_FACE, gid="temperature")
    _badge(ax, 0.3, 5.0, 1)
    _badge(ax, 0.3, 3.6, 3)
    _arrow(ax, (1.7, 5.31), (1.7, 5.04))


def _graph(ax, notes: dict[int, str]) -> None:
    """Inside the graph: num_reqs_padded rows, and the two stores into q (a live row's, a padded row's)."""
    _region(ax, 3.5, 4.9, "inside the CUDA graph: num_reqs_padded rows\n(a batch of 7 replays the graph captured "
            "for 8)", face=GRAPH_FACE, edge=GRAPH_EDGE, dashed=True, color=GRAPH_TITLE)
    _box(ax, 3.68, 5.2, 1.8, 0.65, ["draft model forward\nover input_tokens[row]"], face=ROW_FACE)
    _box(ax, 6.12, 4.15, 2.1, 1.7, ["Gumbel sampling kernel", "one program per row", "slot = idx_mapping[row]",
                                   "T = temperature[slot]", "q = logits[row] / T"]
         + _note(notes, 2), face=ROW_FACE, gid="kernel")
    _box(ax, 3.68, 1.0, 1.8, 0.5, ["draft_tokens[row, step]"], face=ROW_FACE)
    _box(ax, 6.0, 1.0, 2.2, 1.2, ["draft_logits[slot, step, :]", "(this is q)", ("bug", "padded rows holding a\n"
                                  "live slot overwrite it")], face=SLOT_FACE, edge=BAD_COLOR, gid="draft_logits")
    _arrow(ax, (5.52, 5.52), (6.08, 5.52), text="logits", at=(5.8, 5.68))
    _arrow(ax, (6.25, 4.1), (5.3, 1.55), color=ROW_COLOR, text="token", at=(5.66, 2.95), ha="right")
    # Both stores go through slot = idx_mapping[row]: from row-indexed work into slot-indexed q.
    # They run from the kernel box's edge to q's (the arrow's own margin keeps them off the lines).
    _arrow(ax, (6.4, 4.15), (6.4, 2.2), color=SLOT_COLOR, gid="store_q")
    _arrow(ax, (7.85, 4.15), (7.85, 2.2), color=BAD_COLOR, width=2.2, gid="padded_store")
    ax.text(6.5, 3.8, "store q at\n[slot, step]", fontsize=legible(9, ax.figure), ha="left", va="top",
            color=SLOT_COLOR)
    ax.text(7.75, 3.3, BUG[2], fontsize=legible(9, ax.figure), ha="right", va="top", color=BAD_COLOR)
    _badge(ax, 8.1, 3.15, 2)
    _arrow(ax, (3.14, 4.5), (6.08, 4.5), color=ROW_COLOR)
    _arrow(ax, (3.14, 1.3), (6.08, 4.3), color=SLOT_COLOR, text="load T by slot", at=(4.05, 2.95), ha="center")


def _verification(ax) -> None:
    """Verification: exactly num_reqs rows again, reading q by slot."""
    _region(ax, 8.6, 3.3, "outside the graph\n(exact num_reqs rows)")
    _box(ax, 8.8, 5.0, 2.9, 0.85, ["target model scores\nhistory + draft_tokens[row]\np = softmax(target / T)"],
         face=ROW_FACE)
    _box(ax, 8.8, 2.75, 2.9, 1.4, ["rejection sampler", "accept x if u < p(x) / q(x)",
                                   "q = softmax(draft_logits[slot])", "wrong q -> wrong output law"])
    _box(ax, 8.8, 1.0, 2.9, 0.5, ["emitted tokens -> next step"])
    _arrow(ax, (8.24, 1.7), (8.76, 3.0), color=SLOT_COLOR, text="q by slot", at=(8.75, 2.05), ha="left")
    _arrow(ax, (10.25, 4.96), (10.25, 4.19))
    _arrow(ax, (10.25, 2.71), (10.25, 1.54))


def moving_parts(notes: Mapping[int, str] | None = None) -> Figure:
    """One screen: which buffers exist, who indexes them by row or by slot, where the graph is, where the bug is.

    It marks the bug's three places (1: the entries of idx_mapping, 2: the padded row's store into a
    live slot, 3: DFlash's padded sample rows). `notes`: a bold line to add in the box of a place,
    by its number.
    """
    fig = Figure(figsize=(WIDTH, HEIGHT))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(0, HEIGHT)
    ax.axis("off")
    notes = dict(notes or {})
    unknown = sorted(set(notes) - set(BUG))
    if unknown:
        raise ValueError(f"moving_parts: no place numbered {unknown}; the places are {sorted(BUG)}")
    _host(ax, notes)
    _graph(ax, notes)
    _verification(ax)
    handles = [Patch(facecolor=ROW_FACE, edgecolor="#444444", label="indexed by batch row"),
               Patch(facecolor=SLOT_FACE, edgecolor="#444444", label="indexed by request slot"),
               Patch(facecolor=GRAPH_FACE, edgecolor=GRAPH_EDGE, linestyle="--", label="graph boundary"),
               Patch(facecolor="white", edgecolor=BAD_COLOR, label="the bug (1-3): a padded row reaches a live slot")]
    ax.legend(handles=handles, loc="lower center", ncol=4, fontsize=legible(9, fig), frameon=False,
              bbox_to_anchor=(0.5, 0.0))
    return fig
