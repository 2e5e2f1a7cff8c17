"""The statistics of the proofs, in one place: histograms, total variation, chi-square, slopes.

    counts_of(tokens, vocab)      token counts (float64) over a vocabulary
    empirical(tokens, vocab)      the same, normalised: the empirical distribution p_hat
    total_variation(a, b)         1/2 sum |a - b| after normalising each (distributions or counts)
    expected_tv(p, n)             E[TV(p_hat, p)] for n exact samples, to leading order
    chi_square(tokens, p)         goodness of fit, rare categories pooled; chi2_sf is its p-value
    tv_curve(tokens, p, ns)       TV of the first n samples, for each n
    loglog_slope(curve)           least-squares slope of log TV against log n (-0.5 when exact)

Every other module of the kit uses these rather than its own copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from labkit.errors import LabkitInputError


def counts_of(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    """How often each token id in [0, vocab) occurs in `tokens` (any shape), as float64 [vocab]."""
    tokens = torch.as_tensor(tokens)
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise LabkitInputError(f"tokens must be an integer tensor of token ids, got {tokens.dtype}")
    if vocab < 1:
        raise LabkitInputError(f"vocab must be >= 1, got {vocab}")
    flat = tokens.flatten().long().cpu()
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= vocab):
        raise LabkitInputError(f"tokens must lie in [0, vocab={vocab}), got ids from {int(flat.min())} "
                               f"to {int(flat.max())}")
    return torch.bincount(flat, minlength=vocab).double()


def empirical(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    """The empirical distribution of `tokens` over [0, vocab), float64 [vocab], summing to 1."""
    counts = counts_of(tokens, vocab)
    if counts.sum() == 0:
        raise LabkitInputError("tokens is empty: an empirical distribution needs at least one sample")
    return counts / counts.sum()


def total_variation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Total-variation distance 1/2 sum |a - b| between two distributions over the same vocabulary.

    Each side is normalised first, so counts (from :func:`counts_of`) work as well as probabilities.
    """
    a, b = torch.as_tensor(a).double().cpu(), torch.as_tensor(b).double().cpu()
    if a.shape != b.shape:
        raise LabkitInputError(f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    for name, x in (("a", a), ("b", b)):
        if x.numel() == 0 or bool((x < 0).any()) or not float(x.sum()) > 0:
            raise LabkitInputError(f"{name} must be non-negative weights with a positive sum")
    return 0.5 * float((a / a.sum() - b / b.sum()).abs().sum())


def expected_tv(p: torch.Tensor, n: int) -> float:
    """E[TV(p_hat, p)] for n exact samples from p, to leading order (each count near-normal):
    1/2 sum sqrt(2 p (1 - p) / (pi n)). Shrinks like 1/sqrt(n)."""
    if n < 1:
        raise LabkitInputError(f"n must be >= 1, got {n}")
    p = torch.as_tensor(p).double()
    return 0.5 * float(torch.sqrt(2 * p * (1 - p) / (math.pi * n)).sum())


# -- chi-square goodness of fit -----------------------------------------------------------------

def chi2_sf(stat: float, df: int) -> float:
    """P(X >= stat) for X ~ chi-square(df): the regularised upper incomplete gamma Q(df/2, stat/2)."""
    if df < 1:
        raise LabkitInputError(f"chi-square needs df >= 1, got {df}")
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


@dataclass
class ChiSquare:
    stat: float
    df: int
    pvalue: float
    bins: int

    def rejects(self, alpha: float) -> bool:
        return self.pvalue < alpha

    def __str__(self) -> str:
        pv = "< 1e-300" if self.pvalue == 0.0 else f"= {self.pvalue:.3g}"
        return f"chi-square {self.stat:.1f} on {self.df} df, p-value {pv}"


def _pooled_bins(counts: torch.Tensor, expected: torch.Tensor, min_expected: float):
    """(observed, expected) lists with every category expected below `min_expected` pooled into one
    bin, and that bin merged into the smallest other one if it is still too small."""
    big = expected >= min_expected
    obs, exp = counts[big].tolist(), expected[big].tolist()
    pooled_obs, pooled_exp = float(counts[~big].sum()), float(expected[~big].sum())
    if pooled_exp > 0 or pooled_obs > 0:
        if pooled_exp >= min_expected or not exp:
            obs.append(pooled_obs)
            exp.append(pooled_exp)
        else:
            i = min(range(len(exp)), key=exp.__getitem__)
            obs[i] += pooled_obs
            exp[i] += pooled_exp
    return obs, exp


def chi_square(tokens: torch.Tensor, p: torch.Tensor, min_expected: float = 5.0) -> ChiSquare:
    """Goodness of fit of the tokens to p (Pearson's statistic; rare categories pooled).

    A token that p gives probability 0 rejects p outright (statistic inf, p-value 0), even where
    pooling would have hidden it in a bin with others.
    """
    p = torch.as_tensor(p).double()
    p = p / p.sum()
    counts = counts_of(tokens, p.numel())
    obs, exp = _pooled_bins(counts, float(counts.sum()) * p, min_expected)
    if len(exp) < 2:
        raise LabkitInputError("chi-square needs at least two bins; draw more samples")
    df = len(exp) - 1
    if float(counts[p == 0].sum()) > 0:
        return ChiSquare(math.inf, df, 0.0, len(exp))
    stat = sum(((o - e) ** 2 / e for o, e in zip(obs, exp, strict=True) if e > 0), 0.0)
    return ChiSquare(stat, df, chi2_sf(stat, df) if math.isfinite(stat) else 0.0, len(exp))


# -- convergence --------------------------------------------------------------------------------

def tv_curve(tokens: torch.Tensor, p: torch.Tensor, ns: Sequence[int]) -> list[tuple[int, float]]:
    """TV of the first n samples to p, for each n (prefixes of one run: the samples are independent)."""
    if not ns or min(ns) < 1:
        raise LabkitInputError(f"ns must be sample counts >= 1, got {list(ns)}")
    if max(ns) > tokens.numel():
        raise LabkitInputError(f"asked for n={max(ns)} but only {tokens.numel()} samples were drawn")
    return [(n, total_variation(counts_of(tokens[:n], p.numel()), p)) for n in ns]


def loglog_slope(curve: Sequence[tuple[int, float]]) -> float:
    """Least-squares slope of log TV against log n (-0.5 for exact sampling)."""
    if len({n for n, _ in curve}) < 2:
        raise LabkitInputError("a slope needs points at two or more distinct n")
    xs = [math.log(n) for n, _ in curve]
    ys = [math.log(max(t, 1e-12)) for _, t in curve]  # a TV of exactly 0 would be log(0)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
