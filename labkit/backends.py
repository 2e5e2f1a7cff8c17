"""Which implementation runs the kernels: compiled Triton, Triton's interpreter, or plain torch.

The choice is made once, when `labkit` is imported, because Triton decides at *decoration* time
whether a `@triton.jit` function is compiled or interpreted: `TRITON_INTERPRET=1` must be in the
environment before the first kernel module executes. So this module runs before any kernel module.

    triton       CUDA is present and Triton is installed: kernels compile, graphs are real
                 `torch.cuda.CUDAGraph`s.
    interpreter  No CUDA, Triton installed: the very same kernel source runs in Triton's CPU
                 interpreter (programs run one after another, in grid order), graphs are emulated.
    torch        No Triton at all (macOS, Windows): pure-torch references with the same
                 semantics, including the order in which rows store.

Override with the environment variable ``LABKIT_BACKEND`` (set before importing labkit), or switch
to ``torch`` at any time with :func:`set_backend` (for one block: ``with using_backend("torch"):``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys

import numpy as np
import torch

from labkit.classroom import limits
from labkit.errors import EnvironmentValueError, LabkitInputError

BACKENDS = ("triton", "interpreter", "torch")

# Only look for Triton here: importing it would decorate triton.language's own @jit helpers
# (tl.max, tl.argmax, ...) before TRITON_INTERPRET is set, and they would stay compiled-only.
HAS_TRITON = importlib.util.find_spec("triton") is not None
HAS_CUDA = torch.cuda.is_available()
# On a shared server the hub gives each kernel a share of the GPU's memory (labkit.classroom.limits).
limits.apply(torch)


_AS_IMPORTED = object()


def why_unavailable(name: str, *, kernels_interpreted=_AS_IMPORTED) -> str | None:
    """Why this process cannot run backend `name` now, or None if it can: the one place the rule lives.

    'torch' always runs; 'triton' needs Triton and a CUDA device, 'interpreter' needs Triton; and
    both run only as the kernels were defined (Triton fixes compiled or interpreted at decoration
    time): `kernels_interpreted` says how, by default as they were at import; None while they are
    not defined yet (the import-time choice asks with None). The import-time chooser,
    :func:`set_backend` and ``python -m labkit --backend`` all ask here.
    """
    if kernels_interpreted is _AS_IMPORTED:
        kernels_interpreted = KERNELS_INTERPRETED
    if name == "torch":
        return None
    # What the machine lacks comes first: that is the answer on every process of this machine.
    if name == "triton" and not (HAS_TRITON and HAS_CUDA):
        return ("backend 'triton' compiles the kernels for a CUDA GPU: it needs both Triton and a CUDA device, "
                f"and this machine has {'no CUDA device' if HAS_TRITON else 'no Triton'}; "
                "'interpreter' runs the same Triton source on the CPU, 'torch' the kernels' torch references")
    if name == "interpreter" and not HAS_TRITON:
        return ("backend 'interpreter' runs the Triton kernels, and Triton is not installed here (it installs on "
                "Linux); 'torch' runs the kernels' torch references")
    if name == "interpreter" and kernels_interpreted is False:
        return ("the Triton kernels were compiled for the GPU when labkit was imported; set "
                "LABKIT_BACKEND=interpreter before importing labkit to run them in the interpreter")
    if name == "triton" and kernels_interpreted:
        return ("the Triton kernels were defined for the interpreter when labkit was imported, so compiled "
                "kernels are not available in this process; use 'interpreter' or 'torch' here")
    return None


def _choose_at_import() -> str:
    # One line each (EnvironmentValueError): `python -m labkit` prints it as its error (labkit/__init__.py),
    # a notebook shows it as the import's error.
    raw = os.environ.get("LABKIT_BACKEND", "")
    requested = raw.strip().lower()
    if requested and requested not in BACKENDS:
        raise EnvironmentValueError(
            f"LABKIT_BACKEND={raw!r} is not a backend; choose one of {', '.join(BACKENDS)}, or unset it to let "
            "labkit choose")
    if requested:
        reason = why_unavailable(requested, kernels_interpreted=None)  # the kernels are not defined yet
        if reason:
            raise EnvironmentValueError(f"LABKIT_BACKEND={requested}: {reason}")
        return requested
    if not HAS_TRITON:
        return "torch"
    return "triton" if HAS_CUDA else "interpreter"


_IMPORT_BACKEND = _choose_at_import()
if _IMPORT_BACKEND == "interpreter":
    # Must happen before any @triton.jit runs (see the module docstring).
    os.environ["TRITON_INTERPRET"] = "1"
elif _IMPORT_BACKEND == "triton" and os.environ.get("TRITON_INTERPRET") == "1":
    raise EnvironmentValueError("TRITON_INTERPRET=1 is set but LABKIT_BACKEND=triton asks for compiled kernels; "
                                "unset one of them (LABKIT_BACKEND=interpreter runs the kernels interpreted)")

if HAS_TRITON:
    # Now that the mode is fixed, make sure Triton really imports (a broken or foreign install
    # counts as "no Triton": the torch references take over).
    try:
        importlib.import_module("triton")
    except Exception:
        HAS_TRITON = False
        if _IMPORT_BACKEND in ("triton", "interpreter") and os.environ.get("LABKIT_BACKEND"):
            raise
        _IMPORT_BACKEND = "torch"

# The kernels exist in Triton form only if Triton is installed; whether they are compiled or
# interpreted is fixed from here on.
KERNELS_INTERPRETED = HAS_TRITON and os.environ.get("TRITON_INTERPRET") == "1"


def _speed_up_interpreter() -> None:
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
    _patch_language_once_per_launch()
    _remember_numpy_dtypes()
    _reduce_in_numpy_where_registered()
    _call_twins_where_registered()


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
    tests/test_backends.py checks a registered fold against Triton's own on edge-case blocks."""
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
    nor is a call outside a kernel. tests/test_backends.py checks each registered twin against
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
    before). Best-effort, like the options above; tests/test_backends.py checks the same bits.
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
    lacks these internals nothing changes. tests/test_backends.py checks that the same launches
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


if KERNELS_INTERPRETED:
    _speed_up_interpreter()

_current = _IMPORT_BACKEND
_told_about_torch = False


def _say_once_if_torch() -> None:
    global _told_about_torch
    if _current == "torch" and not HAS_TRITON and not _told_about_torch:
        _told_about_torch = True
        print(
            "labkit: Triton is not installed on this machine, so the kernels run as pure-torch "
            "references with the same semantics (same rows, same slots, same store order). "
            "Everything in the lab works; only the Triton source is not executed.",
            file=sys.stderr,
        )


def backend() -> str:
    """The backend in use: 'triton', 'interpreter' or 'torch'."""
    return _current


def set_backend(name: str) -> str:
    """Switch backends; returns the previous one.

    'torch' is always available. 'interpreter' and 'triton' are available only if the kernels were
    defined that way when labkit was imported (Triton fixes this at decoration time): to change
    between them, set LABKIT_BACKEND before importing labkit (in a notebook: restart the kernel).
    """
    global _current
    if not isinstance(name, str) or name.strip().lower() not in BACKENDS:
        raise LabkitInputError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    name = name.strip().lower()
    reason = why_unavailable(name)
    if reason:
        raise RuntimeError(reason)
    previous, _current = _current, name
    _say_once_if_torch()
    return previous


@contextlib.contextmanager
def using_backend(name: str):
    """Run the block under backend `name`; the previous backend is back afterwards, even on error.

    The same rules as :func:`set_backend` apply ('torch' always works; 'interpreter' and 'triton'
    only if the kernels were defined that way at import).
    """
    previous = set_backend(name)
    try:
        yield name
    finally:
        set_backend(previous)


def default_device() -> torch.device:
    """Where the lab's tensors live: the GPU for compiled kernels, else the CPU."""
    return torch.device("cuda") if _current == "triton" else torch.device("cpu")


def describe() -> dict:
    """Versions and choices, for the setup notebook and for recorded data."""
    info = {
        "backend": _current,
        "torch": torch.__version__,
        "triton": None,
        "cuda_available": HAS_CUDA,
        "device": torch.cuda.get_device_name(0) if HAS_CUDA else "cpu",
        "python": sys.version.split()[0],
    }
    if HAS_TRITON:
        import triton

        info["triton"] = triton.__version__
    info.update(limits.describe())  # a shared server's limits on this kernel, if any
    return info


_say_once_if_torch()
