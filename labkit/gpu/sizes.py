"""The sizes and shapes each section of a GPU run measures at, in one place.

The sections (:mod:`labkit.gpu.sections`) run at these; the GPU record keeps them in each section's
data, and :mod:`labkit.gpu.measured_with` compares the two, so a size changed here marks the
sections measured at the old one. Plain numbers: importing this module needs no GPU and no Triton.
"""

from __future__ import annotations

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # the kernel section's batch sizes
VOCABS = (32000, 128256, 151936)  # ... and vocabularies (every pair is measured)
COMPILE_ROWS = (1, 8, 64, 256, 512)  # the rows at which torch.compile is timed too
NATURAL_ROWS = (256, 512)  # torch_natural's rows, at REAL_VOCAB
REAL_VOCAB = 151936
SWEEP_CONFIGS = ((512, 1), (1024, 2), (1024, 4), (2048, 2), (2048, 4), (4096, 4), (4096, 8), (8192, 16))  # block, warps
SWEEP_SHAPES = ((256, 151936), (512, 151936), (512, 128256), (256, 128256), (128, 151936), (64, 151936))
TOY_CAPTURE_SIZES = (1, 2, 4, 8, 16, 32, 64)  # the toy drafter's graphs (graphs, staircase_toy)
KERNEL_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # staircase_kernel's graph sizes, at REAL_VOCAB
DRAFT_CHECK_ROWS = (1, 8, 32, 64)  # draft_checks' batch sizes
PEER_SHAPES = ((64, 128256), (64, 151936), (256, 128256), (256, 151936), (512, 128256), (512, 151936))
