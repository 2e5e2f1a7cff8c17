"""The stale-mapping explorer: a step slider and a drafter, over one recorded run per setting.

The logic is plain functions of a step and a drafter configuration, testable without a browser:
:func:`explorer_state` says what to draw for them, from a recorded run of
:mod:`labkit.bench.runs`. :class:`Explorer` wires ipywidgets to it (ipywidgets is imported only there).
Engine runs are cached per configuration, so moving the slider only redraws, and going back to a
setting is instant.
"""

from __future__ import annotations

import html
import io
import textwrap
from dataclasses import dataclass, field, replace

from matplotlib.figure import Figure

from labkit.bench.runs import RunSource, engine_source
from labkit.config import DRAFTERS, DrafterConfig
from labkit.speculator import LaunchRecord
from labkit.viz.mapping_plots import MappingGrid, draw_mapping, kind_legend_handles, launched_width, mapping_grid
from labkit.viz.ownership_plots import draw_ownership, ownership
from labkit.viz.q_plots import QPair, draw_q, q_pair
from labkit.viz.style import BAD_COLOR, add_caption, legible, run_caption

__all__ = ["ExplorerView", "explorer_state", "explorer_figure", "Explorer"]


@dataclass
class ExplorerView:
    """Everything the explorer draws for one set of widget values."""

    step: int
    num_launches: int
    label: str
    error: str | None = None
    launch: LaunchRecord | None = None
    grid: MappingGrid | None = None  # the whole run's mapping buffer
    collisions: list = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    q: QPair | None = None  # the focused (slot, draft step); None for greedy runs
    caption: str = ""


def explorer_state(step: int, config: DrafterConfig | None = None, *, source: RunSource | None = None) -> ExplorerView:
    """What to draw for a step of the run of `config` (default: the source's, before the fix).

    The mapping grid covers the whole run, and launch `step` is shown in detail. The q panel shows
    the first overwritten (slot, draft step) of the launch; if nothing was overwritten it shows the
    first live slot at draft step 0, where both bars coincide.
    """
    source = source or engine_source()
    run = source(config or source.base.before_fix())
    if run.error:
        return ExplorerView(step=0, num_launches=0, label=run.label, error=run.error,
                            caption=f"refused: {run.error.split('. ')[0]}")
    n = len(run.launches)
    step = min(max(int(step), 0), n - 1)
    launch = run.launches[step]
    found = launch.collisions()
    focus = (found[0][0], found[0][1]) if found else (launch.live_slots[0], 0)
    q = q_pair(launch, *focus) if launch.draft_logits is not None else None
    sentences = ownership(launch).sentences if launch.writer is not None else []
    head = (f"step {run.steps[step]}: {launch.num_reqs} live rows"
            + (f" padded to {launch.rows}" if launch.rows > launch.num_reqs else " (no padding)"))
    caption = head + (": " + "; ".join(sentences) if sentences else ": no live request's q was overwritten")
    return ExplorerView(step=step, num_launches=n, label=run.label, launch=launch,
                        grid=mapping_grid(run.launches, steps=run.steps, width=launched_width(run.launches)),
                        collisions=found,
                        sentences=sentences, q=q, caption=caption)


def first_collision_step(source: RunSource, config: DrafterConfig | None = None) -> int:
    """The first step of a run at which a padded row overwrote a live request's q (0 if none)."""
    run = source(config or source.base.before_fix())
    return next((i for i, launch in enumerate(run.launches) if launch.collisions()), 0)


def explorer_figure(view: ExplorerView, *, source: str | None = None) -> Figure:
    """The explorer's picture for one state: mapping over steps, ownership and q for the chosen step.

    Axes are placed by hand (no layout engine), which halves the time a redraw takes. Its text is
    sized by :func:`~labkit.viz.style.legible` for 13 inches: the q bars span the whole width so that
    their 31 token labels fit side by side, and the figure is tall enough for the slots of a 40-step
    run to be written in the mapping's cells.
    """
    fig = Figure(figsize=(13.0, 11.0))
    if view.error:
        ax = fig.add_axes((0, 0, 1, 1))
        ax.axis("off")
        ax.text(0.5, 0.5, "refused:\n" + textwrap.fill(view.error, 100), ha="center", va="center",
                fontsize=legible(9, fig), color=BAD_COLOR)
        return add_caption(fig, source or run_caption())
    draw_mapping(fig.add_axes((0.055, 0.40, 0.28, 0.555)), view.grid, highlight=view.step,
                 title="mapping buffer, all steps", legend=False)
    fig.legend(handles=kind_legend_handles(view.grid.kinds), loc="upper left", bbox_to_anchor=(0.40, 0.515),
               ncol=1, fontsize=legible(7, fig), frameon=False, title="mapping buffer cells",
               title_fontsize=legible(7, fig), alignment="left")
    if view.launch.writer is not None:
        draw_ownership(fig.add_axes((0.40, 0.575, 0.26, 0.38)), fig.add_axes((0.755, 0.575, 0.23, 0.38)),
                       view.launch)
    if view.q is not None:
        draw_q(fig.add_axes((0.065, 0.09, 0.92, 0.22)), view.q)
    return add_caption(fig, source or run_caption())


def render_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


class Explorer:
    """Slider + drafter -> :func:`explorer_state` -> one PNG (an ``Image`` widget) and a caption.

    An ``Image`` widget rather than an ``Output`` widget: its value is set directly, so it works
    (and can be tested) outside a running kernel. What it draws always follows the widgets: a change
    that arrives while a view is being drawn is drawn next, and a setting that cannot be drawn says
    why in the caption instead of leaving the last view up.
    """

    def __init__(self, source: RunSource | None = None, *, step: int | None = None,
                 config: DrafterConfig | None = None, caption: str | None = None):
        """`config`: the run shown first (default: the source's drafter before the fix); the drop-down
        changes its drafter and nothing else.

        `caption`: where the runs of `source` were computed (default: the backend in use now);
        pass :func:`~labkit.viz.style.run_caption` taken where the source ran, if that differs.
        """
        import ipywidgets as w

        self.source = source or engine_source()
        self.first_config = config or self.source.base.before_fix()
        self.provenance = caption
        if step is None:
            step = first_collision_step(self.source, self.first_config)
        self.step = w.IntSlider(value=0, min=0, max=max(step, 1), description="step", continuous_update=False)
        self.drafter = w.Dropdown(options=list(DRAFTERS), value=self.first_config.drafter, description="drafter")
        self.image = w.Image(format="png")
        self.caption = w.HTML()
        self.state: ExplorerView | None = None
        self.drawn: tuple | None = None  # (config, step) of the view on screen
        self.redraws = 0
        self._pngs: dict[tuple, bytes] = {}  # (config, step) -> rendered view
        self._drawing = False
        self.step.value = step
        for control in self.controls():
            control.observe(self._on_change, names="value")
        self.widget = w.VBox([*self.control_rows(), self.caption, self.image])
        self.redraw()

    def controls(self) -> list:
        """The widgets whose values choose the view."""
        return [self.step, self.drafter]

    def control_rows(self) -> list:
        import ipywidgets as w

        return [w.HBox([self.step, self.drafter])]

    def config(self) -> DrafterConfig:
        """The drafter configuration the widgets show now."""
        return replace(self.first_config, drafter=self.drafter.value).canonical()

    def _on_change(self, change) -> None:
        # A change made while a view is drawn (the redraw moving the slider into range, or a click
        # that arrives meanwhile) is picked up by the loop in redraw(), which draws until the view
        # on screen is the one the widgets ask for.
        if not self._drawing:
            self.redraw()

    def redraw(self) -> ExplorerView:
        self._drawing = True
        try:
            while True:
                wanted = (self.config(), self.step.value)
                self._draw(*wanted)
                if self.drawn == (self.config(), self.step.value):
                    return self.state
        finally:
            self._drawing = False

    def _draw(self, config: DrafterConfig, step: int) -> None:
        try:
            view = explorer_state(step, config, source=self.source)
        except Exception as err:  # noqa: BLE001 - shown in the caption; the widgets stay usable
            view = ExplorerView(step=step, num_launches=0, label=f"{config.drafter}, {config.describe_fix()}",
                                error=f"{type(err).__name__}: {err}", caption=f"could not draw: {err}")
        if view.num_launches:
            self.step.max = max(view.num_launches - 1, 1)
            if view.step != self.step.value:
                self.step.value = view.step
        self.state = view
        self.caption.value = f"<b>{html.escape(view.label)}</b><br>{html.escape(view.caption)}"
        key = (config, view.step)
        if key not in self._pngs:
            self._pngs[key] = render_png(explorer_figure(view, source=self.provenance))
        self.image.value = self._pngs[key]
        self.drawn = (config, self.step.value)
        self.redraws += 1

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
