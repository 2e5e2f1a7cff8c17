"""Plots return figures whose drawn data is the computed data (no browser, no display)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from labkit.runs import timeline_run
from labkit.speculator import FixSwitches
from labkit.viz import plots


@pytest.fixture(scope="module")
def buggy():
    return timeline_run(fix=FixSwitches.before())


@pytest.fixture(scope="module")
def fixed():
    return timeline_run(fix=FixSwitches.after())


def _text_at(ax, x, y) -> str:
    found = [t.get_text() for t in ax.texts if t.get_position() == (x, y)]
    assert len(found) == 1, found
    return found[0]


def test_heat_map_holds_the_stale_slot_before_and_minus_one_after(buggy, fixed):
    shrunk = buggy.launches[1]
    pad_row = shrunk.num_reqs  # the first padded row
    stale = buggy.launches[0].mapping[pad_row].item()  # what the larger batch left there
    assert stale in shrunk.live_slots  # it is a live request's slot: the dangerous case
    for run, value, kind in ((buggy, stale, plots.PAD_COLLIDES), (fixed, -1, plots.PAD_EMPTY)):
        grid = plots.mapping_grid(run.launches)
        assert grid.values[1, pad_row] == value and grid.kinds[1, pad_row] == kind
        assert (grid.kinds[:, :pad_row] == plots.LIVE).all()
        fig = plots.mapping_heatmap(run.launches)
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        np.testing.assert_array_equal(np.asarray(ax.images[0].get_array()), grid.kinds)
        assert _text_at(ax, pad_row, 1) == str(value)
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert plots.KIND_LABELS[kind] in legend


def test_categories_of_a_dflash_mapping_with_pad_zero():
    run = timeline_run(fix=FixSwitches(fill_padding=True, mask_kernel=True, dflash_pad=0), drafter="dflash")
    grid = plots.mapping_grid(run.launches)
    k = run.launches[1].samples_per_req
    assert grid.samples_per_req == k == 2
    assert grid.values[1, 7 * k:8 * k].tolist() == [0] * k  # padded sample rows point at slot 0
    assert (grid.kinds[1, 7 * k:8 * k] == plots.PAD_COLLIDES).all()  # ... which is live


def test_ownership_names_the_padded_row_that_won(buggy, fixed):
    launch = buggy.launches[1]
    slot, _, writer, live_row = launch.collisions()[0]
    own = plots.ownership(launch)
    assert own.sentences == [f"padded row {writer} wrote slot {slot}'s q (draft steps 0, 1) after row {live_row} did"]
    assert (own.kinds[slot] == plots.OVERWRITTEN).all()
    assert int(own.writes[slot, 0]) == 2
    assert (writer, slot, "collides") in own.edges
    fig = plots.ownership_map(launch)
    red = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)
           and to_hex(p.get_edgecolor()) == to_hex(plots.BAD_COLOR)]
    assert len(red) == 1
    assert "padded row 7 wrote slot 7" in fig._suptitle.get_text()
    clean = plots.ownership(fixed.launches[1])
    assert clean.sentences == [] and not (clean.kinds == plots.OVERWRITTEN).any()
    assert (writer, -1, "masked") in clean.edges


def test_q_used_is_the_padded_rows_q_before_and_the_drawn_q_after(buggy, fixed):
    launch = buggy.launches[1]
    slot, step, writer, live_row = launch.collisions()[0]
    pair = plots.q_pair(launch, slot, step)
    temp = float(launch.temperature[slot])
    padded_q = torch.softmax(launch.row_logits[writer, step].double() / temp, -1).numpy()
    np.testing.assert_allclose(pair.q_used, padded_q, rtol=1e-5, atol=1e-7)
    assert pair.live_row == live_row and pair.writer == writer
    assert pair.total_variation > 0.05
    fig = plots.q_used_vs_drawn(launch, slot, step)
    bars = fig.axes[0].patches
    vocab = len(pair.q_drawn)
    np.testing.assert_allclose([b.get_height() for b in bars[:vocab]], pair.q_drawn)
    np.testing.assert_allclose([b.get_height() for b in bars[vocab:]], pair.q_used)
    good = plots.q_pair(fixed.launches[1], slot, step)
    np.testing.assert_allclose(good.q_used, good.q_drawn, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="not live"):
        plots.q_pair(buggy.launches[1], 3, 0)


def test_bench_figure_bars_are_the_counts():
    from labkit.repro import BenchConfig, BenchResult, ModeResult

    modes = {"eager": ModeResult("eager", "eager", 10, 10, 0, 0.5, 0.3, 1, 0.9),
             "graph-buggy": ModeResult("graph-buggy", "eager", 10, 6, 4, 0.6, 0.5, 1, 0.9),
             "graph-fill-only": ModeResult("graph-fill-only", "eager", error="refused")}
    fig = plots.bench_figure(BenchResult(BenchConfig(prompts=10), modes, {}, [], 1.0))
    ax = fig.axes[0]
    widths = [round(p.get_width()) for p in ax.patches if p.get_width() > 0]
    assert widths == [10, 6, 4, 10]  # eager right; buggy right + corrupted; refused: a hatched full bar
    texts = [t.get_text() for t in ax.texts]
    assert "4 of 10 corrupted" in texts and any("refused" in t for t in texts)


def test_moving_parts_names_every_part_of_the_fix():
    fig = plots.moving_parts()
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for needle in ("FIX 1", "FIX 2", "FIX 3", "idx_mapping[row]", "draft_logits[slot", "inside the CUDA graph"):
        assert needle in texts


def test_distribution_bars_and_token_labels():
    assert plots.token_labels()[:3] == ["pad", "nl", "sp"]
    fig = plots.distribution_bars(np.array([0.5, 0.5]), {"a": np.array([0.4, 0.6])}, labels=["x", "y"])
    assert [round(p.get_height(), 2) for p in fig.axes[0].patches] == [0.5, 0.5, 0.4, 0.6]


def test_figures_are_deterministic(buggy):
    import io

    def png():
        buf = io.BytesIO()
        plots.ownership_map(buggy.launches[1]).savefig(buf, format="png", metadata={"Software": None})
        return buf.getvalue()

    assert png() == png()


def test_write_all_writes_pngs_and_includes_timing(tmp_path, monkeypatch, buggy):
    import sys
    import types

    from labkit.repro import BenchConfig, BenchResult, ModeResult
    from labkit.viz import figures

    timing = types.ModuleType("labkit.viz.timing_plots")
    timing.save_timing_figures = lambda outdir: [outdir / "timing_fake.png"]
    monkeypatch.setitem(sys.modules, "labkit.viz.timing_plots", timing)
    bench = BenchResult(BenchConfig(prompts=2), {"eager": ModeResult("eager", "eager", 2, 2, 0, 0.5, 0.3, 1, 0.9)},
                        {}, [], 1.0)
    paths = figures.write_all(tmp_path, bench=bench, explorer_prompts=2)
    names = [p.name for p in paths]
    assert names[:5] == ["moving_parts.png", "mapping_heatmap.png", "ownership_map.png", "q_used_vs_drawn.png",
                         "bench_before_after.png"]
    assert names[-1] == "timing_fake.png"
    for p in paths[:5]:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- the data behind notebook 05 ------------------------------------------------------------------

def test_int32_offsets_wrap_exactly_at_the_first_overflowing_index():
    from labkit.proofs.siblings import first_overflowing_index, offset_rows

    stride = 4 * 151936
    first = first_overflowing_index(stride)
    ok, bad = offset_rows([first - 1, first], stride)
    assert not ok.wrapped and ok.exact <= 2**31 - 1
    assert bad.wrapped and bad.int32 < 0 and bad.int32 == bad.exact - 2**32


def test_shared_noise_biases_the_output_and_separate_salts_do_not():
    from labkit.proofs.siblings import empirical, sampling_noise_tv, speculative_outputs, total_variation

    p = torch.tensor([0.1, 0.45, 0.45], dtype=torch.float64)
    q = torch.tensor([0.8, 0.19, 0.01], dtype=torch.float64)
    n = 40_000
    noise = sampling_noise_tv(p, n)
    right = total_variation(empirical(speculative_outputs(p, q, n, shared_noise=False), 3), p)
    shared = total_variation(empirical(speculative_outputs(p, q, n, shared_noise=True), 3), p)
    assert right < 4 * noise
    assert shared > 10 * noise
