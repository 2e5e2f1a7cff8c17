"""``triton`` and ``triton.language`` for the kernel modules, or stand-ins where Triton is missing.

The kernel modules define their kernels at top level, so that each file opens with the kernel a
learner reads. Without Triton (macOS, Windows) the stand-in ``@triton.jit`` keeps the function
as it was written, under ``.fn`` as Triton's own ``JITFunction`` does: the kernels still exist,
their source can still be shown, and launching one says what to use instead. The torch backend
never launches them (see :mod:`labkit.backends`).

Imported only after :mod:`labkit.backends` has fixed ``TRITON_INTERPRET``: Triton decides at
decoration time whether a kernel is compiled or interpreted.
"""

from __future__ import annotations

from labkit import backends, interpreter

__all__ = ["tl", "triton"]


class KernelWithoutTriton:
    """What ``@triton.jit`` leaves where Triton is missing: the function, and a clear error on launch."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def _refuse(self, *_args, **_kwargs):
        raise RuntimeError(f"{self.__name__} is a Triton kernel and Triton is not installed here; "
                           "the 'torch' backend runs its torch reference")

    __getitem__ = __call__ = _refuse


class _NoTriton:
    """The two names of ``triton`` a kernel module uses outside its kernels, without Triton."""

    @staticmethod
    def jit(fn=None, **_options):
        return KernelWithoutTriton(fn) if fn is not None else KernelWithoutTriton

    @staticmethod
    def cdiv(a: int, b: int) -> int:
        return -(-a // b)


class _NoTritonLanguage:
    """``tl`` without Triton: kernel bodies never run, so any use of it is a mistake worth naming."""

    def __getattr__(self, name):
        raise RuntimeError(f"triton.language.{name} is needed and Triton is not installed here")


if backends.HAS_TRITON:
    import triton
    import triton.language as tl

    if backends.KERNELS_INTERPRETED:
        interpreter.speed_up()  # the same bits, several times faster (labkit.interpreter says how)
else:
    triton, tl = _NoTriton(), _NoTritonLanguage()
