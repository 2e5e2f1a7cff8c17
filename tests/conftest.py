"""Shared fixtures and markers; tests marked `gpu` are skipped without CUDA (notebook cells tagged
`gpu` are skipped by notebooks/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from labkit import backends

HAS_CUDA = torch.cuda.is_available()
SESSION_DEVICE = backends.default_device()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line("markers", "slow: runs the engine over many requests (seconds to a minute)")


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def models():
    """The toy models on the device the kit's kernels run on (the GPU under compiled Triton), fixed
    when the session starts so a test that switches backends meanwhile does not move them."""
    from labkit.models import load_toy_models

    return load_toy_models(SESSION_DEVICE)


# -- inputs the figure tests share (test_plots, test_timing_plots, test_proof_plots, test_figure_legibility) --

@pytest.fixture(scope="session")
def buggy():
    """docs/MECHANICS.md's timeline before the fix: at launch 1 padded row 7 holds stale slot 7, live again."""
    from labkit.bench.runs import timeline_run
    from labkit.bench.scenario import TIMELINE

    return timeline_run(config=TIMELINE.before_fix())


@pytest.fixture(scope="session")
def fixed():
    """The same timeline with the PR's fix."""
    from labkit.bench.runs import timeline_run
    from labkit.bench.scenario import TIMELINE

    return timeline_run(config=TIMELINE.with_pr_fix())


@pytest.fixture(scope="session")
def record():
    """The newest GPU record the kit ships (the timing figures are drawn from it on any machine)."""
    from labkit.viz import gpu_records

    rec = gpu_records.load_record()
    assert rec is not None, "the kit ships a GPU record in labkit/data/gpu/"
    return rec


def _race_entry(vocab, block_v, launches, rng):
    blocks = -(-vocab // block_v)
    owner = rng.integers(0, 2, size=(launches, blocks))
    shares = owner.mean(axis=1)
    return {"vocab": vocab, "block_v": block_v, "launches": launches, "rows": [6, 7],
            "padded_share_per_launch": shares.tolist(), "padded_wins_per_block": owner.sum(axis=0).tolist(),
            "example_owner": owner[0].tolist(),
            "whole_launch_wins": {"padded": int((shares == 1).sum()), "live": int((shares == 0).sum())}}


@pytest.fixture(scope="session")
def race_record():
    """A made-up record with the race's per-block winners at a real and at the toy vocabulary."""
    import numpy as np

    rng = np.random.default_rng(0)
    return {"provenance": {"device": "test GPU", "date": "2026-01-02"},
            "race_blocks": {"vocab_151936": _race_entry(151936, 4096, 50, rng),
                            "vocab_30": _race_entry(30, 4096, 40, rng)}}


@pytest.fixture(scope="session")
def small_proof(models):
    """The distribution proof at N = 1024: enough for its figures, fast."""
    from labkit.proofs.distribution import run_proof

    return run_proof(models, n=1024, ns=(64, 256, 1024))


@pytest.fixture(scope="session")
def small_bench():
    """A bench result of three modes: the reference, one with corrupted responses, one refused."""
    from labkit.bench.repro import BenchConfig, BenchResult, ModeResult

    modes = {"eager": ModeResult("eager", "eager", 10, 10, 0, 0.5, 0.3, 1, 0.9),
             "graph-buggy": ModeResult("graph-buggy", "eager", 10, 6, 4, 0.6, 0.5, 1, 0.9),
             "graph-host-only": ModeResult("graph-host-only", "eager", error="refused")}
    return BenchResult(BenchConfig(prompts=10), modes, {}, [], 1.0)
