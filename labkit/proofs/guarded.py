"""Guarded memory: buffers with guard rows around them, and a log of what a launch touched outside.

A row whose slot is negative addresses ``temperature[slot]``, ``seeds[slot]`` and
``draft_logits[slot]``: the memory just before each buffer (on a GPU, another tensor's). The checkers hand the learner's
code views into larger allocations, so that such an access lands in *guard* rows instead of
crashing, and then say which row touched which guard:

* :func:`recording` hooks the loads and stores of Triton's CPU interpreter (every access, with its
  program id and mask, before it happens), so reads are caught even when their value is never used;
  an access outside every known buffer is refused before it can touch memory.
* :class:`GuardedTensor` gives a torch function the same view of memory: a negative index is a row
  before the buffer (as a pointer offset is), not one counted from Python's end.
* Compiled on a GPU, neither hook exists: writes show in the guard rows' contents and reads only
  through their effect on the results (see :mod:`labkit.workshop.harness.launches`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch

GUARD_ROWS = 2  # guard rows before and after each slot-indexed buffer
# What a launch's buffers hold before it runs: a slot of q nobody stores keeps Q_UNTOUCHED, q's guard rows
# GUARD_Q; temperature's and the seeds' guard rows one of GUARD_SETS per launch. A padded row that reads
# them samples pure noise under the first (temperature 1e30) and the plain argmax under the second.
Q_UNTOUCHED = 7.0
GUARD_Q = -12345.0
GUARD_SETS = ((1e30, 918273645), (1e-30, 51))


@dataclass
class Guarded:
    """A buffer of `rows` rows inside an allocation with GUARD_ROWS guard rows on each side."""

    name: str
    storage: torch.Tensor

    @classmethod
    def around(cls, name: str, values: torch.Tensor, guard_value) -> "Guarded":
        shape = (values.shape[0] + 2 * GUARD_ROWS,) + tuple(values.shape[1:])
        storage = torch.full(shape, guard_value, dtype=values.dtype, device=values.device)
        storage[GUARD_ROWS: GUARD_ROWS + values.shape[0]] = values
        return cls(name, storage)

    @property
    def rows(self) -> int:
        return self.storage.shape[0] - 2 * GUARD_ROWS

    @property
    def view(self) -> torch.Tensor:
        """The buffer the learner's code gets."""
        return self.storage[GUARD_ROWS: GUARD_ROWS + self.rows]

    def guard_rows(self) -> torch.Tensor:
        return torch.cat([self.storage[:GUARD_ROWS], self.storage[GUARD_ROWS + self.rows:]])

    def guard_indices(self) -> list[int]:
        """Buffer indices of the guard rows: the two just before the buffer, and rows, rows + 1."""
        return list(range(-GUARD_ROWS, 0)) + list(range(self.rows, self.rows + GUARD_ROWS))


@dataclass(frozen=True)
class Access:
    """One out-of-bounds access: `kind` 'load' or 'store' of `buffer[index]` by batch row `row`."""

    kind: str
    buffer: str
    index: int
    row: int | None = None


class WildAccess(RuntimeError):
    """An access outside every buffer of the launch, refused before it touched memory."""


def wild_access_in(err: BaseException) -> WildAccess | None:
    """The WildAccess behind `err` (Triton's interpreter wraps what its hooks raise), or None."""
    seen: list[BaseException] = []
    while err is not None and err not in seen:
        if isinstance(err, WildAccess):
            return err
        seen.append(err)
        err = err.__cause__ or err.__context__
    return None


@dataclass
class AccessLog:
    out_of_bounds: list[Access] = field(default_factory=list)
    loads_without_other: list[str] = field(default_factory=list)  # buffers read with a mask but no `other`

    def add(self, access: Access) -> None:
        if access not in self.out_of_bounds:
            self.out_of_bounds.append(access)


class _AddressMap:
    """Which buffer (and which row of it) a byte address belongs to."""

    def __init__(self, plain: dict[str, torch.Tensor], guarded: list[Guarded]):
        self.ranges = []  # (start, end, name, view start, row bytes, guarded)
        for name, t in plain.items():
            start = t.data_ptr()
            self.ranges.append((start, start + t.numel() * t.element_size(), name, start,
                                _row_bytes(t), False))
        for g in guarded:
            start = g.storage.data_ptr()
            end = start + g.storage.numel() * g.storage.element_size()
            self.ranges.append((start, end, g.name, g.view.data_ptr(), _row_bytes(g.storage), True))

    def locate(self, address: int) -> tuple[str, int] | None:
        """(buffer, row index) of an address outside a buffer's own rows; None inside; raises if wild."""
        for start, end, name, view_start, row_bytes, guarded in self.ranges:
            if start <= address < end:
                index = (address - view_start) // row_bytes
                if not guarded:
                    return None
                rows = (end - start) // row_bytes - 2 * GUARD_ROWS
                return None if 0 <= index < rows else (name, index)
        raise WildAccess(f"address {address:#x} lies outside every buffer of the launch")


def _row_bytes(t: torch.Tensor) -> int:
    return (t.numel() // max(1, t.shape[0]) if t.dim() else 1) * t.element_size()


@contextlib.contextmanager
def recording(plain: dict[str, torch.Tensor], guarded: list[Guarded]):
    """Log every out-of-bounds load and store of Triton's CPU interpreter inside the block.

    Yields an :class:`AccessLog`. A masked-off lane is no access; an access outside every
    buffer raises :class:`WildAccess` instead of reading or writing memory.
    """
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    addresses = _AddressMap(plain, guarded)
    log = AccessLog()
    original_load, original_store = builder.create_masked_load, builder.create_masked_store

    def note(kind, ptrs, mask):
        ptr = np.asarray(ptrs.data).reshape(-1)
        # astype(bool): a mask built as `block_mask & scalar` can arrive as int32, and an integer
        # array would index lanes instead of selecting them
        live = np.broadcast_to(np.asarray(mask.data).astype(bool), np.asarray(ptrs.data).shape).reshape(-1)
        row = int(builder.grid_idx[0]) if builder.grid_idx is not None else None
        for address in np.unique(ptr[live]):
            where = addresses.locate(int(address))
            if where is not None:
                log.add(Access(kind, where[0], where[1], row))

    def load(ptrs, mask, *rest):
        note("load", ptrs, mask)
        return original_load(ptrs, mask, *rest)

    def store(ptrs, value, mask, *rest):
        note("store", ptrs, mask)
        return original_store(ptrs, value, mask, *rest)

    semantic = getattr(interpreter, "interpreter_semantic", None)
    original_semantic_load = getattr(semantic, "load", None)

    def semantic_load(ptr, mask, other, *rest):
        # Here, unlike in the builder, a missing `other` is told from `other=0` (the builder gets
        # None for both). The masked-off lanes get whatever this Triton's interpreter fills in (0 or
        # 1 by version), and on a GPU nothing defined at all: name the buffer the load addressed.
        if mask is not None and other is None and not np.asarray(mask.handle.data).all():
            name = _first_buffer(addresses, np.asarray(ptr.handle.data).reshape(-1))
            if name and name not in log.loads_without_other:
                log.loads_without_other.append(name)
        return original_semantic_load(ptr, mask, other, *rest)

    builder.create_masked_load, builder.create_masked_store = load, store
    if original_semantic_load is not None:
        semantic.load = semantic_load
    try:
        yield log
    finally:
        # The originals are methods of the classes: dropping the instance attributes restores them.
        del builder.create_masked_load
        del builder.create_masked_store
        if original_semantic_load is not None:
            del semantic.load


def _first_buffer(addresses: _AddressMap, ptr: np.ndarray) -> str | None:
    for address in ptr:
        for start, end, name, *_ in addresses.ranges:
            if start <= int(address) < end:
                return name
    return None


class GuardedTensor(torch.Tensor):
    """A buffer for a torch function with the kernel's memory semantics and an access log.

    Indexing the first dimension with integers (Python ints or integer tensors) addresses the
    allocation around the buffer: a negative index is a guard row before it, as `ptr + slot` is
    in a kernel. Such accesses are logged (row unknown: a vectorised function has no program id).
    Everything else behaves as a plain tensor, and results are plain tensors.
    """

    @staticmethod
    def wrap(guarded: Guarded, log: AccessLog) -> "GuardedTensor":
        t = guarded.view.as_subclass(GuardedTensor)
        t._guarded, t._log = guarded, log
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and isinstance(args[0], GuardedTensor):
            return args[0]._index(func, *args[1:])
        with torch._C.DisableTorchFunctionSubclass():
            return func(*_plain(args), **_plain(kwargs))

    def _index(self, func, index, *value):
        first, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
        shifted = self._shift(first, "store" if value else "load")
        with torch._C.DisableTorchFunctionSubclass():
            storage = self._guarded.storage
            if shifted is None:
                return func(self._guarded.view, index, *_plain(value))
            return func(storage, (shifted,) + tuple(rest), *_plain(value))

    def _shift(self, first, kind):
        """The storage index for an integer index of the buffer, logging guard accesses; None otherwise."""
        is_int = isinstance(first, (int, np.integer)) and not isinstance(first, bool)
        is_index_tensor = isinstance(first, torch.Tensor) and not first.dtype.is_floating_point \
            and first.dtype != torch.bool
        if not (is_int or is_index_tensor):
            return None
        with torch._C.DisableTorchFunctionSubclass():
            idx = torch.as_tensor(first).to(device="cpu", dtype=torch.int64)
            rows = self._guarded.rows
            outside = sorted({int(i) for i in idx.reshape(-1).tolist() if not 0 <= i < rows})
            for i in outside:
                if not -GUARD_ROWS <= i < rows + GUARD_ROWS:
                    raise WildAccess(f"{self._guarded.name}[{i}] lies outside the buffer and its guard rows")
                self._log.add(Access(kind, self._guarded.name, i))
            return int(first) + GUARD_ROWS if is_int else first.to(torch.int64) + GUARD_ROWS


def _plain(obj):
    if isinstance(obj, GuardedTensor):
        return obj.as_subclass(torch.Tensor)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj
