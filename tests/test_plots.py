"""Plots return figures whose drawn data is the computed data (no browser, no display).

Device-agnostic: the runs use whatever backend the session chose (torch, the interpreter, or
compiled Triton with CUDA tensors). Where a result depends on which store lands last, the strict
form is asserted only where programs run in order (interpreter, torch); on a GPU the test asserts
what holds under any order (both rows stored, q holds one row's values or the other's).
"""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from labkit import backends
from labkit.bench.runs import timeline_run
from labkit.bench.scenario import TIMELINE
from labkit.config import FixSwitches
from labkit.proofs.stats import total_variation
from labkit.viz import mapping_plots as mp
from labkit.viz import ownership_plots as op
from labkit.viz import q_plots as qp
from labkit.viz.bench_plots import bench_figure
from labkit.viz.fixed_map import moving_parts_fixed
from labkit.viz.moving_parts import moving_parts
from labkit.viz.style import BAD_COLOR, OK_COLOR, caption_of, drawn_texts

IN_ORDER = backends.backend() != "triton"  # programs store in grid order: the padded row's store lands last


def _text_at(ax, x, y) -> str:
    found = [t.get_text() for t in ax.texts if t.get_position() == (x, y)]
    assert len(found) == 1, found
    return found[0]


def _softmax(logits: torch.Tensor, temp: float) -> np.ndarray:
    return torch.softmax(logits.detach().cpu().double() / temp, -1).numpy()


def test_heat_map_holds_the_stale_slot_before_and_minus_one_after(buggy, fixed):
    shrunk = buggy.launches[1]
    pad_row = shrunk.num_reqs  # the first padded row
    stale = buggy.launches[0].mapping[pad_row].item()  # what the larger batch left there
    assert stale in shrunk.live_slots  # it is a live request's slot: the dangerous case
    for run, value, kind in ((buggy, stale, mp.PAD_COLLIDES), (fixed, -1, mp.PAD_EMPTY)):
        grid = mp.mapping_grid(run.launches)
        assert grid.values[1, pad_row] == value and grid.kinds[1, pad_row] == kind
        assert (grid.kinds[:, :pad_row] == mp.LIVE).all()
        fig = mp.mapping_heatmap(run.launches)
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        np.testing.assert_array_equal(np.asarray(ax.images[0].get_array()), grid.kinds)
        assert _text_at(ax, pad_row, 1) == str(value)
        legend = [t.get_text() for t in fig.legends[0].get_texts()]  # under the axes, kept clear of the x label
        assert mp._KIND_LABELS[kind] in legend
        assert ax.get_xlabel() and ax.get_ylabel()
        assert f"labkit's {backends.backend()} backend" in caption_of(fig)


def test_categories_of_a_dflash_mapping_with_pad_zero():
    run = timeline_run(config=replace(TIMELINE, drafter="dflash", fix=FixSwitches(dflash=False)))
    grid = mp.mapping_grid(run.launches)
    k = run.launches[1].samples_per_req
    assert grid.samples_per_req == k == 2
    assert grid.values[1, 7 * k:8 * k].tolist() == [0] * k  # padded sample rows point at slot 0
    assert (grid.kinds[1, 7 * k:8 * k] == mp.PAD_COLLIDES).all()  # ... which is live


def test_ownership_before_the_fix(buggy):
    launch = buggy.launches[1]
    slot, padded_row = 7, launch.num_reqs  # padded row 7 holds stale slot 7, live again at row 6
    live_row = launch.live_slots.index(slot)
    own = op.ownership(launch)
    assert (padded_row, slot, "collides") in own.edges
    assert (own.writes[slot] == 2).all()  # both rows stored, at every draft step, in any order
    assert set(own.writer[slot].tolist()) <= {live_row, padded_row}
    overwritten = own.writer[slot] == padded_row
    np.testing.assert_array_equal(own.kinds[slot], np.where(overwritten, op.OVERWRITTEN, op.OWN_OK))
    if IN_ORDER:
        assert overwritten.all()
        assert own.sentences == [f"padded row {padded_row} wrote slot {slot}'s q (draft steps 0, 1) "
                                 f"after row {live_row} did"]
    fig = op.ownership_map(launch)
    red = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)
           and to_hex(p.get_edgecolor()) == to_hex(BAD_COLOR)]
    assert len(red) == 1  # the padded row's arrow to the live slot, whoever won the race
    title = fig._suptitle.get_text()
    assert (f"padded row {padded_row} wrote slot {slot}" in title) == bool(overwritten.any())
    assert caption_of(fig)


def test_ownership_after_the_fix(fixed):
    clean = op.ownership(fixed.launches[1])
    assert clean.sentences == [] and not (clean.kinds == op.OVERWRITTEN).any()
    assert (7, -1, "empty") in clean.edges
    assert (clean.writes[7] == 1).all()


def test_q_used_is_one_of_the_two_rows_q_before_and_the_drawn_q_after(buggy, fixed):
    launch = buggy.launches[1]
    slot, step, padded_row = 7, 0, launch.num_reqs
    pair = qp.q_pair(launch, slot, step)
    temp = float(launch.temperature[slot])
    padded_q = _softmax(launch.row_logits[padded_row, step], temp)
    assert pair.live_row == launch.live_slots.index(slot) and pair.own_row == pair.live_row
    np.testing.assert_allclose(pair.q_drawn, _softmax(launch.row_logits[pair.live_row, step], temp), rtol=1e-6)
    assert total_variation(torch.from_numpy(pair.q_drawn), torch.from_numpy(padded_q)) > 0.05  # rows differ
    if IN_ORDER:
        np.testing.assert_allclose(pair.q_used, padded_q, rtol=1e-5, atol=1e-7)
        assert pair.total_variation > 0.05
    else:
        # On a GPU each element of q holds whichever row's store landed last (the write trace
        # records the race of its own store, which need not be q's): compare the stored logits.
        stored = launch.draft_logits[slot, step].double().cpu()
        rows = launch.row_logits[[pair.live_row, padded_row], step].double().cpu() / temp
        assert (torch.isclose(stored, rows[0], rtol=1e-5) | torch.isclose(stored, rows[1], rtol=1e-5)).all()
    good = qp.q_pair(fixed.launches[1], slot, step)
    np.testing.assert_allclose(good.q_used, good.q_drawn, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="not live"):
        qp.q_pair(buggy.launches[1], 3, 0)


def test_q_figure_draws_the_computed_bars(buggy):
    pair = qp.q_pair(buggy.launches[1], 7, 0)
    fig = qp.q_used_vs_drawn(buggy.launches[1], 7, 0)
    ax = fig.axes[0]
    vocab = len(pair.q_drawn)
    heights = [b.get_height() for b in ax.patches]
    np.testing.assert_allclose(heights[:vocab], pair.q_drawn)
    np.testing.assert_allclose(heights[vocab:2 * vocab], pair.q_used)
    same = np.array_equal(pair.q_drawn, pair.q_used)
    assert to_hex(ax.patches[vocab].get_facecolor()) == to_hex(OK_COLOR if same else BAD_COLOR)
    assert "token" in ax.get_xlabel() and ax.get_ylabel() == "probability"


def test_timeline_q_pair_marks_the_drafted_token_and_p():
    pair = qp.timeline_q_pair()
    assert pair.slot == 7 and pair.step == 0  # the slot padded row 7 shares with live row 6
    assert pair.token is not None and pair.q_drawn[pair.token] > 0  # drawn from q_drawn
    assert pair.p is not None and pair.p.shape == pair.q_drawn.shape and abs(pair.p.sum() - 1) < 1e-9
    kept = pair.acceptance(pair.q_used)
    assert kept == pytest.approx(min(1.0, pair.p[pair.token] / pair.q_used[pair.token]))
    fig = qp.q_used_vs_drawn(pair)
    ax = fig.axes[0]
    vocab = len(pair.p)
    heights = [b.get_height() for b in ax.patches if b.get_width() < 0.5]
    np.testing.assert_allclose(heights[:vocab], pair.p)  # p first, then q drawn, then q used
    np.testing.assert_allclose(heights[2 * vocab:3 * vocab], pair.q_used)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("p:") for label in labels) and any("drafted token" in label for label in labels)
    assert any(f"{kept:.2f}" in t.get_text() for t in ax.texts)  # the annotation next to the token
    fixed = qp.timeline_q_pair(timeline_run(config=TIMELINE.with_pr_fix()), slot=7)
    assert fixed.token == pair.token  # the bug changes q, not the token the live row drew
    np.testing.assert_allclose(fixed.p, pair.p)
    np.testing.assert_allclose(fixed.q_used, fixed.q_drawn, rtol=1e-5, atol=1e-7)


def test_bench_figure_bars_are_the_counts(small_bench):
    fig = bench_figure(small_bench)
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert [round(p.get_width()) for p in bars] == [10, 6, 4, 10]  # right; right + corrupted; refused: hatched
    assert to_hex(bars[2].get_facecolor()) == to_hex(BAD_COLOR)  # only the corrupted bar is red
    assert [to_hex(p.get_facecolor()) for p in bars].count(to_hex(BAD_COLOR)) == 1
    texts = [t.get_text() for t in ax.texts]
    assert "4 of 10 corrupted" in texts and any("refused" in t for t in texts)
    assert "backend" in caption_of(fig)


def _box_with_gid(ax, gid):
    return next(p for p in ax.patches if isinstance(p, FancyBboxPatch) and p.get_gid() == gid)


def _inside(box, point, slack=0.03) -> bool:
    x, y = point
    return (box.get_x() - slack <= x <= box.get_x() + box.get_width() + slack
            and box.get_y() - slack <= y <= box.get_y() + box.get_height() + slack)


def test_moving_parts_names_every_part_of_the_fix_and_draws_the_padded_store():
    fig = moving_parts_fixed()
    ax = fig.axes[0]
    texts = " ".join(t.get_text() for t in ax.texts)
    for needle in ("FIX 1", "FIX 2", "FIX 3", "idx_mapping[row]", "draft_logits[slot", "inside the CUDA graph"):
        assert needle in texts
    # Two stores cross from the row-indexed (blue) kernel into the slot-indexed (orange) q: a live
    # row's (orange arrow) and the padded row's (the one red arrow). _posA_posB: the arrow's end
    # points in data coordinates (FancyArrowPatch has no public getter).
    kernel, q = _box_with_gid(ax, "kernel"), _box_with_gid(ax, "draft_logits")
    assert to_hex(kernel.get_facecolor()) == to_hex(_box_with_gid(ax, "idx_mapping").get_facecolor())  # by row
    assert to_hex(q.get_facecolor()) == to_hex(_box_with_gid(ax, "temperature").get_facecolor())  # by slot
    red = [p for p in ax.patches if isinstance(p, FancyArrowPatch) and to_hex(p.get_edgecolor()) == to_hex(BAD_COLOR)]
    assert [p.get_gid() for p in red] == ["padded_store"]
    store = next(p for p in ax.patches if p.get_gid() == "store_q")
    for arrow in (red[0], store):
        start, end = arrow._posA_posB
        assert _inside(kernel, start) and _inside(q, end)
    assert "padded row 7" in texts


# What would give an exercise's answer away in the figure notebook 00 shows before the exercises.
SPOILERS = ("-1", "mask", ">= 0", "< 0", "skip", "fill", "FIX", "int64", "pad with")


def _texts(fig) -> str:
    return "\n".join(t.get_text() for t in drawn_texts(fig))


def test_the_learners_moving_parts_marks_the_bug_without_its_fix():
    fig = moving_parts()
    texts = _texts(fig).casefold()
    leaks = [token for token in SPOILERS if token.casefold() in texts]
    assert leaks == [], f"moving_parts() gives the fix away: {leaks}"
    # The same scan finds what the fixed variant adds: it reads the legend and every box.
    assert [token for token in SPOILERS if token.casefold() in _texts(moving_parts_fixed()).casefold()]
    red = " ".join(t.get_text() for t in drawn_texts(fig) if to_hex(t.get_color()) == to_hex(BAD_COLOR))
    # idx_mapping's padded entries, the store, DFlash's padded sample rows (marked, not answered: which
    # request their pad hurts is the question of exercise (c))
    for place in ("stale", "padded row 7", "padded sample rows"):
        assert place in red
    assert "slot 0" not in red


def test_the_fixed_moving_parts_adds_the_three_parts_of_the_fix():
    texts = _texts(moving_parts_fixed())
    for part in ("FIX 1: idx_mapping[num_reqs:] = -1", "FIX 2: skip slot < 0\n(masked loads + store)",
                 "FIX 3: pad with -1, not 0"):
        assert part.replace("\n", " ") in texts.replace("\n", " ")
    assert "FIX" not in _texts(moving_parts())


def test_distribution_bars_and_token_labels():
    assert qp.token_labels()[:3] == ["pad", "nl", "sp"]
    fig = qp.distribution_bars(np.array([0.5, 0.5]), {"a": np.array([0.4, 0.6])}, labels=["x", "y"])
    assert [round(p.get_height(), 2) for p in fig.axes[0].patches] == [0.5, 0.5, 0.4, 0.6]
    assert fig.axes[0].get_xlabel() and fig.axes[0].get_ylabel()


def test_figures_are_deterministic(buggy):
    def png():
        buf = io.BytesIO()
        op.ownership_map(buggy.launches[1]).savefig(buf, format="png", metadata={"Software": None})
        return buf.getvalue()

    assert png() == png()


def test_write_all_writes_the_explaining_and_the_record_figures(tmp_path):
    from labkit.bench.repro import BenchConfig, BenchResult, ModeResult
    from labkit.viz import figures

    bench = BenchResult(BenchConfig(prompts=2), {"eager": ModeResult("eager", "eager", 2, 2, 0, 0.5, 0.3, 1, 0.9)},
                        {}, [], 1.0)
    record = {"provenance": {"device": "test GPU", "date": "2026-01-01"},
              "e2e": {"median_tokens_per_s": {"eager": 10.0}, "runs": []}}
    # On the torch references, as `python -m labkit figures` (backend auto) makes them on a CPU.
    with backends.using_backend("torch"):
        paths = figures.write_all(tmp_path, bench=bench, explorer_prompts=2, record=record)
    names = [p.name for p in paths]
    assert names == ["moving_parts.png", "moving_parts_fixed.png", "mapping_heatmap.png", "ownership_map.png",
                     "q_used_vs_drawn.png", "bench_before_after.png", "timing_tokens_per_s.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_moving_parts_refuses_a_note_for_a_place_it_does_not_have():
    with pytest.raises(ValueError, match="no place numbered \\[4\\]"):
        moving_parts({4: "nowhere"})
