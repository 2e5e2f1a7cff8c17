"""The graph runner: capture one graph per batch size, pad each batch up to the next captured size.

A CUDA graph freezes a sequence of kernel launches with their grids, pointers and scalar
arguments. Replaying it costs one launch instead of dozens, which is why vLLM drafts inside full
graphs. The price: a graph captured for 8 rows always processes 8 rows. A batch of 5 live requests
replays the graph of 8, and rows 5..7 compute on whatever the persistent buffers hold there.

Two runners with the same interface:

* on CUDA, :class:`GraphRunner` captures real ``torch.cuda.CUDAGraph`` objects;
* elsewhere it emulates them, keeping the semantics that matter for this bug: the step function is
  bound to a fixed row count at capture (``num_reqs_padded``), always processes that many rows, and
  reads the persistent buffers at replay time (not the values they had at capture).

``mode="eager"`` runs the step on exactly ``num_reqs`` rows, as vLLM's eager and piecewise modes
do -- there are no padded rows, so no stale slots.

A step works in place on persistent buffers (:meth:`GraphRunner.run`), or returns what it computes
(:meth:`GraphRunner.forward`): a graph's output then lives in the memory pool its runner captures
into (:class:`~labkit.graph_pool.GraphPool`, which several runners may share), allocated by the step
with ``runner.pool.empty(...)``. ``keep_outputs=False`` keeps each graph's output without owning its
memory, as an engine does that lets its graphs' outputs share memory.
"""

from __future__ import annotations

import bisect
from typing import Callable

import torch

from labkit import backends
from labkit.checks import check_capture_sizes, check_int
from labkit.errors import LabkitInputError
from labkit.graph_pool import GraphPool

StepFn = Callable[[int], object]
MODES = ("full", "eager")


class GraphRunner:
    """Dispatch a step to the smallest capture size that fits, capturing it on first use."""

    def __init__(self, capture_sizes, *, mode: str = "full", device: torch.device | str = "cpu",
                 pool: GraphPool | None = None, keep_outputs: bool = True):
        if mode not in MODES:
            raise LabkitInputError(f"mode must be one of {MODES}, got {mode!r}")
        if pool is not None and not isinstance(pool, GraphPool):
            raise LabkitInputError(f"pool must be a labkit GraphPool, got {type(pool).__name__}")
        if not isinstance(keep_outputs, bool):
            raise LabkitInputError(f"keep_outputs must be True or False, got {keep_outputs!r}")
        self.capture_sizes = check_capture_sizes(capture_sizes)
        self.mode = mode
        self.device = torch.device(device)
        if pool is not None and pool.device != self.device:
            raise LabkitInputError(f"the pool is on {pool.device}, the runner on {self.device}")
        self.pool = pool if pool is not None else GraphPool(self.device)
        self.keep_outputs = keep_outputs
        self._graphs: dict[int, object] = {}
        self._outputs: dict[int, object] = {}
        self.num_captures = 0
        self.num_replays = 0

    @property
    def max_size(self) -> int:
        return self.capture_sizes[-1]

    def rows_for(self, num_reqs: int) -> int:
        """How many rows the step processes for `num_reqs` live requests."""
        num_reqs = check_int("num_reqs", num_reqs)
        if num_reqs < 1:
            raise LabkitInputError(f"a step needs at least one live request, got num_reqs={num_reqs}")
        if num_reqs > self.max_size:
            raise LabkitInputError(
                f"a batch of {num_reqs} requests is larger than the largest capture size "
                f"{self.max_size} (capture sizes {self.capture_sizes}); add a larger size or "
                "lower max_num_reqs"
            )
        if self.mode == "eager":
            return num_reqs
        return self.capture_sizes[bisect.bisect_left(self.capture_sizes, num_reqs)]

    def run(self, num_reqs: int, step: StepFn) -> int:
        """Run `step` for `num_reqs` live requests; returns the number of rows it processed."""
        rows = self.rows_for(num_reqs)
        if self.mode == "eager":
            step(rows)
            return rows
        graph, captured_now = self._graph_for(rows, step)
        if captured_now and not isinstance(graph, _EmulatedGraph):
            # The warm-up inside _capture already applied the step to these inputs; replaying
            # too would apply it twice, and a step that updates its own inputs in place (the
            # drafter shifts its context and positions) would draft from the wrong context.
            return rows
        self._replay(graph)
        return rows

    def forward(self, num_reqs: int, step: StepFn):
        """Run `step` for `num_reqs` live requests and return what it returns, as the graph holds it.

        Eager: the step's own result, on exactly `num_reqs` rows. Graph: the output of the graph of
        ``rows_for(num_reqs)`` rows, replayed now (also on the call that captures it: the step must
        compute its result from its inputs and change nothing else). With ``keep_outputs=False`` the
        result is a view that owns none of its memory (:meth:`GraphPool.unowned`).
        """
        rows = self.rows_for(num_reqs)
        if self.mode == "eager":
            return step(rows)
        graph, _ = self._graph_for(rows, step)
        self._replay(graph)
        return graph.output if isinstance(graph, _EmulatedGraph) else self._outputs[rows]

    def graph_for(self, rows: int, step: StepFn):
        """The graph of `rows` rows (one of the capture sizes), capturing `step` on first use.

        The returned object has ``.replay()``. On CUDA a first capture runs `step` once outside the
        graph first (the warm-up that compiles the kernels), so the buffers have seen one step.
        """
        if self.mode == "eager":
            raise LabkitInputError("an eager runner captures no graphs: it runs each step on num_reqs rows")
        if isinstance(rows, bool) or not isinstance(rows, int) or rows not in self.capture_sizes:
            raise LabkitInputError(
                f"rows must be one of the capture sizes {self.capture_sizes}, got {rows!r}"
            )
        return self._graph_for(rows, step)[0]

    def _graph_for(self, rows: int, step: StepFn):
        graph = self._graphs.get(rows)
        if graph is not None:
            return graph, False
        graph = self._graphs[rows] = self._capture(rows, step)
        return graph, True

    def capture_all(self, step: StepFn) -> None:
        """Capture every size up front, as vLLM does at start-up (with whatever the buffers hold)."""
        if self.mode == "eager":
            return
        for size in self.capture_sizes:
            self._graph_for(size, step)

    def reset(self) -> None:
        self._graphs.clear()
        self._outputs.clear()

    # -- capture and replay -------------------------------------------------------------------

    @property
    def real_graphs(self) -> bool:
        """Whether a capture now makes a real `torch.cuda.CUDAGraph`: on CUDA with compiled kernels.

        The torch backend's reference kernels read values back to the host (they store row by
        row, in order), which no CUDA graph can capture; under it, graphs are emulated even on a
        GPU. A graph keeps the kind it was captured as.
        """
        return self.device.type == "cuda" and backends.backend() == "triton"

    def _capture(self, rows: int, step: StepFn):
        self.num_captures += 1
        if not self.real_graphs:
            # Emulation: the graph is the step bound to a fixed row count. Like a real graph it
            # holds no copies of the inputs; it reads the persistent buffers when replayed, and
            # writes what it allocates into the pool's blocks of its capture (taken on its first
            # replay: the emulation runs a step only when it replays).
            return _EmulatedGraph(step, rows, self.pool, self.keep_outputs)
        # Warm up on a side stream first (Triton compiles on first launch, which must not happen
        # during capture), then capture into the runner's memory pool.
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            step(rows)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool.cuda_handle()):
            output = step(rows)
        if isinstance(output, torch.Tensor) and not self.keep_outputs:
            # The only reference left is the unowned view: once `output` goes, the caching allocator
            # may give this memory to a later capture into the same pool.
            output = self.pool.unowned(output)
        self._outputs[rows] = output
        return graph

    def _replay(self, graph) -> None:
        self.num_replays += 1
        graph.replay()


class _EmulatedGraph:
    """A 'captured' step on the CPU: always `rows` rows, reading live buffer contents, writing the
    pool's blocks of its capture (the blocks its first replay was given)."""

    def __init__(self, step: StepFn, rows: int, pool: GraphPool, keep_output: bool):
        self._step = step
        self.rows = rows
        self._pool = pool
        self._keep_output = keep_output
        self._capture = None
        self.output = None

    def replay(self) -> None:
        if self._capture is None:
            with self._pool.capturing() as capture:
                self.output = self._step(self.rows)
            self._pool.release_all_but(capture, [self.output] if self._keep_output else [])
            self._capture = capture
            return
        with self._pool.replaying(self._capture):
            self._step(self.rows)
