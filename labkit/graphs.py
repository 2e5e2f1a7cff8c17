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
"""

from __future__ import annotations

import bisect
from typing import Callable

import torch

from labkit import backends
from labkit.checks import check_capture_sizes, check_int
from labkit.errors import LabkitInputError

StepFn = Callable[[int], None]
MODES = ("full", "eager")


class GraphRunner:
    """Dispatch a step to the smallest capture size that fits, capturing it on first use."""

    def __init__(self, capture_sizes, *, mode: str = "full", device: torch.device | str = "cpu"):
        if mode not in MODES:
            raise LabkitInputError(f"mode must be one of {MODES}, got {mode!r}")
        self.capture_sizes = check_capture_sizes(capture_sizes)
        self.mode = mode
        self.device = torch.device(device)
        self._graphs: dict[int, object] = {}
        self._pool = None
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
            # holds no copies of the inputs; it reads the persistent buffers when replayed.
            return _EmulatedGraph(step, rows)
        # Warm up on a side stream first (Triton compiles on first launch, which must not happen
        # during capture), then capture into a shared memory pool.
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            step(rows)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        with torch.cuda.graph(graph, pool=self._pool):
            step(rows)
        return graph

    def _replay(self, graph) -> None:
        self.num_replays += 1
        graph.replay()


class _EmulatedGraph:
    """A 'captured' step on the CPU: always `rows` rows, reading live buffer contents."""

    def __init__(self, step: StepFn, rows: int):
        self._step = step
        self.rows = rows

    def replay(self) -> None:
        self._step(self.rows)
