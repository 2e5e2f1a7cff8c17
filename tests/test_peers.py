"""The peers benchmark's CPU side: the check every peer passes before it is timed, the skip reasons a
missing peer gets, the ratios the appendix prints, and the parsing of Nsight Compute's counts.
(The timings themselves run on a GPU: ``python -m labkit.gpu --sections peers``.)"""

from __future__ import annotations

import pytest
import torch

from labkit.gpu import flashinfer_peer, no_q_profile, peer_checks, peers
from labkit.kernels.gumbel import gumbel_sample
from labkit.kernels.sampling_state import SamplingState

SMALL = {"rows": 1 << 14}  # still rejects a wrong sampler by far: see the margins asserted below


def kit_torch(logits, temperature, seeds, positions, store_q=True):
    rows, vocab = logits.shape
    q = torch.empty(rows, 2, vocab) if store_q else None
    state = SamplingState(torch.arange(rows, dtype=torch.int32), temperature, seeds, positions, q)
    return gumbel_sample(logits, state, draft_step=1, backend="torch")


def test_the_kits_sampler_passes_the_check_with_and_without_q():
    for store_q in (True, False):
        result = peer_checks.check_peer(lambda *a, s=store_q: kit_torch(*a, store_q=s), **SMALL)
        assert result["ok"], result
        assert result["chi_square"]["p_value"] > peer_checks.REJECT_BELOW


@pytest.mark.parametrize("wrong", ["argmax", "no temperature", "one seed for all rows", "out of range"])
def test_a_sampler_that_is_not_one_fails_the_check_and_says_why(wrong):
    def sample(logits, temperature, seeds, positions):
        if wrong == "argmax":
            return logits.argmax(dim=-1)
        if wrong == "no temperature":
            return kit_torch(logits, torch.ones_like(temperature), seeds, positions)
        if wrong == "one seed for all rows":
            return kit_torch(logits, temperature, torch.zeros_like(seeds), torch.zeros_like(positions))
        return kit_torch(logits, temperature, seeds, positions) + logits.shape[1]

    result = peer_checks.check_peer(sample, **SMALL)
    assert not result["ok"]
    assert ("outside [0," in result["why"]) if wrong == "out of range" else ("softmax(logits / T)" in result["why"])


def test_a_missing_vllm_is_skipped_by_name_with_where_to_point(monkeypatch, tmp_path):
    monkeypatch.setenv(peers.VLLM_ENV, str(tmp_path))  # a folder without vllm/ in it
    module, api, why = peers.vllm_peer(log=lambda *_: None)
    assert module is None and api is None
    assert peers.VLLM_ENV in why


def test_a_missing_flashinfer_is_skipped_with_the_reason(monkeypatch, tmp_path):
    try:
        import flashinfer  # noqa: F401
        pytest.skip("flashinfer is installed here: the skip path is not taken")
    except ImportError:
        pass
    monkeypatch.delenv(flashinfer_peer.INCLUDE_ENV, raising=False)
    sample, why = flashinfer_peer.flashinfer_sampler(log=lambda *_: None)
    assert sample is None and flashinfer_peer.INCLUDE_ENV in why and "is not set" in why
    monkeypatch.setenv(flashinfer_peer.INCLUDE_ENV, str(tmp_path))
    sample, why = flashinfer_peer.flashinfer_sampler(log=lambda *_: None)
    assert sample is None and "holds no flashinfer/sampling.cuh" in why


def test_ratios_are_taken_within_one_run_and_leave_absent_peers_out():
    ms = {"kit_q": 0.10, "vllm_q": 0.25, "kit_no_q": 0.08, "read_only": 0.05, "copy": 0.09}
    ratios = peers.peer_ratios(ms)
    assert ratios["kit_q_over_vllm_q"] == pytest.approx(0.4)
    assert ratios["kit_no_q_of_read_only"] == pytest.approx(0.625)
    assert ratios["kit_q_of_copy"] == pytest.approx(0.9)
    assert "kit_no_q_over_flashinfer" not in ratios and "vllm_no_q_of_read_only" not in ratios


def test_ncu_counts_become_instructions_per_element_and_the_issue_limit():
    header = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
    rows = [("smsp__inst_executed.sum", "inst", "1,000,000"), ("sm__cycles_elapsed.avg.per_second", "Hz", "2e9"),
            ("gpu__time_duration.sum", "ns", "20000"), ("sm__inst_executed_pipe_fma.sum", "inst", "250000")]
    text = "==PROF== noise\n" + header + "\n" + "\n".join(
        f'"0","gumbel_sample_kernel(...)","{m}","{u}","{v}"' for m, u, v in rows) + '\n"1","other","x","","1"\n'
    metrics = no_q_profile.parse_ncu_csv(text)
    assert metrics["smsp__inst_executed.sum"] == 1e6 and "x" not in metrics
    b = no_q_profile.bound(metrics, rows=10, vocab=1000, sms=100)
    assert b["lane_instructions_per_element"] == pytest.approx(32 * 1e6 / 1e4)
    assert b["fma_pipe_per_element"] == pytest.approx(32 * 2.5e5 / 1e4)
    assert b["issue_limit_s"] == pytest.approx(1e6 / (4 * 100 * 2e9))
    assert b["issue_limit_share"] == pytest.approx(b["issue_limit_s"] / 20e-6)
