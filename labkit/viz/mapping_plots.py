"""The mapping buffer over a run: what each entry of idx_mapping held at each launch, and what that means.

    mapping_grid(launches)         -> MappingGrid   values and categories, launch by launch
    mapping_heatmap(launches)      -> Figure        one heat map
    compare_mappings(panels)       -> Figure        several side by side (before and after the fix)
    draw_mapping(ax, grid)                          the heat map on an axes of your own figure

Figures are built with ``matplotlib.figure.Figure`` (not pyplot), so nothing is shown twice in a
notebook and nothing global changes; sizes are fixed and nothing is random. Red marks a padded row
whose stale slot belongs to a live request (it overwrites that request's q); nothing else is red.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from labkit.errors import LabkitInputError
from labkit.viz.style import add_caption, legible, run_caption

LIVE, PAD_COLLIDES, PAD_STALE, PAD_EMPTY, NOT_LAUNCHED = range(5)
_KIND_LABELS = {
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
    values = launch.mapping.detach().to("cpu", torch.int64).numpy().copy()
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
        raise LabkitInputError("mapping_grid needs at least one launch record")
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


def kind_legend_handles(kinds=None) -> list[Patch]:
    shown = range(5) if kinds is None else sorted(set(int(k) for k in np.unique(kinds)))
    return [Patch(facecolor=KIND_COLORS[k], edgecolor="#555555", label=_KIND_LABELS[k]) for k in shown]


def _cell_points(ax, grid: MappingGrid) -> tuple[float, float]:
    """(width, height) of one cell in points.

    Measured on the axes' place in its figure before any layout engine moves it: close enough to
    keep a grid with more steps or rows than its figure has room for from piling digits on each other.
    """
    n_steps, width = grid.kinds.shape
    box = ax.get_position()
    fig_w, fig_h = ax.get_figure(root=True).get_size_inches()
    return 72 * box.width * fig_w / width, 72 * box.height * fig_h / n_steps


def _digits_fit(size: float, chars: int, room: float) -> bool:
    """Whether `chars` digits at `size` pt fit in `room` points with a little air."""
    return room >= 0.7 * size * chars


def _value_size(ax, grid: MappingGrid) -> float | None:
    """The font size of the slots written in the cells, or None where they would not fit in one."""
    size = legible(8 if grid.kinds.shape[1] <= 16 else 6, ax.figure)
    cell_w, cell_h = _cell_points(ax, grid)
    chars = max(len(str(int(v))) for v in grid.values.flat)
    return size if cell_h >= 1.1 * size and _digits_fit(size, chars, cell_w) else None


def _annotate_values(ax, grid: MappingGrid, size: float) -> None:
    n_steps, width = grid.kinds.shape
    for i in range(n_steps):
        for r in range(width):
            kind = grid.kinds[i, r]
            color = "#bdbdbd" if kind == NOT_LAUNCHED else ("white" if kind == PAD_COLLIDES else "black")
            ax.text(r, i, str(int(grid.values[i, r])), ha="center", va="center", fontsize=size, color=color)


def _label_axes(ax, grid: MappingGrid) -> None:
    n_steps, width = grid.kinds.shape
    size = legible(7, ax.figure)
    cell_w, cell_h = _cell_points(ax, grid)
    # Label every row of the buffer where the labels fit side by side, else every second, fourth, ...
    every = next(k for k in (1, 2, 4, 8, 16, 32, width) if _digits_fit(size, len(str(width - 1)) + 1, k * cell_w))
    ax.set_xticks(range(0, width, every))
    ax.set_xticklabels([str(r) for r in range(0, width, every)], fontsize=size)
    step_ticks = range(n_steps) if n_steps <= 20 else range(0, n_steps, max(1, n_steps // 12))
    ax.set_yticks(list(step_ticks))
    ax.set_yticklabels([str(grid.steps[i]) for i in step_ticks], fontsize=size)
    ax.set_xlabel("sample row (request row x k + draft step); cell: slot it holds" if grid.samples_per_req > 1
                  else "batch row of the mapping buffer; cell: the slot it holds")
    ax.set_ylabel("engine step (one launch each)")
    ax.set_xticks(np.arange(-0.5, width, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, n_steps, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    ax.tick_params(which="minor", length=0)


def draw_mapping(ax, grid: MappingGrid, *, highlight: int | None = None, title: str | None = None,
                 annotate: bool = True, legend: bool = True) -> None:
    """Heat map of `grid` on `ax`: rows of the figure are launches, columns buffer entries."""
    n_steps, width = grid.kinds.shape
    ax.imshow(grid.kinds, cmap=ListedColormap([KIND_COLORS[k] for k in range(5)]), vmin=-0.5, vmax=4.5,
              aspect="auto", interpolation="nearest")
    size = _value_size(ax, grid) if annotate and n_steps * width <= 1200 else None
    if size is not None:
        _annotate_values(ax, grid, size)
    _label_axes(ax, grid)
    if highlight is not None and 0 <= highlight < n_steps:
        ax.add_patch(Rectangle((-0.5, highlight - 0.5), width, 1, fill=False, edgecolor="black", linewidth=2))
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        below = -0.12 if n_steps < 6 else -0.06
        # Only the kinds this grid holds: a legend entry for a -1 the run never wrote would spoil
        # the exercise for a learner who sees the buggy run first (notebook 02).
        ax.legend(handles=kind_legend_handles(grid.kinds), loc="upper center", bbox_to_anchor=(0.5, below), ncol=2,
                  fontsize=legible(7, ax.figure), frameon=False)


def _kinds_legend(fig: Figure, kinds, ncol: int):
    """The legend of `kinds` under the axes (the layout keeps it clear of the x labels), in `ncol`
    columns, or fewer where the figure is too narrow for them."""
    for n in range(ncol, 0, -1):
        legend = fig.legend(handles=kind_legend_handles(kinds), loc="outside lower center", ncol=n,
                            fontsize=legible(7, fig), frameon=False)
        if n == 1 or legend.get_window_extent().width <= fig.bbox.width:
            return legend
        legend.remove()


def mapping_heatmap(launches_or_grid, *, title: str = "idx_mapping as the sampling kernel saw it",
                    highlight: int | None = None, width: int | None = None, source: str | None = None) -> Figure:
    """The mapping buffer over steps: live rows, padded rows with a stale slot, padded rows that hold no request.

    `source`: the provenance line under the figure (default: the labkit backend and device in use).
    """
    grid = launches_or_grid
    if not isinstance(grid, MappingGrid):
        grid = mapping_grid(launches_or_grid, width=width)
    n_steps, n_cols = grid.kinds.shape
    height = 2.8 + 0.22 * n_steps if n_steps > 4 else 3.4
    fig = Figure(figsize=(max(6.0, 0.42 * n_cols + 2.0), min(height, 11.2)), layout="constrained")
    draw_mapping(fig.add_subplot(), grid, highlight=highlight, title=title, legend=False)
    return add_caption(fig, source or run_caption(), legend=_kinds_legend(fig, grid.kinds, ncol=2))


def compare_mappings(panels: list[tuple[str, MappingGrid]], *, source: str | None = None) -> Figure:
    """Several mapping heat maps side by side (e.g. before and after the fix), one shared legend."""
    n_steps = max(g.kinds.shape[0] for _, g in panels)
    n_cols = max(g.kinds.shape[1] for _, g in panels)
    fig = Figure(figsize=(len(panels) * max(4.5, 0.36 * n_cols + 1.2), min(3.0 + 0.2 * n_steps, 11.2)),
                 layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, grid) in zip(axes, panels, strict=True):
        draw_mapping(ax, grid, title=title, legend=False)
    kinds = np.concatenate([grid.kinds.ravel() for _, grid in panels])
    return add_caption(fig, source or run_caption(), legend=_kinds_legend(fig, kinds, ncol=3))
