"""The explorer's callbacks, driven the way a browser would: by setting widget values.

Device-agnostic: on a GPU (compiled backend) which store lands last is a race, so the strict
"padded row 7 wrote slot 7's q" is asserted only where programs run in order.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from matplotlib.figure import Figure

from labkit import backends
from labkit.bench.runs import engine_run, timeline_source
from labkit.bench.scenario import LONG_SCHEDULE, TIMELINE
from labkit.config import DrafterConfig, FixSwitches
from labkit.viz import mapping_plots
from labkit.viz.fix_explorer import FixExplorer
from labkit.viz.style import caption_of
from labkit.viz.widgets import Explorer, ExplorerView, explorer_figure, explorer_state

IN_ORDER = backends.backend() != "triton"


def _overwrites(view) -> bool:
    """A live q was overwritten at this step: certain where stores land in order; on a GPU a padded
    row holding a live slot is what is certain, and whether its store landed last is the race."""
    if IN_ORDER:
        return bool(view.collisions)
    return bool((view.grid.kinds[view.step] == mapping_plots.PAD_COLLIDES).any())


BEFORE = TIMELINE.before_fix()


def _fix(drafter="autoregressive", **switches):
    """The timeline's drafter with the PR's fix but for `switches`."""
    return replace(TIMELINE, drafter=drafter, fix=FixSwitches(**switches))


@pytest.fixture(scope="module")
def source():
    return timeline_source(LONG_SCHEDULE)


def test_state_follows_the_step(source):
    a = explorer_state(2, BEFORE, source=source)
    b = explorer_state(7, BEFORE, source=source)
    assert (a.step, b.step) == (2, 7) and a.num_launches == b.num_launches == len(LONG_SCHEDULE)
    assert a.launch.live_slots == list(LONG_SCHEDULE[2]) and b.launch.live_slots == list(LONG_SCHEDULE[7])
    assert a.grid is b.grid or (a.grid.values == b.grid.values).all()  # same run, same grid
    assert explorer_state(99, BEFORE, source=source).step == len(LONG_SCHEDULE) - 1


def test_state_before_and_after_the_fix(source):
    before = explorer_state(3, BEFORE, source=source)  # docs/MECHANICS.md's shrink: slot 3 finished
    assert before.grid.values[3, 7] == 7 and before.grid.kinds[3, 7] == mapping_plots.PAD_COLLIDES
    assert before.launch.writes[7].tolist() == [2, 2]  # rows 6 and 7 both stored slot 7's q
    if IN_ORDER:
        assert before.collisions and before.sentences
        assert "padded row 7 wrote slot 7's q" in before.caption
        assert before.q.writer == 7 and before.q.total_variation > 0
    assert bool(before.collisions) == ("padded row 7 wrote slot 7's q" in before.caption)
    after = explorer_state(3, TIMELINE.with_pr_fix(), source=source)
    assert not after.collisions and "no live request's q was overwritten" in after.caption
    assert after.grid.values[3, 7] == -1 and after.grid.kinds[3, 7] == mapping_plots.PAD_EMPTY
    assert not (after.grid.kinds == mapping_plots.PAD_COLLIDES).any()
    mask_only = explorer_state(3, _fix(host=False), source=source)
    assert _overwrites(mask_only)  # stale slots are >= 0: the mask lets them through
    if IN_ORDER:
        assert mask_only.collisions == before.collisions


def test_fill_without_mask_is_a_refusal_not_a_crash(source):
    view = explorer_state(3, _fix(kernel=False), source=source)
    assert view.error and "mask" in view.error and view.num_launches == 0
    fig = explorer_figure(view)
    assert isinstance(fig, Figure) and "refused" in fig.axes[0].texts[0].get_text() and caption_of(fig)


def test_dflash_pad_toggle(source):
    zero = explorer_state(3, _fix("dflash", dflash=False), source=source)
    minus = explorer_state(3, _fix("dflash"), source=source)
    assert _overwrites(zero) and (zero.grid.values[3, 14:16] == 0).all()  # padded sample rows point at slot 0
    if IN_ORDER:
        assert any(slot == 0 for slot, *_ in zero.collisions)
    assert minus.collisions == []


def test_slider_and_toggles_redraw_with_different_data(source):
    pytest.importorskip("ipywidgets")
    ex = FixExplorer(source, step=2)
    assert ex.state.step == 2 and ex.redraws == 1
    png, caption, launch = ex.image.value, ex.caption.value, ex.state.launch
    ex.step.value = 7
    assert ex.redraws == 2 and ex.state.step == 7
    assert ex.state.launch is not launch and ex.image.value != png and ex.caption.value != caption
    assert ex.step.max == len(LONG_SCHEDULE) - 1

    ex.step.value = 3
    assert _overwrites(ex.state)
    ex.fill.value = True
    assert ex.state.error  # fill without the mask: refused
    ex.mask.value = True
    assert ex.state.error is None and ex.state.collisions == []

    assert ex.dflash_pad.disabled
    ex.drafter.value = "dflash"
    assert not ex.dflash_pad.disabled and ex.state.launch.samples_per_req == 2
    ex.dflash_pad.value = 0
    assert _overwrites(ex.state)
    assert ex.widget.children  # the assembled box


def test_default_step_is_the_first_overwrite(source):
    pytest.importorskip("ipywidgets")
    ex = Explorer(source)
    launches = source(BEFORE).launches  # the same (cached) run the explorer shows
    first = next((i for i, launch in enumerate(launches) if launch.collisions()), None)
    if IN_ORDER:
        assert first is not None  # in order, the padded row always stores last
    assert ex.state.step == (first or 0) and bool(ex.state.collisions) == (first is not None)


def test_engine_runs_are_cached_per_setting():
    a = engine_run(DrafterConfig().before_fix().canonical(), prompts=3)
    assert engine_run(DrafterConfig().before_fix().canonical(), prompts=3) is a
    assert a.launches and len(a.launches) == len(a.steps)
    assert engine_run(DrafterConfig(fix=FixSwitches(kernel=False)), prompts=3).error  # refused, also cached


def test_the_explorer_before_the_fix_has_no_switch_for_it(source):
    pytest.importorskip("ipywidgets")
    ex = Explorer(source)
    labels = [getattr(c, "description", "") for row in ex.widget.children[:-2] for c in row.children]
    assert labels == ["step", "drafter"] and not hasattr(ex, "fill")
    ex.drafter.value = "dflash"
    assert ex.state.launch.samples_per_req == 2 and ex.config().fix == BEFORE.fix  # only the drafter moved


def test_a_drafter_chosen_while_a_view_is_drawn_is_the_one_drawn_next(source, monkeypatch):
    """The drop-down never shows one drafter while the view draws another: a choice that arrives while a
    view is being drawn (a quick second click) is drawn as soon as that view is done."""
    pytest.importorskip("ipywidgets")
    from labkit.viz import widgets

    ex = Explorer(source, step=3)
    real, calls = widgets.explorer_state, []

    def slow_state(step, config, *, source):
        calls.append(config.drafter)
        if len(calls) == 1:
            ex.drafter.value = "autoregressive"  # the learner changes their mind mid-draw
        return real(step, config, source=source)

    monkeypatch.setattr(widgets, "explorer_state", slow_state)
    ex.drafter.value = "dflash"
    assert calls == ["dflash", "autoregressive"]
    assert ex.drafter.value == "autoregressive" and ex.state.launch.samples_per_req == 1
    assert ex.drawn == (ex.config(), ex.step.value)


def test_a_view_that_cannot_be_drawn_says_so_and_leaves_the_widgets_working(source, monkeypatch):
    pytest.importorskip("ipywidgets")
    from labkit.viz import widgets

    ex = Explorer(source, step=3)
    real = widgets.explorer_state

    def failing_for_dflash(step, config, *, source):
        if config.drafter == "dflash":
            raise RuntimeError("the run broke")
        return real(step, config, source=source)

    monkeypatch.setattr(widgets, "explorer_state", failing_for_dflash)
    ex.drafter.value = "dflash"
    assert isinstance(ex.state, ExplorerView) and ex.state.error and "the run broke" in ex.caption.value
    assert "dflash" in ex.caption.value  # the caption names the drafter the drop-down shows
    ex.drafter.value = "autoregressive"
    assert ex.state.error is None and ex.state.launch.samples_per_req == 1
