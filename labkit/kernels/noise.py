"""Counter-based random numbers keyed by (seed, position, vocab index, salt).

Why counter-based: a request must draw the same noise for the same position whether it runs in
row 2 of an eager batch of 3 or in row 5 of a padded graph batch of 8, so the noise may depend on
the request's seed and the token position only, never on the row or on a stream's state.

Why a salt: the draft sampler, the acceptance test, the residual resampling and the bonus token
each need independent noise for the same (seed, position); sharing one vector biases the output
(vLLM #54282 is that bug). Each consumer passes its own salt.

The generator is a 32-bit integer hash (the "lowbias32" xor-shift-multiply finaliser) applied to a
per-row key mixed with the vocab index. It is written twice, bit for bit the same: in torch
(int64 arithmetic masked to 32 bits) and as Triton device functions (uint32 arithmetic). One hash
per element is far cheaper than a Philox call, which is what lets the sampling kernel run near
memory bandwidth on a GPU.
"""

from __future__ import annotations

import numpy as np
import torch

from labkit.interpreter import interpret_helper_as
from labkit.kernels.triton_import import tl, triton

MIX_MUL_1 = 0x7FEB352D
MIX_MUL_2 = 0x846CA68B
GOLDEN = 0x9E3779B9
MASK32 = 0xFFFFFFFF
INV_2_24 = 1.0 / (1 << 24)
# The largest float32 below 1. (m + 0.5) / 2**24 is not exact in float32 for m >= 2**23 (the
# sum needs 25 bits), and for m = 2**24 - 1 it rounds to exactly 1.0: -log(-log(1)) = +inf, a
# token forced regardless of its logit, once in 2**24 draws (about 1 row in 110 at a vocabulary
# of 151936). Clamping maps that one value to the largest uniform below 1 and changes no other.
U_MAX = 1.0 - 2.0**-24

# One salt per consumer of randomness (arbitrary distinct odd constants).
SALT_DRAFT = 0x2545F491
SALT_ACCEPT = 0x5851F42D
SALT_RESIDUAL = 0x1B873593
SALT_BONUS = 0x68E31DA5


def mix32_torch(h: torch.Tensor) -> torch.Tensor:
    """lowbias32 on int64 tensors holding values in [0, 2**32)."""
    h = h ^ (h >> 16)
    h = (h * MIX_MUL_1) & MASK32  # the product may wrap int64; its low 32 bits are still right
    h = h ^ (h >> 15)
    h = (h * MIX_MUL_2) & MASK32
    return h ^ (h >> 16)


def row_key_torch(seed: torch.Tensor, pos: torch.Tensor, salt: int) -> torch.Tensor:
    """Per-row key from int64 seed and position (any shape, broadcast)."""
    seed = seed.to(torch.int64)
    lo = seed & MASK32
    hi = (seed >> 32) & MASK32
    k = mix32_torch(lo ^ salt)
    k = mix32_torch(k ^ hi)
    return mix32_torch(k ^ (pos.to(torch.int64) & MASK32))


def uniform_torch(key: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """float32 uniforms in (0, 1) for each (key, index) pair; 24 random bits, never 0 or 1."""
    h = mix32_torch(key ^ ((index.to(torch.int64) * GOLDEN) & MASK32))
    return (((h >> 8).to(torch.float32) + 0.5) * INV_2_24).clamp(max=U_MAX)


def gumbel_torch(key: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return -torch.log(-torch.log(uniform_torch(key, index)))


# The same generator in Triton, bit for bit. The mixing steps are written out rather than calling
# a `mix32` helper per step: every call of a jitted helper costs the CPU interpreter setup time, which
# once dominated the whole lab's run time (one index_hash call per uniform call is cheap). The compiled
# kernels inline them either way. (The Gumbel transform of these uniforms, at each fast-math level:
# labkit.kernels.fast_math.gumbel.)


@triton.jit
def row_key(seed, pos, salt):
    # seed, pos: int64 scalars; truncating casts keep the low 32 bits, as `& MASK32` does.
    h = seed.to(tl.uint32) ^ salt.to(tl.uint32)
    h = h ^ (h >> 16)
    h = h * 0x7FEB352D
    h = h ^ (h >> 15)
    h = h * 0x846CA68B
    h = h ^ (h >> 16)
    h = h ^ (seed >> 32).to(tl.uint32)
    h = h ^ (h >> 16)
    h = h * 0x7FEB352D
    h = h ^ (h >> 15)
    h = h * 0x846CA68B
    h = h ^ (h >> 16)
    h = h ^ pos.to(tl.uint32)
    h = h ^ (h >> 16)
    h = h * 0x7FEB352D
    h = h ^ (h >> 15)
    h = h * 0x846CA68B
    return h ^ (h >> 16)


@triton.jit
def index_hash(key, index):
    """The 32-bit hash of each element of `index` under `key` (uint32), as uniform_torch hashes it."""
    x = index.to(tl.uint32) * 0x9E3779B9
    # lowbias32 of key ^ x; its first step, h ^ (h >> 16), split over the xor (a shift distributes over
    # it): key ^ (key >> 16) is the program's scalar, so each element pays one three-way xor.
    h = (key ^ (key >> 16)) ^ x ^ (x >> 16)
    h = h * 0x7FEB352D
    h = h ^ (h >> 15)
    h = h * 0x846CA68B
    return h ^ (h >> 16)


@triton.jit
def uniform(key, index):
    """float32 in (0, 1) per element of `index` (a block), bit-identical to uniform_torch."""
    h = index_hash(key, index)
    # u = ((h >> 8) + 0.5) / 2**24, rounded as uniform_torch rounds it, in bit tricks and a multiply-add.
    # m = h >> 8 has 24 bits: its top 23 go into a float's mantissa exactly (the 2**23 trick), and one
    # fused multiply-add puts back the low bit and the 0.5 with a single rounding -- that of
    # float(m) + 0.5, since scaling by a power of two is exact. tests/test_kernels.py checks all 2**24 m.
    # (The compiled sampling kernel goes straight to log(u) instead: fast_math.log_uniform.)
    half_m = ((h >> 9) | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0  # float(m >> 1), exact
    low = tl.where((h & 0x100) != 0, 8.940696716308594e-08, 2.9802322387695312e-08)  # ((m & 1) + 0.5) / 2**24
    u = tl.fma(half_m, 1.1920928955078125e-07, low)  # (2 * half_m) / 2**24 + low
    return tl.minimum(u, 0.99999994039535522)  # U_MAX: see the note there


@triton.jit
def uniform_at_zero(key):
    """uniform(key, 0) for a scalar key, as a scalar (index 0 leaves the key unchanged)."""
    return tl.sum(uniform(key, tl.zeros([1], tl.int32)), axis=0)


# In Triton's CPU interpreter the two helpers a kernel calls run as the torch references above, the
# same bits (each Triton operation costs the interpreter tens of microseconds, and these hashes are a
# dozen operations a call): labkit.interpreter.interpret_helper_as. Compiled kernels run the source.

def _row_key_twin(seed, pos, salt):
    if seed.dtype != np.int64:  # the source's seed >> 32 is a 64-bit shift
        return None
    salt = torch.from_numpy(salt.astype(np.int64)) & MASK32  # salt.to(tl.uint32)
    key = row_key_torch(torch.from_numpy(seed), torch.from_numpy(pos.astype(np.int64)), salt)
    return key.numpy().astype(np.uint32), tl.uint32


def _uniform_twin(key, index):
    if key.dtype != np.uint32:
        return None
    u = uniform_torch(torch.from_numpy(key.astype(np.int64)), torch.from_numpy(index.astype(np.int64)))
    return u.numpy(), tl.float32


interpret_helper_as(row_key, _row_key_twin)
interpret_helper_as(uniform, _uniform_twin)
