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

import math
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.spines import Spine
from matplotlib.text import Text

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

# Legibility: text must read at MIN_SHOWN_PT or more when a figure is shown SHOWN_PX wide.
SHOWN_PX = 1280
CSS_PX_PER_INCH = 96
MIN_SHOWN_PT = 10.0


def legible(size: float, fig) -> float:
    """`size` in pt, raised where needed so that it reads :data:`MIN_SHOWN_PT` in `fig` shown
    :data:`SHOWN_PX` wide (rounded up to a quarter point).

    Every small text of the kit (captions, tick labels, legends, cell annotations) takes its size
    through this: a figure narrow enough keeps its size, a wide one (the explorer is 13 inches)
    gets what a projected 1280-pixel screen needs. :func:`smallest_text_at` checks the result.
    """
    width = fig.get_figure(root=True).get_figwidth()
    need = MIN_SHOWN_PT * CSS_PX_PER_INCH * width / SHOWN_PX
    return max(size, math.ceil(need * 4) / 4)


def run_caption(info: dict | None = None, *, backend: str | None = None) -> str:
    """'computed with labkit's torch backend on the CPU · torch 2.x · triton 3.x': where the data came from.

    `info` is :func:`labkit.backends.describe`'s dict (default: the backend in use now, which is the
    one that produced a figure drawn right after its run); `backend`: describe that backend instead
    (for runs made with ``engine_source(backend=...)``).
    """
    if info is None and backend is not None:
        with backends.using_backend(backend):
            info = backends.describe()
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
    size = legible(CAPTION_SIZE, fig)
    inches = 0.08 + 0.13 * (text.count("\n") + 1) * size / CAPTION_SIZE
    engine = fig.get_layout_engine()
    if engine is not None and "rect" in engine.get():
        if legend is not None:
            # Anchor the legend on top of the caption; the layout then keeps the axes above both.
            legend.set_bbox_to_anchor((0, inches / fig.get_figheight(), 1, 0), transform=fig.transFigure)
            legend.set_loc("lower center")
            inches += legend.get_window_extent().height / fig.dpi + 0.05
        share = inches / fig.get_figheight()
        engine.set(rect=(0, share, 1, 1 - share))
    fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=size, color=CAPTION_COLOR, gid=CAPTION_GID)
    return fig


def caption_of(fig: Figure) -> str:
    """The provenance line :func:`add_caption` wrote ; '' if none."""
    texts = [t.get_text() for t in fig.texts if t.get_gid() == CAPTION_GID]
    return texts[-1] if texts else ""


def _tick_labels_in_view(axis: Axis) -> list[Text]:
    """The tick labels a draw paints: those of ticks inside the view (a locator places some outside)."""
    lo, hi = sorted(axis.get_view_interval())
    slack = 1e-9 * (hi - lo)
    ticks = axis.get_major_ticks(len(axis.get_majorticklocs())) + axis.get_minor_ticks(len(axis.get_minorticklocs()))
    shown = [tick for tick in ticks if lo - slack <= tick.get_loc() <= hi + slack]
    return [label for tick in shown for label in (tick.label1, tick.label2)]


def _drawn_texts(artist: Artist, found: list[Text]) -> None:
    """Collect the non-empty Text artists a draw of `artist` paints (hidden parents hide their children)."""
    if not artist.get_visible():
        return
    if isinstance(artist, Text):
        if artist.get_text().strip():
            found.append(artist)
        return
    if isinstance(artist, Axis):
        children = [artist.label, artist.offsetText, *_tick_labels_in_view(artist)]
    elif isinstance(artist, Axes) and not artist.axison:
        children = [c for c in artist.get_children() if not isinstance(c, (Axis, Spine))]
    else:
        children = artist.get_children()
    for child in children:
        _drawn_texts(child, found)


def drawn_texts(fig: Figure) -> list[Text]:
    """Every non-empty text a draw of `fig` paints: titles, labels, tick labels, legends, annotations."""
    fig.draw_without_rendering()  # tick labels and layouts exist only once the figure is drawn
    found: list[Text] = []
    _drawn_texts(fig, found)
    return found


def smallest_text_at(fig: Figure, shown_px: int = SHOWN_PX) -> tuple[float, str]:
    """(points, text): the smallest text of `fig` as it reads when the figure is shown `shown_px` wide.

    A size of s pt in a figure W inches wide, scaled to `shown_px` CSS pixels (96 to the inch), reads
    as s * shown_px / (96 * W) pt; a room reads 10 pt and up (:data:`MIN_SHOWN_PT`) on a projected
    1280-pixel screen. Titles, labels, tick labels, legends, annotations and captions all count;
    empty and hidden texts do not. (inf, "") for a figure without text.
    """
    found = drawn_texts(fig)
    native_px = CSS_PX_PER_INCH * fig.get_figwidth()  # divided by last, so 7.5 pt at 10 in reads 10.0, not 9.99
    return min(((t.get_fontsize() * shown_px / native_px, t.get_text()) for t in found), default=(math.inf, ""))


def save_png(fig: Figure, path: Path | str) -> Path:
    """Save `fig` as a PNG without the "Software" stamp, so the file depends on the drawing only."""
    path = Path(path)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    return path
