"""The peers benchmark's CPU side: the check every peer passes before it is timed, the skip reasons a
missing peer gets, the ratios the appendix prints, and the parsing of Nsight Compute's counts.
(The timings themselves run on a GPU: ``python -m labkit gpu --sections peers``.)"""

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


def test_notebook_08_prints_the_peer_lines_the_record_gives_now():
    """Notebook 08's stored output of its peers cell is peer_lines(record) and no_q_ceiling(record) of the
    record the kit ships: a re-measured record fails here until the notebook is executed again."""
    import nbformat

    from labkit.viz.gpu_records import load_record, no_q_ceiling, peer_lines

    record = load_record()
    nb = nbformat.read("notebooks/08_appendix_kernel_engineering.ipynb", as_version=4)

    def printed(marker: str) -> str:
        cell = next(c for c in nb.cells if c.cell_type == "code" and marker in c.source)
        return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")

    lines = peer_lines(record)
    assert lines and printed("peer_lines(record)").splitlines() == lines
    # The prose's one number is the check's draw count.
    prose = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert f"{peer_checks.CHECK_ROWS:,} independent draws" in prose
    ceiling = printed("no_q_ceiling(record)")
    for c in no_q_ceiling(record):
        assert f"{c['rows']} x {c['vocab']}: the kit without q reaches {c['reached']:.2f}" in ceiling
        assert f"at most {c['ceiling_at_full_issue']:.2f}" in ceiling


def test_the_comparisons_name_only_shapes_where_both_calls_were_timed():
    from labkit.viz.gpu_records import peer_comparisons, peers_skipped

    sizes = [{"rows": 64, "vocab": 151936, "ratios": {"kit_q_over_vllm_q": 0.5}},
             {"rows": 512, "vocab": 151936, "ratios": {"kit_q_over_vllm_q": 0.4, "kit_no_q_of_read_only": 0.6}}]
    record = {"peers": {"sizes": sizes, "skipped": {"flashinfer": "no headers"}}}
    found = {c["key"]: c for c in peer_comparisons(record)}
    assert found["kit_q_over_vllm_q"]["low"] == 0.4 and found["kit_q_over_vllm_q"]["high"] == 0.5
    assert found["kit_q_over_vllm_q"]["shapes_text"] == "64-512 rows x 151936"
    assert found["kit_no_q_of_read_only"]["shapes_text"] == "512 rows x 151936"
    assert peers_skipped(record) == {"flashinfer": "no headers"}
    assert peer_comparisons({"peers": {"error": "RuntimeError: ..."}}) == [] and peer_comparisons(None) == []
