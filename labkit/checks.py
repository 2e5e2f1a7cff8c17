"""The input checks, run where inputs enter the kit (they raise :mod:`labkit.errors`' errors).

Each message says what is wrong and what to do, because most of them are met by learners
who are in the middle of changing a kernel.
"""

from __future__ import annotations

import operator
from typing import Iterable

import torch

from labkit import backends
from labkit.errors import LabkitInputError

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
SIGNED_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)


def check_mapping_dtype(mapping: torch.Tensor, name: str = "idx_mapping") -> None:
    """Row -> slot mappings must be signed (why: notebook 03 and docs/MECHANICS.md, after the exercises)."""
    if mapping.dtype in SIGNED_INT_DTYPES:
        return
    if mapping.dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        bits = torch.iinfo(mapping.dtype).bits
        raise LabkitInputError(
            f"{name} has unsigned dtype {mapping.dtype}. The fix marks padded rows with -1 and "
            f"the kernel skips rows with slot < 0; in an unsigned {bits}-bit buffer -1 wraps to "
            f"{2**bits - 1}, so `slot >= 0` is always true and the store lands far out of bounds. "
            "Use a signed integer type (torch.int32 as vLLM does)."
        )
    raise LabkitInputError(
        f"{name} must be a signed integer tensor (torch.int32), got {mapping.dtype}: "
        "it holds request-state slot numbers, with -1 for padded rows"
    )


def same_device(a, b) -> bool:
    """torch.device("cuda") and torch.device("cuda:0") are one device; `==` says they differ."""
    a, b = torch.device(a), torch.device(b)
    return (a.type, a.index or 0) == (b.type, b.index or 0)


def resolved_device(device) -> torch.device:
    """`device` as a torch.device with its index made explicit: "cuda" is the current CUDA device, so a
    cache keyed by it gives "cuda", "cuda:0" and torch.device("cuda") (on device 0) one entry."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def check_same_device(**tensors: torch.Tensor) -> torch.device:
    """All tensors of one launch must live on one device; name the odd one out."""
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    distinct = set(devices.values())
    if len(distinct) > 1:
        listing = ", ".join(f"{name} on {dev}" for name, dev in devices.items())
        raise LabkitInputError(f"tensors of one launch are on different devices: {listing}")
    return next(iter(distinct))


def check_capture_sizes(sizes: Iterable[int]) -> list[int]:
    sizes = list(sizes)
    if not sizes:
        raise LabkitInputError("capture_sizes is empty: give at least one batch size, e.g. [1, 2, 4, 8]")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise LabkitInputError(f"capture sizes must be positive integers, got {s!r} in {sizes}")
    if sizes != sorted(set(sizes)):
        raise LabkitInputError(
            f"capture_sizes must be sorted ascending without repeats, got {sizes}; "
            f"did you mean {sorted(set(sizes))}?"
        )
    return sizes


def check_num_reqs(num_reqs: int, max_num_reqs: int) -> None:
    if num_reqs < 0:
        raise LabkitInputError(f"num_reqs must be >= 0, got {num_reqs}")
    if num_reqs > max_num_reqs:
        raise LabkitInputError(
            f"num_reqs={num_reqs} is above max_num_reqs={max_num_reqs}: the persistent buffers "
            "have one row per possible request; raise max_num_reqs or schedule fewer requests"
        )


# -- scalars and switches ------------------------------------------------------------------------

def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """A Python (or NumPy) integer in [low, high]; bools and floats are refused, not rounded."""
    if isinstance(value, bool) or isinstance(value, float):
        raise LabkitInputError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise LabkitInputError(f"{name} must be an integer, got {value!r}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"in [{low}, {high}]" if low is not None and high is not None else (
            f">= {low}" if low is not None else f"<= {high}")
        raise LabkitInputError(f"{name} must be {bounds}, got {value}")
    return value


def check_power_of_two(name: str, value, low: int, high: int) -> int:
    value = check_int(name, value)
    if not (low <= value <= high and value & (value - 1) == 0):
        raise LabkitInputError(f"{name} must be a power of two in [{low}, {high}], got {value}")
    return value


def check_backend(backend: str | None) -> str:
    """The backend a kernel call runs on: `backend` if given (and available here), else the kit's."""
    if backend is None:
        return backends.backend()
    if not isinstance(backend, str) or backend not in backends.BACKENDS:
        raise LabkitInputError(
            f"backend must be one of {', '.join(repr(b) for b in backends.BACKENDS)} or None (the kit's "
            f"current backend), got {backend!r}"
        )
    reason = backends.why_unavailable(backend)
    if reason:
        raise LabkitInputError(f"backend={backend!r} is not available: {reason}")
    return backend


# -- tensors -----------------------------------------------------------------------------------

def check_tensor(name: str, t, *, dim: int | None = None, dtypes: tuple | None = None, what: str = "") -> None:
    """`t` is a tensor with `dim` dimensions and one of `dtypes`; `what` says what the tensor holds."""
    if not isinstance(t, torch.Tensor):
        raise LabkitInputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if dim is not None and t.dim() != dim:
        raise LabkitInputError(f"{name} must be {dim}-D{what}, got shape {tuple(t.shape)}")
    if dtypes is not None and t.dtype not in dtypes:
        names = " or ".join(str(d) for d in dtypes)
        raise LabkitInputError(f"{name} must be {names}{what}, got {t.dtype}")


def check_writable(name: str, t: torch.Tensor) -> None:
    """A tensor the kernel writes in place must give every element its own memory.

    Strides that leave gaps are fine (the kernels take them), but a view made with expand() or
    as_strided() that maps two indices to one element would make two stores land on one place.
    The test is the usual sufficient one: sorted by stride, each dimension steps past everything
    the smaller ones reach (a few exotic interleaved layouts are refused although they would do).
    """
    dims = sorted((stride, size) for stride, size in zip(t.stride(), t.shape, strict=True) if size > 1)
    reach = 0  # the largest offset the dimensions seen so far can reach
    for stride, size in dims:
        if stride <= reach:
            raise LabkitInputError(
                f"{name} is written in place, but its strides {tuple(t.stride())} for shape "
                f"{tuple(t.shape)} may map several elements onto one (a view made with expand() or "
                "as_strided()); pass a tensor whose dimensions do not overlap, e.g. a contiguous one"
            )
        reach += stride * (size - 1)


def check_temperatures(temperature: torch.Tensor, slots: torch.Tensor, name: str = "temperature") -> None:
    """Temperatures the launch reads must be >= 0 (0 is greedy) and not NaN (+inf: uniform)."""
    if slots.numel() == 0:
        return
    used = temperature[slots].to(torch.float64)
    bad = (used < 0) | used.isnan()
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise LabkitInputError(
            f"{name}[{int(slots[i])}] is {float(used[i])}: a temperature must be >= 0 (0 means greedy) "
            "and not NaN; logits / T with T < 0 turns the distribution upside down"
        )


def check_no_nan(name: str, t: torch.Tensor, rows_word: str = "row", *, rows: torch.Tensor | None = None) -> None:
    """No NaN in `t` (checked on the host: synchronises with a GPU).

    `rows`: a bool mask over the first dimension; only those rows are checked (a launch's padded
    rows, whose results are thrown away, may hold anything). The index named is `t`'s own."""
    if t.numel() == 0 or not t.is_floating_point():
        return
    nan = t.isnan()
    if rows is not None:
        nan &= rows.to(device=t.device, dtype=torch.bool).view(-1, *([1] * (t.dim() - 1)))
    if bool(nan.any()):
        where = tuple(int(i) for i in nan.nonzero()[0])
        raise LabkitInputError(
            f"{name} holds NaN (first at index {where}): sampling from NaN logits has no meaning. "
            "NaN logits usually come from NaN weights (a damaged weight file) or an overflow upstream"
        )


def check_finite_weights(what: str, model: torch.nn.Module) -> None:
    """No NaN or inf in a model's weights, checked once where the model enters (one read-back).

    Such weights give NaN logits at every step; checking them here, not the logits after each
    step, keeps read-backs out of drafting."""
    params = [(name, p) for name, p in model.named_parameters() if p.is_floating_point() and p.numel()]
    if not params:
        return
    finite = torch.stack([torch.isfinite(p).all() for _, p in params])
    if bool(finite.all()):
        return
    name = params[int((~finite).nonzero()[0, 0])][0]
    raise LabkitInputError(
        f"{what}'s weights hold NaN or inf (first in {name}): its logits would hold NaN, and sampling from "
        "NaN logits has no meaning. The usual cause is a damaged weight file"
    )


def check_slot_values(name: str, slots: torch.Tensor, max_num_reqs: int, *, allow_negative: bool) -> None:
    """Every slot < max_num_reqs (and >= 0 unless padding is allowed), naming the first bad one."""
    if slots.numel() == 0:
        return
    bad = slots >= max_num_reqs
    if not allow_negative:
        bad |= slots < 0
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        bounds = f"[0, max_num_reqs={max_num_reqs})" if not allow_negative else f"< max_num_reqs={max_num_reqs}"
        raise LabkitInputError(
            f"{name}[{row}] holds slot {int(slots[row])}: every slot must be {bounds} to index the "
            "slot-indexed buffers (temperature, seeds, draft_logits)"
        )

