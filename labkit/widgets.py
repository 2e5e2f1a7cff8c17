"""The stale-mapping explorer: a step slider and one toggle per part of the fix.

The logic is plain functions of the widget values, testable without a browser or a kernel:

    timeline_run(schedule, fix, drafter)   -> RecordedRun   a hand-built batch schedule (fast)
    engine_run(drafter, fill, mask, pad)   -> RecordedRun   the toy engine with record=True (cached)
    explorer_state(step, fill, mask, ...)  -> ExplorerView  what to draw for these widget values

:class:`Explorer` wires ipywidgets to them (ipywidgets is imported only there). Engine runs are
cached per fix setting, so moving the slider only redraws, and going back to a setting is instant.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass, field
from typing import Callable

import torch

from labkit.errors import PaddedSlotOutOfBoundsError
from labkit.speculator import FixSwitches, LaunchRecord, make_speculator

__all__ = [
    "MECHANICS_SCHEDULE",
    "LONG_SCHEDULE",
    "RecordedRun",
    "ExplorerView",
    "timeline_run",
    "engine_run",
    "engine_source",
    "timeline_source",
    "explorer_state",
    "overwrite_summary",
    "FIX_SETTINGS",
    "Explorer",
]

# MECHANICS.md's timeline: 8 live requests in slots 0..7, then slot 3 finishes (capture sizes 1, 2, 4, 8).
MECHANICS_SCHEDULE: tuple[tuple[int, ...], ...] = ((0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 4, 5, 6, 7))
# A longer schedule for tests and demos: the batch grows, shrinks, a freed slot is reused.
LONG_SCHEDULE: tuple[tuple[int, ...], ...] = (
    (0, 1, 2), (0, 1, 2, 3, 4), (0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 4, 5, 6, 7), (1, 2, 4, 5, 6, 7),
    (1, 2, 4, 5, 6, 7, 0), (1, 2, 5, 6, 7, 0), (2, 5, 7, 0), (2, 5, 0), (5, 0, 1), (5, 0, 1, 3, 4),
)

DRAFTERS = ("autoregressive", "dflash")


@dataclass
class RecordedRun:
    """The launches of one run (one per engine step), or why the run was refused."""

    launches: list[LaunchRecord]
    steps: list[int]
    label: str
    error: str | None = None


@functools.lru_cache(maxsize=1)
def _cached_models():
    from labkit.backends import default_device
    from labkit.models import load_toy_models

    return load_toy_models(default_device())


def _timeline_inputs(models, slots, step: int, max_num_reqs: int):
    """Contexts from real corpus prompts (one per slot, fixed), temperatures 0.8/1.0, fixed seeds."""
    from labkit.corpus import sample_prompts
    from labkit.models import encode_context

    prompts = sample_prompts(max_num_reqs, seed=7)
    # Each step moves every request on by one character, so contexts change from step to step.
    histories = [models.tokenizer.encode(prompts[s] + "and the way home"[:step]) for s in slots]
    contexts = encode_context(histories, models.draft.context_len, models.tokenizer.pad_id)
    temperature = torch.tensor([0.8 if s % 2 else 1.0 for s in range(max_num_reqs)], dtype=torch.float32)
    seeds = torch.arange(max_num_reqs, dtype=torch.int64) * 1_000_003 + 17
    positions = torch.tensor([len(h) for h in histories], dtype=torch.int64)
    device = next(models.draft.parameters()).device  # the GPU on a GPU box
    return tuple(t.to(device) for t in (torch.tensor(slots, dtype=torch.int32), temperature, seeds,
                                         contexts, positions))


def timeline_run(schedule=MECHANICS_SCHEDULE, fix: FixSwitches = FixSwitches.before(), drafter: str = "autoregressive",
                 *, num_steps: int = 2, capture_sizes=(1, 2, 4, 8), use_graphs: bool = True) -> RecordedRun:
    """Drive a Speculator directly through `schedule` (live slots per step, in batch-row order)."""
    models = _cached_models()
    max_num_reqs = capture_sizes[-1]
    spec = make_speculator(drafter, models.draft, max_num_reqs=max_num_reqs, num_steps=num_steps,
                           capture_sizes=capture_sizes, fix=fix, use_graphs=use_graphs, record=True)
    launches = []
    label = f"{drafter}, {_fix_words(fix, drafter)}"
    try:
        for step, slots in enumerate(schedule):
            spec.propose(*_timeline_inputs(models, list(slots), step, max_num_reqs))
            launches.append(spec.last_record)
    except PaddedSlotOutOfBoundsError as err:
        return RecordedRun(launches, list(range(len(launches))), label, error=str(err))
    return RecordedRun(launches, list(range(len(launches))), label)


def _fix_words(fix: FixSwitches, drafter: str) -> str:
    parts = [f"fill {'on' if fix.fill_padding else 'off'}", f"mask {'on' if fix.mask_kernel else 'off'}"]
    if drafter == "dflash":
        parts.append(f"DFlash pad {fix.dflash_pad}")
    return ", ".join(parts)


def switches(fill: bool, mask: bool, dflash_pad: int = -1) -> FixSwitches:
    return FixSwitches(fill_padding=bool(fill), mask_kernel=bool(mask), dflash_pad=int(dflash_pad))


@functools.lru_cache(maxsize=32)
def engine_run(drafter: str = "autoregressive", fill: bool = False, mask: bool = False, dflash_pad: int = 0,
               prompts: int = 10, seed: int = 0) -> RecordedRun:
    """The toy engine over a small bench workload with record=True (cached per argument set)."""
    from labkit.bench import BenchConfig, Mode, engine_config
    from labkit.corpus import sample_prompts
    from labkit.engine import Engine, make_requests

    models = _cached_models()
    cfg = BenchConfig(prompts=prompts, seed=seed)
    fix = switches(fill, mask, dflash_pad)
    mode = Mode("explorer", "", drafter=drafter, fix=fix)
    requests = make_requests(models.tokenizer, sample_prompts(prompts, seed), seed,
                             min_new_tokens=cfg.min_new_tokens, max_new_tokens=cfg.max_new_tokens,
                             arrivals_per_step=cfg.arrivals_per_step)
    label = f"engine, {prompts} prompts, {drafter}, {_fix_words(fix, drafter)}"
    try:
        run = Engine(models, engine_config(mode, cfg, record=True)).generate(requests)
    except PaddedSlotOutOfBoundsError as err:
        return RecordedRun([], [], label, error=str(err))
    return RecordedRun([r.launch for r in run.records], [r.step for r in run.records], label)


Source = Callable[[str, bool, bool, int], RecordedRun]


def engine_source(prompts: int = 10, seed: int = 0) -> Source:
    def source(drafter, fill, mask, dflash_pad):
        # The pad only matters to the DFlash drafter: one cache entry per distinct run.
        pad = int(dflash_pad) if drafter == "dflash" else -1
        return engine_run(drafter, bool(fill), bool(mask), pad, prompts, seed)
    return source


def timeline_source(schedule=LONG_SCHEDULE, num_steps: int = 2) -> Source:
    cache: dict = {}

    def source(drafter, fill, mask, dflash_pad):
        pad = int(dflash_pad) if drafter == "dflash" else -1
        key = (drafter, bool(fill), bool(mask), pad)
        if key not in cache:
            cache[key] = timeline_run(schedule, switches(fill, mask, pad), drafter, num_steps=num_steps)
        return cache[key]
    return source


@dataclass
class ExplorerView:
    """Everything the explorer draws for one set of widget values."""

    step: int
    num_steps: int
    label: str
    error: str | None = None
    launch: LaunchRecord | None = None
    grid: object = None  # plots.MappingGrid of the whole run
    collisions: list = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    q: object = None  # plots.QPair for the focused (slot, draft step), None for greedy runs
    caption: str = ""


def explorer_state(step: int, fill: bool, mask: bool, dflash_pad: int = -1, drafter: str = "autoregressive",
                   *, source: Source | None = None) -> ExplorerView:
    """What to draw for these widget values: the run's mapping grid, and launch `step` in detail.

    The q panel shows the first overwritten (slot, draft step) of the launch; if nothing was
    overwritten it shows the first live slot at draft step 0, where both bars coincide.
    """
    from labkit.plots import launched_width, mapping_grid, ownership, q_pair

    if drafter not in DRAFTERS:
        raise ValueError(f"drafter must be one of {DRAFTERS}, got {drafter!r}")
    run = (source or engine_source())(drafter, fill, mask, dflash_pad)
    if run.error:
        return ExplorerView(step=0, num_steps=0, label=run.label, error=run.error,
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
    return ExplorerView(step=step, num_steps=n, label=run.label, launch=launch,
                        grid=mapping_grid(run.launches, steps=run.steps, width=launched_width(run.launches)),
                        collisions=found,
                        sentences=sentences, q=q, caption=caption)


def first_collision_step(source: Source, drafter="autoregressive", fill=False, mask=False, dflash_pad=0) -> int:
    """The first step of a run at which a padded row overwrote a live request's q (0 if none)."""
    run = source(drafter, fill, mask, dflash_pad)
    return next((i for i, launch in enumerate(run.launches) if launch.collisions()), 0)


def render_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


class Explorer:
    """Slider + toggles -> :func:`explorer_state` -> one PNG (an ``Image`` widget) and a caption.

    An ``Image`` widget rather than an ``Output`` widget: its value is set directly, so it works
    (and can be tested) outside a running kernel.
    """

    def __init__(self, source: Source | None = None, *, step: int | None = None, fill: bool = False,
                 mask: bool = False, dflash_pad: int = 0, drafter: str = "autoregressive"):
        import ipywidgets as w

        self.source = source or engine_source()
        if step is None:
            step = first_collision_step(self.source, drafter, fill, mask, dflash_pad)
        self.step = w.IntSlider(value=0, min=0, max=max(step, 1), description="step", continuous_update=False)
        self.fill = w.Checkbox(value=fill, description="fill padded rows with -1", indent=False)
        self.mask = w.Checkbox(value=mask, description="mask the kernel (slot >= 0)", indent=False)
        self.drafter = w.Dropdown(options=list(DRAFTERS), value=drafter, description="drafter")
        self.dflash_pad = w.Dropdown(options=[0, -1], value=dflash_pad, description="DFlash pad",
                                     disabled=drafter != "dflash")
        self.image = w.Image(format="png")
        self.caption = w.HTML()
        self.state: ExplorerView | None = None
        self.redraws = 0
        self._pngs: dict[tuple, bytes] = {}  # (drafter, fill, mask, pad, step) -> rendered view
        self._busy = False
        self.step.value = step
        for control in (self.step, self.fill, self.mask, self.drafter, self.dflash_pad):
            control.observe(self._on_change, names="value")
        self.widget = w.VBox([w.HBox([self.step, self.drafter, self.dflash_pad]),
                              w.HBox([self.fill, self.mask]), self.caption, self.image])
        self.redraw()

    def _on_change(self, change) -> None:
        if not self._busy:
            self.redraw()

    def redraw(self) -> ExplorerView:
        from labkit.plots import explorer_figure

        self._busy = True
        try:
            self.dflash_pad.disabled = self.drafter.value != "dflash"
            view = explorer_state(self.step.value, self.fill.value, self.mask.value, self.dflash_pad.value,
                                  self.drafter.value, source=self.source)
            self.step.max = max(view.num_steps - 1, 1)
            if view.step != self.step.value and view.num_steps:
                self.step.value = view.step
            self.state = view
            self.caption.value = f"<b>{view.label}</b><br>{_escape(view.caption)}"
            key = (self.drafter.value, self.fill.value, self.mask.value, self.dflash_pad.value, view.step)
            if key not in self._pngs:
                self._pngs[key] = render_png(explorer_figure(view))
            self.image.value = self._pngs[key]
            self.redraws += 1
        finally:
            self._busy = False
        return view

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def _escape(text: str) -> str:
    import html

    return html.escape(text)


# Settings worth comparing, as (label, drafter, fill, mask, DFlash pad).
FIX_SETTINGS = (
    ("before the fix", "autoregressive", False, False, -1),
    ("mask only", "autoregressive", False, True, -1),
    ("fill only", "autoregressive", True, False, -1),
    ("fill + mask", "autoregressive", True, True, -1),
    ("DFlash, pad 0", "dflash", True, True, 0),
    ("DFlash, pad -1", "dflash", True, True, -1),
)


def overwrite_summary(source: Source | None = None, settings=FIX_SETTINGS) -> str:
    """Per setting: launches, launches in which a padded row overwrote a live q, overwritten (slot, step)s."""
    source = source or engine_source()
    head = f"{'setting':<16}{'launches':>9}{'with an overwrite':>19}{'overwritten q':>15}"
    lines = [head]
    for label, drafter, fill, mask, pad in settings:
        run = source(drafter, fill, mask, pad)
        if run.error:
            lines.append(f"{label:<16}{'refused before the first padded launch (slot -1, no mask)':>43}")
            continue
        found = [launch.collisions() for launch in run.launches]
        lines.append(f"{label:<16}{len(run.launches):>9}{sum(bool(f) for f in found):>19}"
                     f"{sum(len(f) for f in found):>15}")
    return "\n".join(lines)
