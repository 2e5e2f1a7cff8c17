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
