"""The distribution proof's figures: what they draw, and that they say which backend sampled the tokens."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from labkit.viz.proof_plots import plot_distributions, plot_tv_vs_n
from labkit.viz.style import BAD_COLOR, caption_of


def test_tv_plot_draws_both_paths_and_the_exact_curves(small_proof):
    proof = small_proof
    fig = plot_tv_vs_n(proof)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["exact sampling, E[TV] ~ 1/sqrt(N)", "fixed (fill -1 + mask)", "buggy (stale slots)",
                      "exact TV(p, p_buggy)"]
    fixed, buggy = ax.get_lines()[1], ax.get_lines()[2]
    assert list(fixed.get_xdata()) == [64, 256, 1024]
    assert list(fixed.get_ydata()) == [t for _, t in proof.tv_fixed]
    assert buggy.get_color() == BAD_COLOR  # red marks what is corrupted, and only that
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_xlabel() and ax.get_ylabel()
    assert caption_of(fig) == f"sampled with labkit's torch backend on {proof.fixed.device}; N = 1024 requests per path"


def test_distribution_bars_show_p_and_both_empirical_distributions(small_proof, models):
    proof = small_proof
    fig = plot_distributions(proof, models.tokenizer, top=5)
    ax = fig.axes[0]
    assert len(ax.patches) == 3 * 5
    heights = [bar.get_height() for bar in ax.patches]
    assert max(heights[:5]) == pytest.approx(float(proof.setup.p.max()))  # p's bars first, largest included
    assert ax.get_xlabel() == "next character" and ax.get_ylabel() == "probability"
    assert "torch backend" in caption_of(fig)
