"""The two sibling bugs of notebook 05, computed with numbers: int32 offsets wrap, shared noise biases."""

from __future__ import annotations

import torch

from labkit.proofs.siblings import (
    INT32_MAX,
    first_overflowing_index,
    format_offsets,
    offset_rows,
    shared_noise_effect,
    speculative_outputs,
)
from labkit.proofs.stats import empirical, expected_tv, total_variation


def test_int32_offsets_wrap_exactly_at_the_first_overflowing_index():
    stride = 4 * 151936
    first = first_overflowing_index(stride)
    ok, bad = offset_rows([first - 1, first], stride)
    assert not ok.wrapped and ok.exact <= INT32_MAX < bad.exact
    assert bad.wrapped and bad.int32 < 0 and bad.int32 == bad.exact - 2**32
    table = format_offsets([ok, bad])
    assert "inside the buffer" in table and "BEFORE the buffer's start" in table


def test_shared_noise_biases_the_output_and_separate_salts_do_not():
    p = torch.tensor([0.1, 0.45, 0.45], dtype=torch.float64)
    q = torch.tensor([0.8, 0.19, 0.01], dtype=torch.float64)
    n = 40_000
    effect = shared_noise_effect(p, q, n)
    assert effect.sampling_noise == expected_tv(p, n)
    assert effect.tv_own_salt < 4 * effect.sampling_noise
    assert effect.tv_shared > 10 * effect.sampling_noise
    # The same numbers as computing it by hand from the tokens.
    by_hand = empirical(speculative_outputs(p, q, n, shared_noise=True), 3)
    assert torch.equal(effect.shared, by_hand) and effect.tv_shared == total_variation(by_hand, p)
