"""Figures drawn from recorded GPU runs: the numbers drawn are the record's, every axis says its
unit, red is kept for corrupted output, and every figure names the record's device and date."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.colors import to_hex

from labkit.errors import LabkitInputError
from labkit.viz import cpu_timing, figures, gpu_records, race_plots, timing_plots
from labkit.viz.style import BAD_COLOR, caption_of


def _colors(ax) -> set[str]:
    found = {to_hex(p.get_facecolor()) for p in ax.patches}
    found |= {to_hex(line.get_color()) for line in ax.lines}
    return found


def test_records_are_found_read_and_captioned(tmp_path, record):
    assert gpu_records.record_paths() and gpu_records.load_record(data_dir=tmp_path) is None
    older = {"provenance": {"device": "old GPU", "date": "2020-01-01"}}
    newer = {"provenance": {"device": "new GPU", "driver": "1", "date": "2021-06-30T10:00:00Z"}}
    (tmp_path / "b.json").write_text(json.dumps(older))
    (tmp_path / "a.json").write_text(json.dumps(newer))
    assert gpu_records.load_record(data_dir=tmp_path)["provenance"]["device"] == "new GPU"  # newest by date
    text = gpu_records.caption(newer)
    assert "new GPU" in text and "driver 1" in text and text.endswith("2021-06-30")
    assert record["provenance"]["device"] in gpu_records.caption(record)


def test_kernel_table_and_headline_are_computed_from_the_record(record):
    e = record["kernel"]["sizes"][0]
    row = gpu_records.kernel_table(record)[0]
    assert row["masked_gbs"] == pytest.approx(e["bytes"] / e["ms"]["masked"] / 1e6)
    assert row["share_of_copy"] == pytest.approx(e["ms"]["copy"] / e["ms"]["masked"])
    head = gpu_records.headline(record)
    big = [r for r in gpu_records.kernel_table(record) if r["rows"] * r["vocab"] >= 256 * 151936]
    assert head["min_share_of_copy"] == pytest.approx(min(r["share_of_copy"] for r in big))


@pytest.mark.parametrize("name", [n for n in figures.RECORD_FIGURES if n != "race_blocks.png"])
def test_every_timing_figure_labels_its_axes_and_names_the_record(record, name):
    fig = figures.RECORD_FIGURES[name][1](record)
    assert record["provenance"]["device"] in caption_of(fig)
    for ax in fig.axes:
        assert ax.get_xlabel(), f"{name}: an axis without an x label"
        assert ax.get_ylabel(), f"{name}: an axis without a y label"
    if name != "timing_tokens_per_s.png":  # the one timing figure that shows corrupted output
        assert all(to_hex(BAD_COLOR) not in _colors(ax) for ax in fig.axes), f"{name} paints something red"


def test_tokens_per_s_is_red_only_for_the_mode_with_corrupted_responses(record):
    fig = timing_plots.plot_tokens_per_s(record)
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_xticklabels()]
    bars = [p for p in ax.patches]
    medians = record["e2e"]["median_tokens_per_s"]
    assert [round(b.get_height(), 3) for b in bars] == [round(medians[n], 3) for n in names]
    runs = record["e2e"]["runs"]
    for name, bar in zip(names, bars, strict=True):
        corrupted = any(r[name]["corrupted"] > 0 for r in runs if name in r)
        assert (to_hex(bar.get_facecolor()) == to_hex(BAD_COLOR)) == corrupted, name
    assert "tokens per second" in ax.get_ylabel()


def test_the_sweep_explains_its_target_line(record):
    ax = timing_plots.plot_sweep(record).axes[0]
    target = [line for line in ax.lines if list(line.get_ydata()) == [timing_plots.TARGET_SHARE] * 2]
    assert len(target) == 1 and to_hex(target[0].get_color()) != to_hex(BAD_COLOR)
    assert "70% of copy bandwidth" in target[0].get_label()
    assert target[0].get_label() in [t.get_text() for t in ax.get_legend().get_texts()]


def test_race_blocks_draws_the_recorded_winners(race_record):
    fig = race_plots.plot_race_blocks(race_record)
    big, toy = race_record["race_blocks"]["vocab_151936"], race_record["race_blocks"]["vocab_30"]
    assert len(fig.axes) == 7  # one row of three panels per vocabulary, the larger first; then every run
    strip, wins, shares = fig.axes[:3]
    np.testing.assert_array_equal(np.asarray(strip.collections[0].get_array()).ravel(), big["example_owner"])
    edges = race_plots.block_edges(151936, 4096, 38)
    assert edges[-1] == 151936 and edges[-2] == 37 * 4096
    stairs = wins.patches[0]
    np.testing.assert_allclose(stairs.get_data().values, 100 * np.array(big["padded_wins_per_block"]) / 50)
    assert sum(p.get_height() for p in shares.patches) == big["launches"]
    summary = race_plots.whole_launch_summary(big)
    assert shares.get_title() == summary
    mixed = big["launches"] - big["whole_launch_wins"]["padded"] - big["whole_launch_wins"]["live"]
    assert f"padded row: {big['whole_launch_wins']['padded']}," in summary and f"mixed: {mixed} (of 50)" in summary
    assert len(np.asarray(fig.axes[3].collections[0].get_array()).ravel()) == len(toy["example_owner"]) == 1
    assert "test GPU" in caption_of(fig)
    for ax in fig.axes:
        assert ax.get_xlabel()
    runs = fig.axes[6]  # every recorded run (here: run 2 only), with the shares the docs print
    labels = [t.get_text() for t in runs.texts]
    for entry in (big, toy):
        share = sum(entry["padded_share_per_launch"]) / entry["launches"]
        assert f"{100 * share:.0f}% from the padded row" in labels
    only = race_plots.plot_race_blocks(race_record, vocab=30)
    assert len(only.axes) == 4


def test_race_blocks_refuses_records_without_them(race_record):
    with pytest.raises(LabkitInputError, match="race_blocks"):
        race_plots.plot_race_blocks({"provenance": {}})
    broken = {"race_blocks": {k: v for k, v in race_record["race_blocks"]["vocab_30"].items() if k != "rows"}}
    with pytest.raises(LabkitInputError, match="rows"):
        race_plots.plot_race_blocks(broken)
    assert "race_blocks.png" in figures.available_figures(race_record)
    assert "race_blocks.png" not in figures.available_figures({"kernel": {"sizes": []}})


def test_without_a_record_the_cpu_timer_draws_a_labelled_figure(tmp_path):
    rec = cpu_timing.cpu_record(rows=(1, 2), vocab=512, repeats=1)
    assert rec["provenance"]["cpu_measured"] and len(rec["kernel"]["sizes"]) == 2
    fig = cpu_timing.plot_cpu_kernel(rec)
    assert "CPU-measured" in caption_of(fig) and fig.axes[0].get_ylabel() == "time per call (ms)"
    said = []
    paths = figures.write_record_figures(tmp_path, data_dir=tmp_path / "none", log=said.append)
    assert [p.name for p in paths] == ["timing_cpu_measured.png"] and "no GPU record" in said[0]


def test_kernel_vs_torch_names_the_hash_port_and_draws_natural_samplers(record):
    natural = {"vocab": 151936, "sizes": [{"rows": 256, "vocab": 151936, "ms": {"kernel": 0.1, "rand_gumbel": 0.9,
                                                                                 "multinomial": 1.5}}]}
    ax = timing_plots.plot_kernel_vs_torch({**record, "torch_natural": natural}).axes[0]
    labels = {line.get_label(): line for line in ax.lines}
    assert "torch port of the kit's hash noise" in labels
    rand = labels["torch sampler: torch.rand Gumbel + argmax"]
    assert list(rand.get_xdata()) == [256] and list(rand.get_ydata()) == pytest.approx([900.0])
    bare = timing_plots.plot_kernel_vs_torch({k: v for k, v in record.items() if k != "torch_natural"}).axes[0]
    assert not any(line.get_label().startswith("torch sampler") for line in bare.lines)
