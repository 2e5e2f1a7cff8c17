"""What every figure of the kit shares: one colour language, the PNG settings, and a provenance line.

Colours mean the same thing in every figure:

    blue    indexed by batch row; the q a draft token was drawn from
    orange  indexed by request slot
    green   right: a live request's own q, responses identical to eager
    red     corrupted, and nothing else: a padded row's store over a live request's q, a wrong q,
            corrupted responses
    grey    neutral: references, copies, padding that does no harm

Every figure carries one line under it saying what produced its numbers: for figures computed on
the spot, the labkit backend and device in use (:func:`run_caption`); for figures drawn from a
recorded GPU run, the record's provenance (:func:`labkit.viz.gpu_records.caption`).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from labkit import backends

ROW_COLOR = "#3182bd"
SLOT_COLOR = "#e6550d"
OK_COLOR = "#31a354"
BAD_COLOR = "#de2d26"
QUIET_COLOR = "#969696"
P_COLOR = "#525252"  # the target distribution p

DPI = 110
CAPTION_COLOR = "#555555"
CAPTION_SIZE = 7.5
CAPTION_GID = "labkit-caption"


def run_caption(info: dict | None = None) -> str:
    """'computed with labkit's torch backend on the CPU · torch 2.x · triton 3.x': where the data came from.

    `info` is :func:`labkit.backends.describe`'s dict (default: the backend in use now, which is the
    one that produced a figure drawn right after its run).
    """
    info = info if info is not None else backends.describe()
    name = info.get("backend", "?")
    where = info.get("device") if name == "triton" else "the CPU"
    versions = f"torch {info.get('torch')}" + (f" · triton {info['triton']}" if info.get("triton") else "")
    return f"computed with labkit's {name} backend on {where} · {versions}"


def add_caption(fig: Figure, text: str, *, legend=None) -> Figure:
    """Write `text` (one or more lines) under everything else in `fig`, keeping it clear of the axes.

    Figures with a constrained layout get their layout area raised by the caption's height; pass
    the figure-level `legend` placed under the axes ("outside lower center") so that it moves up
    too. Figures placed by hand are expected to leave the bottom strip free.
    """
    inches = 0.08 + 0.13 * (text.count("\n") + 1)
    engine = fig.get_layout_engine()
    if engine is not None and "rect" in engine.get():
        if legend is not None:
            # Anchor the legend on top of the caption; the layout then keeps the axes above both.
            legend.set_bbox_to_anchor((0, inches / fig.get_figheight(), 1, 0), transform=fig.transFigure)
            legend.set_loc("lower center")
            inches += legend.get_window_extent().height / fig.dpi + 0.05
        share = inches / fig.get_figheight()
        engine.set(rect=(0, share, 1, 1 - share))
    fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=CAPTION_SIZE, color=CAPTION_COLOR, gid=CAPTION_GID)
    return fig


def caption_of(fig: Figure) -> str:
    """The provenance line :func:`add_caption` wrote ; '' if none."""
    texts = [t.get_text() for t in fig.texts if t.get_gid() == CAPTION_GID]
    return texts[-1] if texts else ""


def save_png(fig: Figure, path: Path | str) -> Path:
    """Save `fig` as a PNG without the "Software" stamp, so the file depends on the drawing only."""
    path = Path(path)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    return path
