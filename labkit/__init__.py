"""labkit: a hands-on lab for vLLM PR #47066, stale idx_mapping rows under padded CUDA graphs."""

from labkit.backends import backend, default_device, describe, set_backend  # noqa: F401  (first: sets TRITON_INTERPRET)

__version__ = "0.1.0"
