"""Figures that explain the bug. Every public plotting function returns a matplotlib Figure.

Figures are built with ``matplotlib.figure.Figure`` (not pyplot), so nothing is shown twice in a
notebook and nothing global changes; sizes are fixed and nothing is random, so a figure depends on
its data only. The data behind each figure comes from a function you can call and test on its own:

    mapping_grid(launches)      -> MappingGrid      what the mapping buffer held, cell by cell
    ownership(launch)           -> Ownership        who stored to which draft_logits[slot, step]
    q_pair(launch, slot, step)  -> QPair            q the sampler used vs q the token was drawn from

Colours: blue is "indexed by batch row", orange "indexed by request slot"; red marks a padded row
that overwrites a live request's q.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch, Rectangle

from labkit.models import ALPHABET

# -- categories and colours -----------------------------------------------------------------------

LIVE, PAD_COLLIDES, PAD_STALE, PAD_EMPTY, NOT_LAUNCHED = range(5)
KIND_LABELS = {
    LIVE: "live row (its request's slot)",
    PAD_COLLIDES: "padded row, stale slot of a LIVE request (overwrites its q)",
    PAD_STALE: "padded row, stale slot of a free request (harmless write)",
    PAD_EMPTY: "padded row holding -1 (masked: no store)",
    NOT_LAUNCHED: "outside the launch (not read)",
}
KIND_COLORS = {
    LIVE: "#9ecae1",
    PAD_COLLIDES: "#e34a33",
    PAD_STALE: "#fdd49e",
    PAD_EMPTY: "#d9d9d9",
    NOT_LAUNCHED: "#ffffff",
}
ROW_COLOR = "#3182bd"
SLOT_COLOR = "#e6550d"
OK_COLOR = "#31a354"
BAD_COLOR = "#de2d26"
QUIET_COLOR = "#969696"


def token_labels(alphabet: str = ALPHABET) -> list[str]:
    """Tick labels for the toy vocabulary (ASCII only, so every font has the glyphs)."""
    names = {"\n": "nl", " ": "sp"}
    return ["pad"] + [names.get(c, c) for c in alphabet]


# -- the mapping buffer over steps ----------------------------------------------------------------

@dataclass
class MappingGrid:
    """The row -> slot mapping the sampling kernel saw, one line per launch.

    values[i, r]: what buffer entry r held at launch i; kinds[i, r]: one of LIVE, PAD_COLLIDES,
    PAD_STALE, PAD_EMPTY, NOT_LAUNCHED. For a DFlash-style drafter an entry is a sample row
    (request row * k + draft step).
    """

    values: np.ndarray
    kinds: np.ndarray
    steps: list[int]
    samples_per_req: int = 1

    def count(self, kind: int) -> int:
        return int((self.kinds == kind).sum())


def classify_mapping(launch) -> tuple[np.ndarray, np.ndarray]:
    """(values, kinds) of one LaunchRecord's mapping buffer."""
    values = launch.mapping.to(torch.int64).numpy().copy()
    spr = launch.samples_per_req
    live_end, launched_end = launch.num_reqs * spr, launch.rows * spr
    live_slots = set(launch.live_slots)
    kinds = np.full(values.shape, NOT_LAUNCHED, dtype=np.int64)
    for r, v in enumerate(values[:launched_end]):
        if r < live_end:
            kinds[r] = LIVE
        elif v < 0:
            kinds[r] = PAD_EMPTY
        elif int(v) in live_slots:
            kinds[r] = PAD_COLLIDES
        else:
            kinds[r] = PAD_STALE
    return values, kinds


def mapping_grid(launches, steps=None, width: int | None = None) -> MappingGrid:
    """Stack `classify_mapping` over launches; `width` keeps only the first entries of the buffer."""
    launches = list(launches)
    if not launches:
        raise ValueError("mapping_grid needs at least one launch record")
    pairs = [classify_mapping(launch) for launch in launches]
    values = np.stack([v for v, _ in pairs])
    kinds = np.stack([k for _, k in pairs])
    if width is not None:
        values, kinds = values[:, :width], kinds[:, :width]
    return MappingGrid(values, kinds, list(steps) if steps is not None else list(range(len(launches))),
                       launches[0].samples_per_req)


def launched_width(launches) -> int:
    """Buffer entries any launch of a run read (the rest of the buffer is never looked at)."""
    return max(launch.rows * launch.samples_per_req for launch in launches)


def _kind_cmap() -> ListedColormap:
    return ListedColormap([KIND_COLORS[k] for k in range(5)])


def kind_legend_handles(kinds=None) -> list[Patch]:
    shown = range(5) if kinds is None else sorted(set(int(k) for k in np.unique(kinds)))
    return [Patch(facecolor=KIND_COLORS[k], edgecolor="#555555", label=KIND_LABELS[k]) for k in shown]


def draw_mapping(ax, grid: MappingGrid, *, highlight: int | None = None, title: str | None = None,
                 annotate: bool = True, legend: bool = True) -> None:
    """Heat map of `grid` on `ax`: rows of the figure are launches, columns buffer entries."""
    n_steps, width = grid.kinds.shape
    ax.imshow(grid.kinds, cmap=_kind_cmap(), vmin=-0.5, vmax=4.5, aspect="auto", interpolation="nearest")
    if annotate and n_steps * width <= 1200:
        size = 8 if width <= 16 else 6
        for i in range(n_steps):
            for r in range(width):
                kind = grid.kinds[i, r]
                color = "#bdbdbd" if kind == NOT_LAUNCHED else ("white" if kind == PAD_COLLIDES else "black")
                ax.text(r, i, str(int(grid.values[i, r])), ha="center", va="center", fontsize=size, color=color)
    ax.set_xticks(range(width))
    ax.set_xticklabels([str(r) for r in range(width)], fontsize=7)
    step_ticks = range(n_steps) if n_steps <= 20 else range(0, n_steps, max(1, n_steps // 12))
    ax.set_yticks(list(step_ticks))
    ax.set_yticklabels([str(grid.steps[i]) for i in step_ticks], fontsize=7)
    ax.set_xlabel("sample row (request row x k + draft step)" if grid.samples_per_req > 1
                  else "batch row of the mapping buffer")
    ax.set_ylabel("engine step")
    ax.set_xticks(np.arange(-0.5, width, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, n_steps, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    if highlight is not None and 0 <= highlight < n_steps:
        ax.add_patch(Rectangle((-0.5, highlight - 0.5), width, 1, fill=False, edgecolor="black", linewidth=2))
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(handles=kind_legend_handles(), loc="upper center", bbox_to_anchor=(0.5, -0.12 if n_steps < 6 else -0.06),
                  ncol=2, fontsize=7, frameon=False)


def mapping_heatmap(launches_or_grid, *, title: str = "idx_mapping as the sampling kernel saw it",
                    highlight: int | None = None, width: int | None = None) -> Figure:
    """The mapping buffer over steps: live rows, padded rows with a stale slot, padded rows with -1."""
    grid = launches_or_grid if isinstance(launches_or_grid, MappingGrid) else mapping_grid(launches_or_grid, width=width)
    n_steps, n_cols = grid.kinds.shape
    height = 2.6 + 0.22 * n_steps if n_steps > 4 else 3.2
    fig = Figure(figsize=(max(6.0, 0.42 * n_cols + 2.0), min(height, 11.0)), layout="constrained")
    draw_mapping(fig.add_subplot(), grid, highlight=highlight, title=title)
    return fig


def compare_mappings(panels: list[tuple[str, MappingGrid]]) -> Figure:
    """Several mapping heat maps side by side (e.g. before and after the fix), one shared legend."""
    n_steps = max(g.kinds.shape[0] for _, g in panels)
    n_cols = max(g.kinds.shape[1] for _, g in panels)
    fig = Figure(figsize=(len(panels) * max(4.5, 0.36 * n_cols + 1.2), min(2.8 + 0.2 * n_steps, 11.0)),
                 layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, grid) in zip(axes, panels):
        draw_mapping(ax, grid, title=title, legend=False)
    fig.legend(handles=kind_legend_handles(), loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    return fig


# -- write ownership of one launch ----------------------------------------------------------------

OWN_OK, OVERWRITTEN, STALE_WRITE, NO_WRITE = range(4)
OWNER_COLORS = {OWN_OK: "#c7e9c0", OVERWRITTEN: "#e34a33", STALE_WRITE: "#fdd49e", NO_WRITE: "#f0f0f0"}
OWNER_LABELS = {
    OWN_OK: "q written by its own live row",
    OVERWRITTEN: "q of a live request, last written by a padded row",
    STALE_WRITE: "q of a free slot, written by a padded row",
    NO_WRITE: "not written in this launch",
}


@dataclass
class Ownership:
    """Who stored to draft_logits[slot, step] in one launch, and which stores were wrong."""

    kinds: np.ndarray  # [max_num_reqs, k] OWN_OK / OVERWRITTEN / STALE_WRITE / NO_WRITE
    writer: np.ndarray  # [max_num_reqs, k] the row whose store landed last (-1: none)
    writes: np.ndarray  # [max_num_reqs, k] how many rows stored there
    edges: list[tuple[int, int, str]] = field(default_factory=list)  # (row, slot, "live"/"collides"/"stale"/"masked")
    sentences: list[str] = field(default_factory=list)


def _row_word(row: int, launch) -> str:
    kind = "padded " if row >= launch.num_reqs * launch.samples_per_req else ""
    return f"{kind}{'sample row' if launch.samples_per_req > 1 else 'row'} {row}"


def ownership(launch) -> Ownership:
    """Classify each (slot, draft step) of one launch, and say in words which q were overwritten."""
    if launch.writer is None:
        raise ValueError("this launch kept no write trace (greedy drafting stores no q, or record=False)")
    writer = launch.writer.to(torch.int64).numpy()
    writes = launch.writes.to(torch.int64).numpy()
    spr = launch.samples_per_req
    owner_row = {slot: row for row, slot in enumerate(launch.live_slots)}
    kinds = np.full(writer.shape, NO_WRITE, dtype=np.int64)
    for slot in range(writer.shape[0]):
        for step in range(writer.shape[1]):
            w = int(writer[slot, step])
            if w < 0:
                continue
            if slot in owner_row:
                own = owner_row[slot] * spr + (step if spr > 1 else 0)
                kinds[slot, step] = OWN_OK if w == own else OVERWRITTEN
            else:
                kinds[slot, step] = STALE_WRITE
    values, row_kinds = classify_mapping(launch)
    names = {LIVE: "live", PAD_COLLIDES: "collides", PAD_STALE: "stale", PAD_EMPTY: "masked"}
    edges = [(r, int(values[r]), names[int(row_kinds[r])]) for r in range(launch.rows * spr)]
    # One sentence per (padded row, slot): "padded row 7 wrote slot 7's q (draft steps 0, 1) after row 6 did".
    grouped: dict[tuple[int, int, int], list[int]] = {}
    for slot, step, w, live_row in launch.collisions():
        grouped.setdefault((w, slot, live_row), []).append(step)
    sentences = []
    for (w, slot, live_row), steps in grouped.items():
        victim = live_row * spr + (steps[0] if spr > 1 else 0)
        which = ", ".join(str(s) for s in steps)
        sentences.append(f"{_row_word(w, launch)} wrote slot {slot}'s q (draft step{'s' if len(steps) > 1 else ''} "
                         f"{which}) after {_row_word(victim, launch)} did")
    return Ownership(kinds, writer, writes, edges, sentences)


def draw_ownership(ax_rows, ax_table, launch, *, title: str | None = None) -> Ownership:
    """Left: rows -> slots they stored to. Right: draft_logits[slot, step] with its last writer."""
    own = ownership(launch)
    spr = launch.samples_per_req
    n_rows = launch.rows * spr
    # Slots that play a part in this launch (live, or stored into); the rest of the table is empty.
    used = [s for _, s, _ in own.edges if s >= 0] + list(launch.live_slots)
    n_slots = min(own.kinds.shape[0], max(used + [launch.rows - 1]) + 1)
    # Left panel: a bipartite map, rows at x=0, slots at x=1.
    span = max(n_rows, n_slots)
    def row_y(r):
        return span - 1 - r * (span - 1) / max(n_rows - 1, 1) if n_rows > 1 else span / 2
    def slot_y(s):
        return span - 1 - s * (span - 1) / max(n_slots - 1, 1) if n_slots > 1 else span / 2
    live_slots = set(launch.live_slots)
    style = {"live": (ROW_COLOR, 1.0, "-"), "collides": (BAD_COLOR, 2.2, "-"), "stale": (QUIET_COLOR, 1.0, "--")}
    for r, slot, kind in own.edges:
        if kind == "masked":
            ax_rows.plot([0, 0.28], [row_y(r), row_y(r)], color=QUIET_COLOR, linewidth=1, linestyle=":")
            ax_rows.text(0.3, row_y(r), "slot -1: no store", fontsize=6, va="center", color=QUIET_COLOR)
            continue
        color, width, line = style[kind]
        ax_rows.add_patch(FancyArrowPatch((0.04, row_y(r)), (0.96, slot_y(slot)), arrowstyle="-|>",
                                          mutation_scale=8, color=color, linewidth=width, linestyle=line))
    for r in range(n_rows):
        padded = r >= launch.num_reqs * spr
        ax_rows.plot(0, row_y(r), "o", color=QUIET_COLOR if padded else ROW_COLOR, markersize=6)
        ax_rows.text(-0.04, row_y(r), f"{'pad ' if padded else ''}{r}", ha="right", va="center", fontsize=7)
    for s in range(n_slots):
        ax_rows.plot(1, slot_y(s), "s", color=SLOT_COLOR if s in live_slots else "#fdd0a2", markersize=6)
        ax_rows.text(1.04, slot_y(s), f"slot {s}", ha="left", va="center", fontsize=7)
    ax_rows.set_xlim(-0.35, 1.35)
    ax_rows.set_ylim(-1, span)
    ax_rows.axis("off")
    ax_rows.set_title("rows -> draft_logits[slot] they store to", fontsize=9)
    # Right panel: the write trace.
    cmap = ListedColormap([OWNER_COLORS[k] for k in range(4)])
    ax_table.imshow(own.kinds[:n_slots], cmap=cmap, vmin=-0.5, vmax=3.5, aspect="auto", interpolation="nearest")
    for slot in range(n_slots):
        for step in range(own.kinds.shape[1]):
            w = int(own.writer[slot, step])
            if w < 0:
                continue
            count = int(own.writes[slot, step])
            text = f"row {w}" + (f"\n{count} stores" if count > 1 else "")
            color = "white" if own.kinds[slot, step] == OVERWRITTEN else "black"
            ax_table.text(step, slot, text, ha="center", va="center", fontsize=6, color=color)
    ax_table.set_xticks(range(own.kinds.shape[1]))
    ax_table.set_yticks(range(n_slots))
    ax_table.set_yticklabels([f"slot {s}" for s in range(n_slots)], fontsize=7)
    ax_table.set_xlabel("draft step")
    ax_table.set_title("last writer of draft_logits[slot, step]", fontsize=9)
    if title:
        ax_rows.figure.suptitle(title, fontsize=10)
    return own


def ownership_map(launch, *, title: str | None = None) -> Figure:
    """The write-ownership map of one launch, with the overwrites spelled out underneath."""
    n = max(launch.rows * launch.samples_per_req, launch.writer.shape[0] if launch.writer is not None else 1)
    fig = Figure(figsize=(10.0, max(3.6, 0.28 * n + 1.8)), layout="constrained")
    ax_rows, ax_table = fig.subplots(1, 2, width_ratios=[1.3, 1.0])
    own = draw_ownership(ax_rows, ax_table, launch)
    handles = [Patch(facecolor=OWNER_COLORS[k], edgecolor="#555555", label=OWNER_LABELS[k]) for k in range(4)]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    summary = "\n".join(own.sentences[:3]) if own.sentences else "every live request's q was written by its own row"
    fig.suptitle((title + "\n" if title else "") + summary, fontsize=9, color=BAD_COLOR if own.sentences else OK_COLOR)
    return fig


# -- q used vs q drawn ----------------------------------------------------------------------------

def _own_sample_row(pair) -> int:
    return pair.live_row * pair.samples_per_req + (pair.step if pair.samples_per_req > 1 else 0)


@dataclass
class QPair:
    slot: int
    step: int
    live_row: int  # the row that drew the draft token (its request's row)
    writer: int  # the row whose store is in draft_logits[slot, step] (-1: none)
    q_drawn: np.ndarray  # softmax(row_logits[live_row, step] / T): what the token was sampled from
    q_used: np.ndarray  # softmax(draft_logits[slot, step]): what the rejection sampler reads
    samples_per_req: int = 1

    @property
    def total_variation(self) -> float:
        return float(0.5 * np.abs(self.q_drawn - self.q_used).sum())


def q_pair(launch, slot: int, step: int) -> QPair:
    """The two distributions for one (slot, draft step) of a launch (AR or DFlash-style)."""
    if launch.draft_logits is None or launch.row_logits is None:
        raise ValueError("this launch kept no q (greedy drafting) or no row logits (record=False)")
    if slot not in launch.live_slots:
        raise ValueError(f"slot {slot} is not live in this launch (live slots: {launch.live_slots})")
    live_row = launch.live_slots.index(slot)
    temp = float(launch.temperature[slot])
    logits = launch.row_logits[live_row, step].to(torch.float64)
    drawn = torch.softmax(logits / temp if temp != 0.0 else logits, dim=-1)
    used = torch.softmax(launch.draft_logits[slot, step].to(torch.float64), dim=-1)
    writer = int(launch.writer[slot, step]) if launch.writer is not None else -1
    return QPair(slot, step, live_row, writer, drawn.numpy(), used.numpy(), launch.samples_per_req)


def draw_q(ax, pair: QPair, *, labels: list[str] | None = None, title: str | None = None) -> None:
    vocab = len(pair.q_drawn)
    labels = labels or (token_labels() if vocab == len(ALPHABET) + 1 else [str(i) for i in range(vocab)])
    x = np.arange(vocab)
    same = np.array_equal(pair.q_drawn, pair.q_used)
    row_word = "sample row" if pair.samples_per_req > 1 else "row"
    ax.bar(x - 0.2, pair.q_drawn, width=0.4, color=ROW_COLOR,
           label=f"q the draft was drawn from ({row_word} {_own_sample_row(pair)}'s logits)")
    writer = "nobody" if pair.writer < 0 else f"{row_word} {pair.writer}"
    ax.bar(x + 0.2, pair.q_used, width=0.4, color=OK_COLOR if same else BAD_COLOR,
           label=f"q the rejection sampler used (stored by {writer})")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("probability")
    ax.set_xlim(-0.7, vocab - 0.3)
    if not same:
        verdict = f"total variation distance {pair.total_variation:.2f}"
    elif pair.writer >= 0 and pair.writer != _own_sample_row(pair):
        verdict = "identical: the padded row's stale input matched this request's"
    else:
        verdict = "identical"
    ax.set_title(title or f"slot {pair.slot}, draft step {pair.step}: {verdict}", fontsize=9)
    ax.legend(fontsize=7, loc="upper right", frameon=False)


def q_used_vs_drawn(launch, slot: int, step: int, *, title: str | None = None) -> Figure:
    """Bars over the vocabulary: the q the token was drawn from vs the q verification used."""
    fig = Figure(figsize=(10.0, 3.6), layout="constrained")
    draw_q(fig.add_subplot(), q_pair(launch, slot, step), title=title)
    return fig


# -- bench outcome --------------------------------------------------------------------------------

def bench_figure(result, modes=None, *, title: str | None = None) -> Figure:
    """Per mode, responses identical to the eager reference (green) and corrupted (red)."""
    names = list(modes or result.modes)
    fig = Figure(figsize=(8.0, 0.5 * len(names) + 1.4), layout="constrained")
    ax = fig.add_subplot()
    for i, name in enumerate(names):
        r = result.modes[name]
        y = len(names) - 1 - i
        if r.error:
            ax.barh(y, result.config.prompts, color="white", edgecolor=QUIET_COLOR, hatch="//")
            ax.text(result.config.prompts / 2, y, "refused before launch (unmasked kernel, slot -1)",
                    ha="center", va="center", fontsize=8, bbox={"facecolor": "white", "edgecolor": "none"})
            continue
        ax.barh(y, r.identical_to_eager, color=OK_COLOR)
        ax.barh(y, r.corrupted, left=r.identical_to_eager, color=BAD_COLOR)
        note = "(the reference)" if r.reference == name else f"{r.corrupted} of {r.responses} corrupted"
        ax.text(r.responses + 0.5, y, note, va="center", fontsize=8)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(list(reversed(names)), fontsize=8)
    ax.set_xlim(0, result.config.prompts * 1.35)
    ax.set_xlabel("responses (compared token by token with the eager run of the same drafter)")
    fig.legend(handles=[Patch(color=OK_COLOR, label="identical to the eager reference"),
                        Patch(color=BAD_COLOR, label="corrupted")],
               loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    ax.set_title(title or f"{result.config.prompts} prompts, seed {result.config.seed}", fontsize=10)
    return fig


# -- a map of the moving parts ---------------------------------------------------------------------

def _box(ax, x, y, w, h, text, *, face="#ffffff", edge="#444444", style="round,pad=0.02", size=8,
         weight="normal", dashed=False, align="center"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, facecolor=face, edgecolor=edge,
                                linestyle="--" if dashed else "-", linewidth=1.2))
    if text:
        tx = x + w / 2 if align == "center" else x + 0.01
        ax.text(tx, y + h / 2, text, ha=align, va="center", fontsize=size, weight=weight, family="monospace"
                if text.startswith(("idx", "temp", "seeds", "draft", "input", "target", "q =")) else None)


def _arrow(ax, start, end, color="#444444", text=None):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=color, linewidth=1.2))
    if text:
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.015, text, fontsize=7, ha="center", color=color)


def moving_parts() -> Figure:
    """One screen: which buffers exist, who indexes them by row or by slot, where the graph is."""
    fig = Figure(figsize=(12.0, 5.0))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.005, 1.005)
    ax.set_ylim(0.0, 0.92)
    ax.axis("off")
    row_face, slot_face = "#deebf7", "#fee6ce"
    # Host side: the step's inputs, for exactly num_reqs requests.
    _box(ax, 0.01, 0.08, 0.22, 0.8, "", face="#fafafa", edge="#999999")
    ax.text(0.12, 0.83, "host, every step\n(exact num_reqs)", ha="center", va="center", fontsize=9, weight="bold")
    _box(ax, 0.025, 0.66, 0.19, 0.1, "scheduler: live requests in\nbatch order -> their slots", size=7)
    _box(ax, 0.025, 0.46, 0.19, 0.14, "idx_mapping[:num_reqs] = slots\nFIX 1: idx_mapping[num_reqs:] = -1",
         face=row_face, size=7)
    _box(ax, 0.025, 0.28, 0.19, 0.12, "DFlash-style: sample_idx_mapping\nFIX 3: pad with -1, not 0",
         face=row_face, size=7)
    _box(ax, 0.025, 0.12, 0.19, 0.1, "temperature, seeds\n(copied whole)", face=slot_face, size=7)
    _arrow(ax, (0.12, 0.66), (0.12, 0.6))
    # Inside the graph: num_reqs_padded rows.
    _box(ax, 0.27, 0.08, 0.42, 0.8, "", face="#f7fcf5", edge="#31a354", dashed=True)
    ax.text(0.48, 0.83, "inside the CUDA graph: num_reqs_padded rows\n(a batch of 7 replays the graph captured for 8)",
            ha="center", va="center", fontsize=9, weight="bold", color="#006d2c")
    _box(ax, 0.29, 0.62, 0.17, 0.12, "draft model forward\nover input_tokens[row]", face=row_face, size=7)
    _box(ax, 0.5, 0.46, 0.17, 0.28, "Gumbel sampling kernel\nslot = idx_mapping[row]\nT = temperature[slot]\n"
         "q = logits[row] / T\n\nFIX 2: skip slot < 0\n(masked loads + store)", face="#ffffff", size=7)
    _box(ax, 0.29, 0.12, 0.17, 0.1, "draft_tokens[row, step]", face=row_face, size=7)
    _box(ax, 0.5, 0.12, 0.17, 0.2, "draft_logits[slot, step, :]\n(this is q)\n\npadded rows holding a\nlive slot overwrite it",
         face=slot_face, edge=BAD_COLOR, size=7)
    _arrow(ax, (0.46, 0.68), (0.5, 0.68), text="logits")
    _arrow(ax, (0.53, 0.46), (0.4, 0.22), color=ROW_COLOR, text="token")
    _arrow(ax, (0.6, 0.46), (0.6, 0.32), color=SLOT_COLOR, text="store q")
    _arrow(ax, (0.215, 0.53), (0.5, 0.56), color=ROW_COLOR)
    _arrow(ax, (0.215, 0.17), (0.5, 0.5), color=SLOT_COLOR)
    # Verification: exactly num_reqs rows again.
    _box(ax, 0.73, 0.08, 0.26, 0.8, "", face="#fafafa", edge="#999999")
    ax.text(0.86, 0.83, "outside the graph\n(exact num_reqs rows)", ha="center", va="center", fontsize=9, weight="bold")
    _box(ax, 0.75, 0.6, 0.22, 0.14, "target model scores\nhistory + draft_tokens[row]\np = softmax(target / T)",
         face=row_face, size=7)
    _box(ax, 0.75, 0.3, 0.22, 0.2, "rejection sampler\naccept x if u < p(x) / q(x)\nq = softmax(draft_logits[slot])\n"
         "wrong q -> wrong output law", face="#ffffff", size=7)
    _box(ax, 0.75, 0.12, 0.22, 0.1, "emitted tokens -> next step", size=7)
    _arrow(ax, (0.67, 0.22), (0.75, 0.36), color=SLOT_COLOR, text="q by slot")
    _arrow(ax, (0.86, 0.6), (0.86, 0.5))
    _arrow(ax, (0.86, 0.3), (0.86, 0.22))
    handles = [Patch(facecolor=row_face, edgecolor="#444444", label="indexed by batch row"),
               Patch(facecolor=slot_face, edgecolor="#444444", label="indexed by request slot"),
               Patch(facecolor="#f7fcf5", edgecolor="#31a354", linestyle="--", label="graph boundary")]
    ax.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.01))
    return fig


def distribution_bars(target: np.ndarray, empirical: dict[str, np.ndarray], *, labels=None,
                      title: str | None = None) -> Figure:
    """A target distribution next to one or more empirical ones (e.g. correct vs shared noise)."""
    target = np.asarray(target, dtype=float)
    vocab = len(target)
    x = np.arange(vocab)
    series = [("target p", target)] + [(k, np.asarray(v, dtype=float)) for k, v in empirical.items()]
    width = 0.8 / len(series)
    colors = ["#636363", OK_COLOR, BAD_COLOR, ROW_COLOR, SLOT_COLOR]
    fig = Figure(figsize=(8.0, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for i, (name, values) in enumerate(series):
        ax.bar(x - 0.4 + width * (i + 0.5), values, width=width, color=colors[i % len(colors)], label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(labels or [str(i) for i in x])
    ax.set_ylabel("probability")
    ax.legend(fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def explorer_figure(view) -> Figure:
    """The explorer's picture for one state: mapping over steps, ownership and q for the chosen step.

    Axes are placed by hand (no layout engine), which halves the time a redraw takes.
    """
    fig = Figure(figsize=(13.0, 7.0))
    if view.error:
        ax = fig.add_axes((0, 0, 1, 1))
        ax.axis("off")
        ax.text(0.5, 0.5, "refused:\n" + _wrap(view.error, 110), ha="center", va="center", fontsize=9, color=BAD_COLOR)
        return fig
    draw_mapping(fig.add_axes((0.045, 0.22, 0.29, 0.73)), view.grid, highlight=view.step,
                 title="mapping buffer, all steps", legend=False)
    fig.legend(handles=kind_legend_handles(), loc="lower center", bbox_to_anchor=(0.19, 0.0), ncol=1,
               fontsize=7, frameon=False)
    if view.launch.writer is not None:
        draw_ownership(fig.add_axes((0.39, 0.5, 0.28, 0.44)), fig.add_axes((0.75, 0.5, 0.23, 0.44)), view.launch)
    if view.q is not None:
        draw_q(fig.add_axes((0.41, 0.07, 0.57, 0.34)), view.q)
    return fig


def _wrap(text: str, width: int) -> str:
    words, lines, line = text.split(), [], ""
    for w in words:
        if len(line) + len(w) + 1 > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    return "\n".join(lines + [line])
