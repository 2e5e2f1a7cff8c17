"""One memory pool that several captured graphs allocate from, and outputs held without owning it.

A captured CUDA graph writes to the addresses fixed at its capture. A serving engine captures many
graphs (one per batch size, one per model) into one shared pool, and may keep only a reference
that owns nothing to each graph's output, so that a later capture can be given that memory: the
graphs never run at the same time, so their outputs can share it. :class:`GraphPool` is that pool
for :class:`~labkit.graphs.GraphRunner`:

* on CUDA a capture allocates from a ``torch.cuda.graph_pool_handle()`` and PyTorch's caching
  allocator decides which memory a later capture is given; :meth:`GraphPool.unowned` makes a tensor
  over the same address through ``__cuda_array_interface__``, which keeps no allocation alive;
* elsewhere the pool is emulated: one byte arena, each capture's blocks taken lowest address first
  (what the caching allocator does with one free segment), a block nobody owns free again for the
  next capture, and each replay of an emulated graph handed the blocks of its own capture again.

A step allocates what it returns with :meth:`GraphPool.empty`: in the pool while a graph is being
captured or replayed, a fresh tensor otherwise (an eager step).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from labkit.errors import LabkitInputError

ALIGN = 512  # bytes: the caching allocator rounds a small block up to this
EMULATED_BYTES = 1 << 20
# The element types __cuda_array_interface__ can describe, as the interface spells them.
_TYPESTR = {torch.float32: "<f4", torch.float16: "<f2", torch.float64: "<f8", torch.int32: "<i4",
            torch.int64: "<i8", torch.uint8: "|u1", torch.bool: "|b1"}


@dataclass
class _Block:
    offset: int
    nbytes: int


@dataclass
class _Capture:
    """The blocks one emulated capture was given, in the order its step asked for them."""

    blocks: list[_Block] = field(default_factory=list)


class _DeviceArray:
    """A device address, its shape and its strides, as ``__cuda_array_interface__`` gives them to torch."""

    def __init__(self, tensor: torch.Tensor):
        if tensor.dtype not in _TYPESTR:
            raise LabkitInputError(f"an unowned view needs one of {sorted(str(d) for d in _TYPESTR)}, "
                                   f"got {tensor.dtype}")
        size = tensor.element_size()
        self.__cuda_array_interface__ = {
            "shape": tuple(tensor.shape), "typestr": _TYPESTR[tensor.dtype], "version": 2,
            "data": (tensor.data_ptr(), False), "strides": tuple(s * size for s in tensor.stride()),
        }


class GraphPool:
    """The memory pool the graphs of one or more :class:`~labkit.graphs.GraphRunner` s capture into.

    ``emulated_bytes``: the size of the emulated arena (on a CPU).
    """

    def __init__(self, device: torch.device | str = "cpu", *, emulated_bytes: int = EMULATED_BYTES):
        self.device = torch.device(device)
        if isinstance(emulated_bytes, bool) or not isinstance(emulated_bytes, int) or emulated_bytes < ALIGN:
            raise LabkitInputError(f"emulated_bytes must be an integer of at least {ALIGN}, got {emulated_bytes!r}")
        self._handle = None
        self._arena: torch.Tensor | None = None
        self._arena_bytes = emulated_bytes
        self._free: list[_Block] = [_Block(0, emulated_bytes)]
        self._capture: _Capture | None = None
        self._replay: list[_Block] | None = None

    # -- what a step allocates --------------------------------------------------------------------

    def empty(self, shape, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A tensor for a step's result: from the pool while a graph is captured or replayed, else fresh.

        On CUDA nothing here decides: inside ``torch.cuda.graph(..., pool=...)`` the caching allocator
        serves every allocation from the pool."""
        shape = tuple(int(s) for s in shape)
        if self._capture is not None:
            block = self._take(_nbytes(shape, dtype))
            self._capture.blocks.append(block)
            return self._view(block, shape, dtype)
        if self._replay is not None:
            if not self._replay:
                raise LabkitInputError("an emulated replay asked the pool for more than its capture did: a "
                                       "captured step must allocate the same tensors on every call")
            return self._view(self._replay.pop(0), shape, dtype)
        return torch.empty(shape, dtype=dtype, device=self.device)

    def cuda_handle(self):
        """The pool's handle for ``torch.cuda.graph(..., pool=...)``, made on first use."""
        if self._handle is None:
            self._handle = torch.cuda.graph_pool_handle()
        return self._handle

    # -- emulated captures and replays ------------------------------------------------------------

    @contextlib.contextmanager
    def capturing(self):
        """An emulated capture: every :meth:`empty` inside takes a block of the arena; yields the
        :class:`_Capture` that lists them."""
        if self._capture is not None or self._replay is not None:
            raise LabkitInputError("a capture or replay is already under way in this pool")
        capture = self._capture = _Capture()
        try:
            yield capture
        finally:
            self._capture = None

    @contextlib.contextmanager
    def replaying(self, capture: _Capture):
        """An emulated replay: :meth:`empty` hands out the blocks of `capture` again, in order."""
        self._replay = list(capture.blocks)
        try:
            yield
        finally:
            self._replay = None

    def release_all_but(self, capture: _Capture, kept: list[torch.Tensor]) -> None:
        """After an emulated capture: every block of it that no tensor in `kept` lies in is free again,
        as the caching allocator frees a capture's tensors once nothing refers to them."""
        held = [t.data_ptr() - self._arena.data_ptr() for t in kept if isinstance(t, torch.Tensor) and self.holds(t)]
        for block in capture.blocks:
            if not any(block.offset <= at < block.offset + block.nbytes for at in held):
                self._give_back(block)

    def holds(self, tensor: torch.Tensor) -> bool:
        """Whether `tensor` lies in this pool's emulated arena."""
        if self._arena is None or tensor.device != self._arena.device:
            return False
        start = self._arena.data_ptr()
        return start <= tensor.data_ptr() < start + self._arena_bytes

    # -- ownership ----------------------------------------------------------------------------------

    def unowned(self, tensor: torch.Tensor) -> torch.Tensor:
        """A tensor over the same memory as `tensor` that keeps none of it allocated.

        On CUDA the caller then drops its own references to `tensor`, and the caching allocator may
        give the memory to the next allocation (a later capture, when `tensor` came from this pool).
        In the emulation the arena already owns every block: the view is `tensor` itself, and the
        block is freed by :meth:`release_all_but` when its capture ends."""
        if tensor.device.type == "cuda":
            return torch.as_tensor(_DeviceArray(tensor), device=tensor.device)
        return tensor

    # -- the emulated allocator ---------------------------------------------------------------------

    def _take(self, nbytes: int) -> _Block:
        if self._arena is None:  # made when a capture first allocates: most runners' steps allocate nothing
            self._arena = torch.zeros(self._arena_bytes, dtype=torch.uint8, device=self.device)
        need = -(-nbytes // ALIGN) * ALIGN
        for i, free in enumerate(self._free):  # lowest address first
            if free.nbytes >= need:
                block = _Block(free.offset, need)
                if free.nbytes == need:
                    self._free.pop(i)
                else:
                    self._free[i] = _Block(free.offset + need, free.nbytes - need)
                return block
        raise LabkitInputError(f"the emulated graph pool ({self._arena_bytes} bytes) has no free block of "
                               f"{need} bytes: give GraphPool a larger emulated_bytes")

    def _give_back(self, block: _Block) -> None:
        self._free.append(_Block(block.offset, block.nbytes))
        self._free.sort(key=lambda b: b.offset)
        merged: list[_Block] = []
        for b in self._free:
            if merged and merged[-1].offset + merged[-1].nbytes == b.offset:
                merged[-1] = _Block(merged[-1].offset, merged[-1].nbytes + b.nbytes)
            else:
                merged.append(b)
        self._free = merged

    def _view(self, block: _Block, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        raw = self._arena[block.offset: block.offset + _nbytes(shape, dtype)]
        return raw.view(dtype).view(shape)


def _nbytes(shape: tuple, dtype: torch.dtype) -> int:
    count = 1
    for s in shape:
        if s < 0:
            raise LabkitInputError(f"a tensor's shape has no negative sizes, got {shape}")
        count *= s
    return max(count * torch.empty((), dtype=dtype).element_size(), 1)
