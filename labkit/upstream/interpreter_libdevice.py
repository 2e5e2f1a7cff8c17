"""libdevice for Triton's CPU interpreter, which has none: the functions vLLM's sampling kernel calls.

Under the interpreter every ``triton.language.extra.libdevice`` function returns None, so a kernel
that calls ``tldevice.log1p`` fails there. :func:`with_fallbacks` hands the loaded kernel file an
object that forwards to the real libdevice except for the functions below, written with the
interpreter's own ``tl`` math. Compiled kernels get the real libdevice (see ``loader._libdevice``).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def log1p(x):
    # log(1 + x): loses the last bits for tiny x, which moves Gumbel noise, never an address
    return tl.log(1.0 + x)


class _Fallbacks:
    def __init__(self, libdevice):
        self._libdevice = libdevice
        self.log1p = log1p

    def __getattr__(self, name):
        return getattr(self._libdevice, name)


def with_fallbacks(libdevice) -> _Fallbacks:
    return _Fallbacks(libdevice)
