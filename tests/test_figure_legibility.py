"""Figures a room can read: every text of every figure the notebooks show reads at 10 pt or more when
the figure is shown 1280 pixels wide (a projected screen), and no text is drawn over another.

The figures are built from the inputs the other figure tests use (tests/conftest.py) and, for the
explorer, from the engine runs notebook 02 shows it with.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from labkit.bench.runs import engine_source
from labkit.config import FixSwitches
from labkit.viz import cpu_timing, figures
from labkit.viz import mapping_plots as mp
from labkit.viz import ownership_plots as op
from labkit.viz import q_plots as qp
from labkit.viz.bench_plots import bench_figure
from labkit.viz.fixed_map import moving_parts_fixed
from labkit.viz.moving_parts import moving_parts
from labkit.viz.proof_plots import plot_distributions, plot_tv_vs_n
from labkit.viz.race_plots import plot_race_blocks
from labkit.viz.style import MIN_SHOWN_PT, SHOWN_PX, drawn_texts, smallest_text_at
from labkit.viz.widgets import explorer_figure, explorer_state, first_collision_step


@pytest.fixture(scope="module")
def notebook_source():
    """Notebook 02's explorer input: engine runs over 10 prompts on the torch references (cached per fix setting)."""
    return engine_source(prompts=10, backend="torch")  # as notebook 02 runs it


def _explorer(get, **changes):
    source = get("notebook_source")
    config = replace(source.base.before_fix(), **changes)
    step = first_collision_step(source, config)
    return explorer_figure(explorer_state(step, config, source=source))


def _compare(get):
    before, after = get("buggy"), get("fixed")
    return mp.compare_mappings([("before the fix", mp.mapping_grid(before.launches)),
                                ("after the fix", mp.mapping_grid(after.launches))])


def _sibling_bars(get):
    # Notebook 05's call, with made-up frequencies of the same shape.
    return qp.distribution_bars(np.array([0.5, 0.3, 0.2]),
                                {"residual with its own noise": np.array([0.49, 0.31, 0.2]),
                                 "residual reusing the draft's noise": np.array([0.6, 0.3, 0.1])},
                                labels=["A", "B", "C"], title="first emitted token over 200,000 requests")


# name -> build(get), where get(fixture name) returns a fixture's value
FIGURES = {
    "moving_parts": lambda get: moving_parts(),
    "moving_parts_fixed": lambda get: moving_parts_fixed(),
    "ownership_map": lambda get: op.ownership_map(get("buggy").launches[1]),
    "ownership_map, titled": lambda get: op.ownership_map(get("buggy").launches[1], title="docs/MECHANICS.md's "
                                                          "timeline, step t+1 (slot 3 finished)"),
    "mapping_heatmap": lambda get: mp.mapping_heatmap(get("buggy").launches, title="docs/MECHANICS.md's timeline"),
    "compare_mappings": _compare,
    "q_used_vs_drawn": lambda get: qp.q_used_vs_drawn(get("buggy").launches[1], slot=7, step=0),
    "q_used_vs_drawn, timeline pair": lambda get: qp.q_used_vs_drawn(qp.timeline_q_pair()),
    "distribution_bars": _sibling_bars,
    "bench_figure": lambda get: bench_figure(get("small_bench"), title="ablation: 50 prompts per mode"),
    "explorer_figure": _explorer,
    "explorer_figure, DFlash pad 0": lambda get: _explorer(get, drafter="dflash", fix=FixSwitches(dflash=False)),
    "explorer_figure, refused": lambda get: _explorer(get, fix=FixSwitches(kernel=False)),
    "plot_tv_vs_n": lambda get: plot_tv_vs_n(get("small_proof")),
    "plot_distributions": lambda get: plot_distributions(get("small_proof"), get("models").tokenizer),
    "plot_race_blocks, two vocabularies": lambda get: plot_race_blocks(get("race_record")),
    "plot_cpu_kernel": lambda get: cpu_timing.plot_cpu_kernel(cpu_timing.cpu_record(rows=(1, 2), vocab=512,
                                                                                      repeats=1)),
} | {name: (lambda get, draw=draw: draw(get("record"))) for name, (_, draw) in figures.RECORD_FIGURES.items()}


def _overlapping_texts(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose boxes overlap (by more than the half pixel two neighbours may share)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer).padded(-0.5)) for t in drawn_texts(fig)]
    return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]


def _texts_past_the_sides(fig: Figure) -> list[str]:
    """Texts reaching past the figure's left or right edge: the notebook's tight bounding box would
    widen the picture for them, and every text would then read smaller than its size says."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    width = fig.bbox.width
    return [t.get_text() for t in drawn_texts(fig)
            if t.get_window_extent(renderer).x0 < -0.5 or t.get_window_extent(renderer).x1 > width + 0.5]


@pytest.mark.parametrize("name", list(FIGURES))
def test_every_text_reads_10_pt_at_1280_px_inside_the_figure_and_none_overlaps(name, request):
    fig = FIGURES[name](request.getfixturevalue)
    points, text = smallest_text_at(fig)
    assert points >= MIN_SHOWN_PT, f"{name}: {text!r} reads {points:.2f} pt shown {SHOWN_PX} px wide"
    assert _overlapping_texts(fig) == [], f"{name}: texts drawn over each other"
    assert _texts_past_the_sides(fig) == [], f"{name}: texts past the figure's sides"


def test_the_checker_sees_every_drawn_text_and_only_those():
    fig = Figure(figsize=(10.0, 4.0))  # 1280 px / 960 px: a size reads 4/3 of itself
    ax, hidden = fig.subplots(1, 2)
    ax.set_title("title", fontsize=12)
    ax.set_xticks([0, 1], ["a", "b"], fontsize=9)
    assert smallest_text_at(fig) == (pytest.approx(12.0), "a")  # tick labels count
    ax.legend(handles=ax.plot([0, 1], label="line"), fontsize=6)
    assert smallest_text_at(fig) == (pytest.approx(8.0), "line")  # so do legends
    hidden.axis("off")  # its tick labels are not drawn
    hidden.text(0.5, 0.5, "", fontsize=1)  # nor is an empty string
    hidden.text(0.5, 0.5, "gone", fontsize=2).set_visible(False)
    assert smallest_text_at(fig)[1] == "line"
    hidden.annotate("note", (0.5, 0.5), fontsize=3)
    assert smallest_text_at(fig) == (pytest.approx(4.0), "note")
    fig.text(0.5, 0.0, "caption", fontsize=1.5)
    assert smallest_text_at(fig, shown_px=960) == (pytest.approx(1.5), "caption")
    assert _overlapping_texts(fig) == []
    fig.text(0.5, 0.0, "over the caption", fontsize=12)
    assert _overlapping_texts(fig) == [("caption", "over the caption")]
