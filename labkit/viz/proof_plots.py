"""Figures of the distribution proof (:mod:`labkit.proofs.distribution`). Each returns a matplotlib
Figure (built without pyplot, so nothing is shown twice in a notebook) and says under it which
backend and device sampled the tokens."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from labkit.proofs.distribution import Proof
from labkit.proofs.stats import empirical, expected_tv
from labkit.viz.style import BAD_COLOR, P_COLOR, QUIET_COLOR, ROW_COLOR, add_caption


def _caption(proof: Proof) -> str:
    s = proof.fixed
    return f"sampled with labkit's {s.backend} backend on {s.device}; N = {s.n} requests per path"


def _figure(size) -> tuple[Figure, object]:
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def plot_tv_vs_n(proof: Proof, ax=None) -> Figure:
    """TV(p_hat, p) against N on log-log axes: the fixed path follows the exact-sampling curve
    (slope -0.5); the buggy path flattens at TV(p, p_buggy)."""
    fig, ax = _figure((6.4, 4.4)) if ax is None else (ax.figure, ax)
    ns = [n for n, _ in proof.tv_fixed]
    grid = [ns[0] * (ns[-1] / ns[0]) ** (i / 50) for i in range(51)]
    ax.loglog(grid, [expected_tv(proof.setup.p, n) for n in grid], "--", color=QUIET_COLOR,
              label="exact sampling, E[TV] ~ 1/sqrt(N)")
    ax.loglog(ns, [t for _, t in proof.tv_fixed], "o-", color=ROW_COLOR, label="fixed (fill -1 + mask)")
    ax.loglog(ns, [t for _, t in proof.tv_buggy], "s-", color=BAD_COLOR, label="buggy (stale slots)")
    ax.axhline(proof.setup.tv_buggy, ls=":", color=BAD_COLOR, label="exact TV(p, p_buggy)")
    ax.set_xlabel("requests N (one emitted token each)")
    ax.set_ylabel("TV(empirical, target p)  [0 to 1]")
    ax.set_title(f"first token after {proof.setup.context!r}")
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(True, which="both", alpha=0.3)
    return add_caption(fig, _caption(proof))


def plot_distributions(proof: Proof, tokenizer=None, top: int = 10, ax=None) -> Figure:
    """Bars of p, the fixed path's and the buggy path's empirical distributions on the top tokens."""
    from labkit.models import CharTokenizer

    tokenizer = tokenizer or CharTokenizer()
    fig, ax = _figure((7.2, 3.8)) if ax is None else (ax.figure, ax)
    p = proof.setup.p
    fixed = empirical(proof.fixed.tokens, p.numel())
    buggy = empirical(proof.buggy.tokens, p.numel())
    order = torch.argsort(torch.maximum(p, buggy), descending=True)[:top].tolist()
    xs = list(range(len(order)))
    width = 0.27
    ax.bar([x - width for x in xs], [float(p[i]) for i in order], width, color=P_COLOR, label="target p (exact)")
    ax.bar(xs, [float(fixed[i]) for i in order], width, color=ROW_COLOR, label="fixed, empirical")
    ax.bar([x + width for x in xs], [float(buggy[i]) for i in order], width, color=BAD_COLOR, label="buggy, empirical")
    ax.set_xticks(xs, [repr(tokenizer.decode([i])) if i else "pad" for i in order])
    ax.set_xlabel("next character")
    ax.set_ylabel("probability")
    ax.set_title(f"next character after {proof.setup.context!r}, N = {proof.fixed.n}")
    ax.legend(fontsize=8)
    return add_caption(fig, _caption(proof))
