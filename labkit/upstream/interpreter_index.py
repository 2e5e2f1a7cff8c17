"""A scalar as a loop bound under Triton's CPU interpreter before 3.7, with NumPy 2.

The interpreter holds a kernel's scalar as a one-element array and turns it into a Python index
with ``int(array)``, which NumPy 2 refuses for an array that has a dimension (Triton 3.7 squeezes
it first). DFlash's input preparation loops ``for i in range(num_reqs, max_num_reqs + 1, ...)``, so
under Triton 3.6 it fails with ``InterpreterError: TypeError('only 0-dimensional arrays can be
converted to Python scalars')``. :func:`scalar_index` gives the interpreter 3.7's conversion for the
duration of a run: the same integer, read from the array's one element.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def scalar_index():
    """Within the block, the interpreter converts a one-element tensor to an index as Triton 3.7 does."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # no interpreter in this Triton: nothing to give
        yield
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:  # a Triton that no longer patches the tensor class this way
        yield
        return

    def patch(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch
    try:
        yield
    finally:
        interpreter._patch_lang_tensor = original
