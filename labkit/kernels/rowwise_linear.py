"""A linear layer whose row i depends on input row i only, bit for bit, on the GPU.

Eager runs compute num_reqs rows and padded graphs num_reqs_padded rows; "graph-fixed must match
eager token for token" holds only if a row's logits do not depend on the batch around it. cuBLAS
picks different kernels (and reduction orders) for different batch counts, so on CUDA the toy
models use this kernel: one program per (row, block of outputs), reducing over K in a fixed order
that nothing about the batch can change. (On the CPU the models get the same property from a
per-row `bmm`; see labkit/models.py.)
"""

from __future__ import annotations

import torch

from labkit import backends
from labkit.kernels.triton_import import tl, triton


@triton.jit
def rowwise_linear_kernel(x_ptr, w_ptr, b_ptr, out_ptr, K, N, stride_x, stride_o,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    n_offs = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_offs = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + row * stride_x + k_offs, mask=k_offs < K, other=0.0)
        w = tl.load(w_ptr + n_offs[:, None] * K + k_offs[None, :],
                    mask=(n_offs[:, None] < N) & (k_offs[None, :] < K), other=0.0)
        acc += tl.sum(w * x[None, :], axis=1)
    acc += tl.load(b_ptr + n_offs, mask=n_offs < N, other=0.0)
    tl.store(out_ptr + row * stride_o + n_offs, acc, mask=n_offs < N)


def available_for(x: torch.Tensor) -> bool:
    """True where this kernel runs compiled: a CUDA tensor and compiled (not interpreted) Triton."""
    return x.is_cuda and backends.HAS_TRITON and not backends.KERNELS_INTERPRETED


def rowwise_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T + bias`` with each row computed independently of the others (CUDA only)."""
    x = x.contiguous()
    weight = weight.contiguous()
    batch, K = x.shape
    N = weight.shape[0]
    out = torch.empty(batch, N, device=x.device, dtype=torch.float32)
    if batch:
        rowwise_linear_kernel[(batch, triton.cdiv(N, 64))](x, weight, bias, out, K, N, x.stride(0),
                                                           out.stride(0), BLOCK_N=64, BLOCK_K=64)
    return out
