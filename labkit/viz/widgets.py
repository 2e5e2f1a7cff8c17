"""The stale-mapping explorer: a step slider, a drafter, and (after the exercises) one toggle per part of the fix.

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
from labkit.config import DRAFTERS, DrafterConfig, FixSwitches
from labkit.speculator import LaunchRecord
from labkit.viz.mapping_plots import MappingGrid, draw_mapping, kind_legend_handles, launched_width, mapping_grid
from labkit.viz.ownership_plots import draw_ownership, ownership
from labkit.viz.q_plots import QPair, draw_q, q_pair
from labkit.viz.style import BAD_COLOR, add_caption, legible, run_caption

__all__ = ["ExplorerView", "explorer_state", "explorer_figure", "overwrite_summary", "FIX_SETTINGS", "Explorer"]


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
    """Slider + toggles -> :func:`explorer_state` -> one PNG (an ``Image`` widget) and a caption.

    An ``Image`` widget rather than an ``Output`` widget: its value is set directly, so it works
    (and can be tested) outside a running kernel.
    """

    def __init__(self, source: RunSource | None = None, *, step: int | None = None,
                 config: DrafterConfig | None = None, caption: str | None = None, fix_toggles: bool = True):
        """`config`: the run shown first (default: the source's drafter before the fix).

        `caption`: where the runs of `source` were computed (default: the backend in use now);
        pass :func:`~labkit.viz.style.run_caption` taken where the source ran, if that differs.

        `fix_toggles=False` leaves out the toggles and the DFlash pad (notebook 02 shows the bug
        before the learner writes the fix: the toggles' labels would give it away); the runs then
        keep the fix switches of `config`.
        """
        import ipywidgets as w

        self.source = source or engine_source()
        config = config or self.source.base.before_fix()
        self.provenance = caption
        self.fix_toggles, self._fix = fix_toggles, config.fix
        if step is None:
            step = first_collision_step(self.source, config)
        self.step = w.IntSlider(value=0, min=0, max=max(step, 1), description="step", continuous_update=False)
        self.drafter = w.Dropdown(options=list(DRAFTERS), value=config.drafter, description="drafter")
        fix = config.fix
        if fix_toggles:
            self.fill = w.Checkbox(value=fix.fill_padding, description="fill padded rows with -1", indent=False)
            self.mask = w.Checkbox(value=fix.mask_kernel, description="mask the kernel (slot >= 0)", indent=False)
            self.dflash_pad = w.Dropdown(options=[0, -1], value=fix.dflash_pad, description="DFlash pad",
                                         disabled=config.drafter != "dflash")
        self.image = w.Image(format="png")
        self.caption = w.HTML()
        self.state: ExplorerView | None = None
        self.redraws = 0
        self._pngs: dict[tuple, bytes] = {}  # (config, step) -> rendered view
        self._busy = False
        self.step.value = step
        controls = [self.step, self.drafter] + ([self.fill, self.mask, self.dflash_pad] if fix_toggles else [])
        for control in controls:
            control.observe(self._on_change, names="value")
        rows = [w.HBox([self.step, self.drafter, self.dflash_pad]), w.HBox([self.fill, self.mask])] if fix_toggles \
            else [w.HBox([self.step, self.drafter])]
        self.widget = w.VBox([*rows, self.caption, self.image])
        self.redraw()

    def _on_change(self, change) -> None:
        if not self._busy:
            self.redraw()

    def config(self) -> DrafterConfig:
        """The drafter configuration the widgets show now."""
        fix = self._fix
        if self.fix_toggles:
            fix = FixSwitches(fill_padding=self.fill.value, mask_kernel=self.mask.value,
                              dflash_pad=self.dflash_pad.value)
        return replace(self.source.base, drafter=self.drafter.value, fix=fix).canonical()

    def redraw(self) -> ExplorerView:
        self._busy = True
        try:
            if self.fix_toggles:
                self.dflash_pad.disabled = self.drafter.value != "dflash"
            config = self.config()
            view = explorer_state(self.step.value, config, source=self.source)
            self.step.max = max(view.num_launches - 1, 1)
            if view.step != self.step.value and view.num_launches:
                self.step.value = view.step
            self.state = view
            self.caption.value = f"<b>{html.escape(view.label)}</b><br>{html.escape(view.caption)}"
            key = (config, view.step)
            if key not in self._pngs:
                self._pngs[key] = render_png(explorer_figure(view, source=self.provenance))
            self.image.value = self._pngs[key]
            self.redraws += 1
        finally:
            self._busy = False
        return view

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


# Settings worth comparing: what each changes in the source's drafter configuration.
FIX_SETTINGS: dict[str, dict] = {
    "before the fix": dict(fix=FixSwitches.before()),
    "mask only": dict(fix=FixSwitches(fill_padding=False)),
    "fill only": dict(fix=FixSwitches(mask_kernel=False)),
    "fill + mask": dict(fix=FixSwitches()),
    "DFlash, pad 0": dict(drafter="dflash", fix=FixSwitches(dflash_pad=0)),
    "DFlash, pad -1": dict(drafter="dflash", fix=FixSwitches()),
}


def overwrite_summary(source: RunSource | None = None, settings: dict[str, dict] = FIX_SETTINGS) -> str:
    """Per setting: launches, launches in which a padded row overwrote a live q, overwritten (slot, step)s."""
    source = source or engine_source()
    head = f"{'setting':<16}{'launches':>9}{'with an overwrite':>19}{'overwritten q':>15}"
    lines = [head]
    for label, changes in settings.items():
        run = source(replace(source.base, **changes))
        if run.error:
            lines.append(f"{label:<16}{'refused before the first padded launch (slot -1, no mask)':>43}")
            continue
        found = [launch.collisions() for launch in run.launches]
        lines.append(f"{label:<16}{len(run.launches):>9}{sum(bool(f) for f in found):>19}"
                     f"{sum(len(f) for f in found):>15}")
    return "\n".join(lines)
