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

import torch

from labkit.errors import EnvironmentValueError, LabkitInputError

BACKENDS = ("triton", "interpreter", "torch")

# Only look for Triton here: importing it would decorate triton.language's own @jit helpers
# (tl.max, tl.argmax, ...) before TRITON_INTERPRET is set, and they would stay compiled-only.
HAS_TRITON = importlib.util.find_spec("triton") is not None
HAS_CUDA = torch.cuda.is_available()


_AS_IMPORTED = object()


def why_unavailable(name: str, *, kernels_interpreted=_AS_IMPORTED, offer=BACKENDS) -> str | None:
    """Why this process cannot run backend `name` now, or None if it can: the one place the rule lives.

    'torch' always runs; 'triton' needs Triton and a CUDA device, 'interpreter' needs Triton; and
    both run only as the kernels were defined (Triton fixes compiled or interpreted at decoration
    time): `kernels_interpreted` says how, by default as they were at import; None while they are
    not defined yet (the import-time choice asks with None). The import-time chooser,
    :func:`set_backend` and ``python -m labkit --backend`` all ask here. `offer`: the backends the
    asker accepts (a command whose --backend takes fewer); the reason suggests no other.
    """
    if kernels_interpreted is _AS_IMPORTED:
        kernels_interpreted = KERNELS_INTERPRETED
    if name == "torch":
        return None
    # What the machine lacks comes first: that is the answer on every process of this machine.
    if name == "triton" and not (HAS_TRITON and HAS_CUDA):
        return ("backend 'triton' compiles the kernels for a CUDA GPU: it needs both Triton and a CUDA device, "
                f"and this machine has {'no CUDA device' if HAS_TRITON else 'no Triton'}"
                + _offered(offer, ("interpreter", "'interpreter' runs the same Triton source on the CPU"),
                           ("torch", "'torch' the kernels' torch references")))
    if name == "interpreter" and not HAS_TRITON:
        return ("backend 'interpreter' runs the Triton kernels, and Triton is not installed here (it installs on "
                "Linux)" + _offered(offer, ("torch", "'torch' runs the kernels' torch references")))
    if name == "interpreter" and kernels_interpreted is False:
        return ("the Triton kernels were compiled for the GPU when labkit was imported; set "
                "LABKIT_BACKEND=interpreter before importing labkit to run them in the interpreter")
    if name == "triton" and kernels_interpreted:
        others = [f"'{b}'" for b in ("interpreter", "torch") if b in offer]
        return ("the Triton kernels were defined for the interpreter when labkit was imported, so compiled "
                "kernels are not available in this process" + (f"; use {' or '.join(others)} here" if others else ""))
    return None


def _offered(offer, *alternatives: tuple[str, str]) -> str:
    """'; ' and the alternatives the asker accepts, or nothing."""
    said = [words for name, words in alternatives if name in offer]
    return "; " + ", ".join(said) if said else ""


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


# More entries for describe(), each a function returning a dict: whoever holds this process to
# something (a room's kernel start, in the room's own package) says so here.
_DESCRIBED_ALSO: list = []


def describe_also(entries) -> None:
    """Add the dict that `entries()` returns to every :func:`describe` from now on."""
    if entries not in _DESCRIBED_ALSO:
        _DESCRIBED_ALSO.append(entries)


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
    for entries in _DESCRIBED_ALSO:
        info.update(entries())
    return info


_say_once_if_torch()
