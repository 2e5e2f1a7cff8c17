"""The distribution proof: the fixed path emits p, the buggy path provably does not.

Every sample is keyed by a fixed seed, so these statistical tests are deterministic: they pass or
fail the same way on every run.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.errors import LabkitInputError
from labkit.proofs.distribution import (
    DEFAULT_N,
    backends_agree,
    emitted_distribution,
    kernel_backend,
    make_setup,
    run_proof,
    sample_first_tokens,
    speedup_check,
    tokens_per_step_theory,
)
from labkit.proofs.stats import expected_tv, total_variation


@pytest.fixture(scope="module")
def proof(models):
    return run_proof(models, n=DEFAULT_N, ns=(1024, 4096, DEFAULT_N))


def test_buggy_path_is_rejected_and_plateaus_at_the_exact_buggy_distribution(proof):
    assert proof.buggy.corrupted_slots == proof.buggy.n  # every live q was overwritten by a padded row
    assert proof.chi_buggy.pvalue < 1e-6
    tvs = [t for _, t in proof.tv_buggy]
    # It converges -- to the wrong distribution, computed exactly from p, q and the stale q.
    assert abs(tvs[-1] - proof.setup.tv_buggy) < 4 * expected_tv(proof.setup.p_buggy, proof.buggy.n)
    assert min(tvs) > 0.25


def test_fixed_path_converges_to_p_like_one_over_sqrt_n(proof):
    assert proof.fixed.corrupted_slots == 0
    assert not proof.chi_fixed.rejects(1e-4)
    (n1, tv1), _, (n16, tv16) = proof.tv_fixed
    assert n16 == 16 * n1
    # Exact sampling: TV ~ 1/sqrt(N), so 16x the samples give about a quarter of the distance.
    assert 2.0 < tv1 / tv16 < 8.0
    for n, t in proof.tv_fixed:
        assert t < 2.5 * expected_tv(proof.setup.p, n)


def test_acceptance_of_the_speculator_path_matches_theory(proof):
    se = math.sqrt(0.25 / proof.fixed.n)
    assert abs(proof.fixed.acceptance - proof.setup.acceptance_fixed) < 4 * se
    assert abs(proof.buggy.acceptance - proof.setup.acceptance_buggy) < 4 * se + 1e-3


def test_a_request_draws_the_same_tokens_whatever_n(models, proof):
    small = sample_first_tokens(proof.setup, 16, buggy=True, models=models)
    assert torch.equal(small.tokens, proof.buggy.tokens[:16])
    assert small.corrupted_slots == 16 and (small.backend, small.device) == ("torch", proof.buggy.device)


def test_the_samples_do_not_depend_on_the_thread_count(models, proof):
    before = torch.get_num_threads()
    try:
        runs = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            runs.append([sample_first_tokens(proof.setup, 64, buggy=b, models=models) for b in (False, True)])
    finally:
        torch.set_num_threads(before)
    for one, two in zip(*runs, strict=True):
        assert torch.equal(one.tokens, two.tokens) and torch.equal(one.num_accepted, two.num_accepted)
    assert torch.equal(runs[0][1].tokens, proof.buggy.tokens[:64])


@pytest.mark.skipif(kernel_backend() is None, reason="no Triton kernel can be launched here")
def test_the_triton_kernels_draw_the_same_tokens_as_the_torch_backend(models, proof):
    agree = backends_agree(proof.setup, 12, models=models)
    assert agree["fixed"]
    if kernel_backend() == "interpreter":
        # In the interpreter the colliding stores land in grid order, as in the torch reference; on
        # a GPU they race, so only the fixed path is sure to agree there.
        assert agree["buggy"]


@pytest.mark.parametrize("buggy", [False, True])
def test_tokens_per_step_follow_one_minus_a_to_the_k_plus_one(proof, buggy):
    for row in speedup_check(proof.setup, ks=(1, 3), n=2048, buggy=buggy):
        a = row.acceptance_theory
        assert abs(row.acceptance_measured - a) < 0.04
        # tokens per step has a standard deviation of at most k / 2 + 1 per request
        assert abs(row.tokens_per_step - tokens_per_step_theory(a, row.k)) < 4 * (row.k / 2 + 1) / math.sqrt(row.n)
    assert tokens_per_step_theory(0.5, 3) == pytest.approx(1.875)
    assert tokens_per_step_theory(1.0, 3) == 4.0


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.lists(st.floats(0.01, 5.0), min_size=2, max_size=8).flatmap(
    lambda w: st.tuples(st.just(w), st.lists(st.floats(0.01, 5.0), min_size=len(w), max_size=len(w)),
                        st.lists(st.floats(0.01, 5.0), min_size=len(w), max_size=len(w)))))
def test_emitted_distribution_is_p_exactly_when_q_is_right(weights):
    p, q, q_wrong = (torch.tensor(w, dtype=torch.float64) for w in weights)
    p, q, q_wrong = p / p.sum(), q / q.sum(), q_wrong / q_wrong.sum()
    assert torch.allclose(emitted_distribution(p, q, q), p, atol=1e-12)
    wrong = emitted_distribution(p, q, q_wrong)
    assert float(wrong.sum()) == pytest.approx(1.0) and float(wrong.min()) >= 0
    assert total_variation(wrong, p) <= 1 and total_variation(emitted_distribution(p, q, q), p) < 1e-12


def test_setup_checks_temperature(models):
    with pytest.raises(LabkitInputError, match="temperature > 0"):
        make_setup(models, temperature=0.0)
