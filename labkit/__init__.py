"""labkit: a hands-on lab for vLLM PR #47066, stale idx_mapping rows under padded CUDA graphs."""

# labkit.backends comes first: it sets TRITON_INTERPRET before anything imports triton.
from labkit.backends import backend, default_device, describe, set_backend

__all__ = ["__version__", "backend", "default_device", "describe", "set_backend"]

# The one place the version is written; pyproject.toml reads it ([tool.setuptools.dynamic]).
__version__ = "0.1.0"
