"""The statistics of the proofs: histograms, total variation, chi-square, convergence slopes."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.errors import LabkitInputError
from labkit.proofs.stats import (
    chi2_sf,
    chi_square,
    counts_of,
    empirical,
    expected_tv,
    loglog_slope,
    total_variation,
    tv_curve,
)


def test_counts_and_empirical_distribution():
    tokens = torch.tensor([[2, 0], [2, 2]])
    assert counts_of(tokens, 4).tolist() == [1.0, 0.0, 3.0, 0.0]
    assert empirical(tokens, 4).tolist() == [0.25, 0.0, 0.75, 0.0]
    assert counts_of(tokens, 4).dtype == torch.float64


@pytest.mark.parametrize("tokens, vocab, words", [
    (torch.tensor([0, 4]), 4, r"\[0, vocab=4\)"),
    (torch.tensor([-1]), 4, r"\[0, vocab=4\)"),
    (torch.tensor([0.5]), 4, "integer tensor"),
    (torch.tensor([0]), 0, "vocab must be >= 1"),
])
def test_counts_reject_bad_tokens(tokens, vocab, words):
    with pytest.raises(LabkitInputError, match=words):
        counts_of(tokens, vocab)


def test_empirical_needs_a_sample():
    with pytest.raises(LabkitInputError, match="at least one sample"):
        empirical(torch.tensor([], dtype=torch.int64), 3)


def test_total_variation_of_distributions_and_of_counts():
    p = torch.tensor([0.5, 0.5, 0.0])
    q = torch.tensor([0.0, 0.5, 0.5])
    assert total_variation(p, q) == pytest.approx(0.5)
    assert total_variation(p, p) == 0.0
    # Counts are normalised first: 30 of 60 and 30 of 60 is p itself.
    assert total_variation(torch.tensor([30.0, 30.0, 0.0]), p) == 0.0
    assert total_variation(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) == 1.0


@pytest.mark.parametrize("a, b, words", [
    (torch.ones(3), torch.ones(4), "same shape"),
    (torch.tensor([1.0, -0.5]), torch.ones(2), "a must be non-negative"),
    (torch.ones(2), torch.zeros(2), "b must be non-negative weights with a positive sum"),
])
def test_total_variation_rejects_what_is_not_a_distribution(a, b, words):
    with pytest.raises(LabkitInputError, match=words):
        total_variation(a, b)


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(st.lists(st.floats(0.0, 5.0), min_size=2, max_size=8).filter(lambda w: sum(w) > 0.01).flatmap(
    lambda w: st.tuples(st.just(w), st.lists(st.floats(0.0, 5.0), min_size=len(w), max_size=len(w))
                        .filter(lambda v: sum(v) > 0.01))))
def test_total_variation_is_a_symmetric_distance_in_0_1(weights):
    a, b = (torch.tensor(w, dtype=torch.float64) for w in weights)
    d = total_variation(a, b)
    assert 0.0 <= d <= 1.0 + 1e-12
    assert d == pytest.approx(total_variation(b, a), abs=1e-12)
    assert total_variation(a, a * 3.0) == pytest.approx(0.0, abs=1e-12)


def test_expected_tv_matches_simulated_exact_sampling():
    # The leading-order formula against the mean TV of 200 simulated runs of N = 2000 draws.
    p = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    n = 2000
    g = torch.Generator().manual_seed(0)
    tvs = [total_variation(counts_of(torch.multinomial(p, n, replacement=True, generator=g), 4), p)
           for _ in range(200)]
    assert sum(tvs) / len(tvs) == pytest.approx(expected_tv(p, n), rel=0.1)
    assert expected_tv(p, 4 * n) == pytest.approx(expected_tv(p, n) / 2)


def test_chi_square_survival_function_matches_tables():
    # Textbook critical values: P(X >= x) = 0.05 and 0.001.
    assert chi2_sf(3.841459, 1) == pytest.approx(0.05, rel=1e-5)
    assert chi2_sf(18.307038, 10) == pytest.approx(0.05, rel=1e-5)
    assert chi2_sf(29.588298, 10) == pytest.approx(0.001, rel=1e-4)
    assert chi2_sf(0.0, 4) == 1.0
    with pytest.raises(LabkitInputError, match="df >= 1"):
        chi2_sf(1.0, 0)


def test_chi_square_pools_rare_categories():
    p = torch.tensor([0.5, 0.3, 0.199, 0.001])
    tokens = torch.tensor([0] * 50 + [1] * 30 + [2] * 20)
    result = chi_square(tokens, p)
    assert result.bins == 3 and result.df == 2  # the 0.001 category (expected 0.1) was pooled
    assert result.pvalue > 0.9 and not result.rejects(1e-4)
    assert str(result).startswith("chi-square 0.0 on 2 df, p-value")


def test_chi_square_rejects_a_wrong_distribution_and_a_token_p_forbids():
    p = torch.tensor([0.5, 0.5, 0.0])
    skewed = chi_square(torch.tensor([0] * 90 + [1] * 10), p)
    assert skewed.rejects(1e-6)
    impossible = chi_square(torch.tensor([0] * 50 + [1] * 49 + [2]), p)
    assert impossible.stat == math.inf and impossible.pvalue == 0.0 and "< 1e-300" in str(impossible)


def test_tv_curve_and_its_slope():
    p = torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    tokens = torch.multinomial(p, 65536, replacement=True, generator=g)
    curve = tv_curve(tokens, p, (256, 1024, 4096, 16384, 65536))
    assert [n for n, _ in curve] == [256, 1024, 4096, 16384, 65536]
    assert -0.8 < loglog_slope(curve) < -0.3  # exact sampling: -1/2
    assert loglog_slope([(10, 1.0), (100, 0.1), (1000, 0.01)]) == pytest.approx(-1.0)
    with pytest.raises(LabkitInputError, match="only 65536 samples"):
        tv_curve(tokens, p, (100_000,))
    with pytest.raises(LabkitInputError, match="two or more distinct n"):
        loglog_slope([(10, 0.1)])
