"""What an exercise cell needs to define a kernel: ``triton``, ``tl``, ``row_key``, ``uniform``.

Looked up on first use (so importing the checkers imports no Triton). Where Triton is missing
(macOS, Windows) they are stand-ins: ``@triton.jit`` leaves the function as it is, so the
exercise cells still *define* their kernels, and the checkers then ask for the torch version.
The torch version's noise helpers are ``row_key_torch`` and ``gumbel_torch``.
"""

from __future__ import annotations

import types

import torch

from labkit import backends

NAMES = ("triton", "tl", "row_key", "uniform", "row_key_torch", "gumbel_torch")


def _jit_stand_in(fn=None, **_options):
    return fn if fn is not None else (lambda f: f)


def _unavailable(*_args, **_kwargs):
    raise RuntimeError("Triton is not installed on this machine: use the torch version of the exercise "
                       "(row_key_torch and gumbel_torch)")


def kernel_names() -> dict:
    """The names, real where Triton is installed, stand-ins elsewhere."""
    from labkit.kernels.noise import gumbel_torch, row_key_torch

    names = dict(row_key_torch=row_key_torch, gumbel_torch=gumbel_torch)
    if backends.HAS_TRITON:
        import triton
        import triton.language as tl

        from labkit.kernels.noise import row_key, uniform

        return dict(names, triton=triton, tl=tl, row_key=row_key, uniform=uniform)
    triton = types.SimpleNamespace(jit=_jit_stand_in, next_power_of_2=lambda n: 1 << max(0, (n - 1).bit_length()))
    # torch dtypes, so the torch version of an answer (slot.to(tl.int64) on a tensor) runs unchanged.
    tl = types.SimpleNamespace(constexpr=int, int64=torch.int64, int32=torch.int32, uint32=torch.uint32,
                               float32=torch.float32)
    return dict(names, triton=triton, tl=tl, row_key=_unavailable, uniform=_unavailable)
