"""Speed-ups of Triton's CPU interpreter: the same bits, several times faster.

On a machine without a GPU the kit runs its Triton kernels in Triton's interpreter, which executes
every ``tl`` operation as numpy calls wrapped in Python objects. Five patches of the interpreter's
internals remove work that cannot change a result:

    no overflow bookkeeping     no debug-mode asserts built on 32-bit integer arithmetic
    language patched once       a launch swaps ``triton.language`` for numpy once, not per @jit helper
    numpy dtypes remembered     each Triton dtype's numpy dtype is looked up once
    numpy folds                 a reduction registered with :func:`interpret_reduction_as` runs in numpy
    helper twins                a @jit helper registered with :func:`interpret_helper_as` runs as numpy

They touch only interpreted launches: compiled kernels and the torch references are never changed.
:func:`speed_up` applies them once; :mod:`labkit.kernels.triton_import` calls it when the kernels are
defined for the interpreter. Each patch is best-effort: on a Triton whose internals differ, that
patch is skipped and the lab is only slower. ``tests/test_interpreter.py`` runs the same launches
with and without them and compares every bit.

Off switch: ``LABKIT_INTERPRETER_SPEEDUPS=0`` in the environment before labkit is imported runs
Triton's interpreter exactly as Triton ships it (to rule the patches out when something looks wrong,
or to time what they save).
"""

from __future__ import annotations

import os

import numpy as np

SWITCH_ENV = "LABKIT_INTERPRETER_SPEEDUPS"


def enabled() -> bool:
    """Whether the speed-ups may be applied in this process (``LABKIT_INTERPRETER_SPEEDUPS`` is not 0)."""
    return os.environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def speed_up() -> bool:
    """Apply every speed-up once (a second call changes nothing); returns whether they are on."""
    if not enabled():
        return False
    _no_overflow_bookkeeping()
    _patch_language_once_per_launch()
    _remember_numpy_dtypes()
    _reduce_in_numpy_where_registered()
    _call_twins_where_registered()
    return True


def _no_overflow_bookkeeping() -> None:
    """Turn off the interpreter's integer-overflow bookkeeping for 32-bit arithmetic.

    With its default options the interpreter widens every 32-bit integer add and multiply to 64
    bits to build an overflow assertion that only fires in debug mode. The noise hash multiplies
    uint32s on purpose (wrapping is the point), and that bookkeeping was a third of the lab's run
    time. Semantics are unchanged. The option lives on an internal object, so this is best-effort:
    on a Triton without it, nothing happens and the lab is only slower.
    """
    try:
        import dataclasses

        from triton.runtime import interpreter

        builder = interpreter.interpreter_builder
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
    except Exception:  # pragma: no cover - depends on Triton internals
        pass


# Reductions with a combine function of the kit's own that the interpreter may run in numpy, by id of
# the combine function: (the function, its numpy fold). See interpret_reduction_as.
_NUMPY_FOLDS: dict = {}


def interpret_reduction_as(combine_fn, numpy_fold) -> None:
    """Let Triton's interpreter run ``tl.reduce(x, axis, combine_fn)`` as ``numpy_fold(data, axis)``.

    The interpreter has numpy for tl.max, tl.min, tl.argmax and tl.sum; any other combine function
    it applies element by element in Python, each call building Triton tensors: for the sampling
    kernel's NaN-propagating max over a block of 1024 that was most of an interpreted
    launch. `numpy_fold` must return what that element-by-element fold returns, bit for bit, or None
    where it cannot tell (the fold then runs as before). Compiled kernels are not touched.
    tests/test_interpreter.py checks a registered fold against Triton's own on edge-case blocks."""
    _NUMPY_FOLDS[id(combine_fn)] = (combine_fn, numpy_fold)


def _reduce_in_numpy_where_registered() -> None:
    try:
        from triton.runtime import interpreter

        reduce_ops = interpreter.ReduceOps
        apply_impl = reduce_ops.apply_impl
    except Exception:  # pragma: no cover - depends on Triton internals
        return
    if getattr(apply_impl, "labkit_numpy_folds", False):
        return

    def apply_with_numpy_folds(self, input):
        fn, fold = _NUMPY_FOLDS.get(id(self.combine_fn), (None, None))
        if fn is not self.combine_fn or len(input) != 1 or self.axis is None:
            return apply_impl(self, input)
        out = fold(input[0].handle.data, self.axis)
        if out is None:
            return apply_impl(self, input)
        if self.keep_dims:
            out = np.expand_dims(out, self.axis)
        return [self.to_tensor(out, input[0].dtype)]

    apply_with_numpy_folds.labkit_numpy_folds, apply_with_numpy_folds.__wrapped__ = True, apply_impl
    reduce_ops.apply_impl = apply_with_numpy_folds


# @jit helpers of the kit's own that the interpreter may run as a reference of the same bits, by id of
# the helper's Python function: (the function, its twin). See interpret_helper_as.
_HELPER_TWINS: dict = {}


def interpret_helper_as(helper, twin) -> None:
    """Let Triton's interpreter run a call of the @jit helper `helper` inside a kernel as `twin`.

    Interpreted, every Triton operation costs tens of microseconds of type checks and wrapping
    whatever the block's size, and the noise helpers (a 32-bit hash: a dozen multiplies, shifts and
    xors per call) were about half of an interpreted launch of the learner's kernel in the capstone.
    `twin` gets the arguments' numpy data (a scalar is an array of one element) and returns
    ``(data, triton dtype)`` of the helper's result, bit for bit what the helper returns, or None
    where it cannot tell (the helper then runs as Triton source). Compiled kernels are not touched,
    nor is a call outside a kernel. tests/test_interpreter.py checks each registered twin against
    Triton's own run of the helper, and the 2**24-draw test of tests/test_kernels.py runs the Triton
    source itself."""
    fn = getattr(helper, "fn", None)  # the Python function of a JITFunction or InterpretedFunction
    if fn is not None:
        _HELPER_TWINS[id(fn)] = (fn, twin)


def _call_twins_where_registered() -> None:
    try:
        import triton.language as tl
        from triton.runtime import interpreter

        cls = interpreter.InterpretedFunction
        call, handle = cls.__call__, interpreter.TensorHandle
    except Exception:  # pragma: no cover - depends on Triton internals
        return
    if getattr(call, "labkit_twins", False):
        return

    def call_twin_where_registered(self, *args, **kwargs):
        fn, twin = _HELPER_TWINS.get(id(self.fn), (None, None))
        if fn is not self.fn or kwargs or not all(isinstance(a, tl.tensor) for a in args):
            return call(self, *args, **kwargs)
        out = twin(*(a.handle.data for a in args))
        if out is None:
            return call(self, *args, **kwargs)
        call_twin_where_registered.twinned += 1
        data, dtype = out
        blocks = [tuple(a.type.shape) for a in args if a.type.is_block()]
        if not blocks:
            return tl.tensor(handle(np.ascontiguousarray(data).reshape(1), dtype), dtype)
        shape = np.broadcast_shapes(*blocks)
        return tl.tensor(handle(np.ascontiguousarray(np.broadcast_to(data, shape)), dtype),
                         tl.block_type(dtype, list(shape)))

    call_twin_where_registered.labkit_twins, call_twin_where_registered.__wrapped__ = True, call
    call_twin_where_registered.twinned = 0  # calls a twin answered: for the tests
    cls.__call__ = call_twin_where_registered


def _remember_numpy_dtypes() -> None:
    """Let the interpreter look up each Triton dtype's numpy dtype once, not rebuild the table per call.

    The interpreter asks for the numpy dtype of a Triton dtype at every cast, constant and binary
    op, and each time builds its table of nineteen dtypes afresh, hashing every key: a large share of an
    interpreted kernel's time (notebook 06's audit cells, the capstone). The answer depends on the
    element type alone, so it is kept per element type (a block of int32 and a scalar int32 give
    int32; pointers, which Triton's types leave unhashable, are asked of Triton each time, as
    before). Best-effort, like the options above; tests/test_interpreter.py checks the same bits.
    """
    try:
        import triton.language as tl
        from triton.runtime import interpreter

        find = interpreter._get_np_dtype
    except Exception:  # pragma: no cover - depends on Triton internals
        return
    if getattr(find, "labkit_remembered", False):
        return
    known: dict = {}

    def np_dtype(tt_dtype):
        scalar = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        try:
            return known[scalar]
        except KeyError:
            known[scalar] = found = find(scalar)
            return found
        except TypeError:  # unhashable (a pointer type): Triton's own answer
            return find(tt_dtype)

    np_dtype.labkit_remembered, np_dtype.__wrapped__, np_dtype.known = True, find, known  # known: for the test
    interpreter._get_np_dtype = np_dtype


def _patch_language_once_per_launch() -> None:
    """Let a launch patch ``triton.language`` once, not again at every @jit helper it calls.

    To interpret a kernel, Triton swaps the builtins of ``triton.language`` for numpy versions when
    the launch starts and swaps them back when it ends. It also "patches" again at every call of
    a @jit helper inside the kernel (the kit's noise hash, the learner's helpers), walking every
    member of the language modules with ``inspect.getmembers`` -- a third of the capstone's run
    time -- although the same, stateless replacements are already in place (they do not depend
    on the function being called). Here a helper called during a launch whose language modules
    were already patched in that launch skips that walk; everything else (a launch, a helper
    called outside a launch, the first helper of a launch to see a module the kernel does not)
    patches as Triton does. Best-effort, like the option above: on a Triton whose interpreter
    lacks these internals nothing changes. tests/test_interpreter.py checks that the same launches
    give the same bits with and without it.
    """
    try:
        import triton.language as tl
        from triton.runtime import interpreter

        patch_lang, run_grid = interpreter._patch_lang, interpreter.GridExecutor.__call__
        interpreter._LangPatchScope  # noqa: B018 - fail here, not mid-launch, if it is gone
    except Exception:  # pragma: no cover - depends on Triton internals
        return
    if getattr(patch_lang, "labkit_once_per_launch", False):
        return
    launches: list[set] = []  # per launch in progress: the language modules it has patched

    def languages(fn) -> set:
        # Triton's own test (a module, and in [tl, tl.core]) by identity: a helper's globals may be a
        # notebook's whole namespace, and this runs at every helper call.
        return {id(v) for v in fn.__globals__.values() if v is tl or v is tl.core}

    def patch_once(fn):
        if launches and launches[-1] and languages(fn) <= launches[-1]:
            patch_once.skipped += 1
            return interpreter._LangPatchScope()  # nothing to undo: this launch's patches stand
        scope = patch_lang(fn)
        if launches:
            # The launch's own patch comes first (Triton patches before running the grid). A
            # helper that sees another module (tl.max sees triton.language.core) patches it, and
            # Triton leaves that in place for the rest of the launch, so it need not be redone.
            launches[-1] |= languages(fn)
        return scope

    def run_grid_patching_once(self, *args, **kwargs):
        launches.append(set())
        try:
            return run_grid(self, *args, **kwargs)
        finally:
            launches.pop()

    patch_once.labkit_once_per_launch, patch_once.skipped = True, 0
    patch_once.__wrapped__, run_grid_patching_once.__wrapped__ = patch_lang, run_grid  # for the test
    interpreter._patch_lang = patch_once
    interpreter.GridExecutor.__call__ = run_grid_patching_once
