"""The timing harness: CUDA events around each call, a cold L2, and graphs that hold one call.

    measure({"a": fa, "b": fb})    median milliseconds of each callable, interleaved A B A B ...
    graphed(fn, reps)              a callable that replays a CUDA graph holding `fn` `reps` times
    checkpoint("stage")            synchronise, and name the stage if an earlier launch failed

Kernel sections flush the L2 cache before every iteration (a 256 MiB write), so a small launch is
timed cold, as a sampling kernel meets logits that the lm_head just wrote elsewhere. Variants whose
ratio matters (masked vs unmasked) are measured interleaved, iteration by iteration, so that clock
drift hits both alike.
"""

from __future__ import annotations

import functools
import statistics
from typing import Callable

import torch

FLUSH_BYTES = 256 * 2**20


def flush_buffer() -> torch.Tensor:
    """A buffer larger than the H200's 60 MB L2: writing it evicts whatever a kernel left there
    (one per GPU: on the current device)."""
    return _flush_buffer(torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _flush_buffer(index: int) -> torch.Tensor:
    return torch.empty(FLUSH_BYTES, dtype=torch.int8, device=torch.device("cuda", index))


def measure(fns: dict[str, Callable[[], object]], *, flush: bool = True, budget_ms: float = 40.0,
            min_iters: int = 5, max_iters: int = 200) -> dict[str, float]:
    """Median milliseconds of each callable, measured interleaved (A B C A B C ...).

    One untimed call of each first (compilation, allocation), three timed rounds to estimate the
    cost, then as many rounds as fit `budget_ms` (between `min_iters` and `max_iters`)."""
    names = list(fns)
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    estimate = _time_rounds(fns, names, 3, flush)
    longest = max(statistics.median(v) for v in estimate.values())
    iters = int(min(max_iters, max(min_iters, budget_ms / max(longest * len(names), 1e-3))))
    times = _time_rounds(fns, names, iters, flush)
    return {n: statistics.median(times[n]) for n in names}


def _time_rounds(fns, names, iters: int, flush: bool) -> dict[str, list[float]]:
    buf = flush_buffer() if flush else None
    events = {n: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(iters)] for n in names}
    for i in range(iters):
        for n in names:
            if buf is not None:
                buf.zero_()
            start, end = events[n][i]
            start.record()
            fns[n]()
            end.record()
    torch.cuda.synchronize()
    return {n: [s.elapsed_time(e) for s, e in events[n]] for n in names}


def checkpoint(label: str) -> None:
    """Synchronise; if an earlier asynchronous launch failed, say after which stage."""
    try:
        torch.cuda.synchronize()
    except Exception as err:
        raise RuntimeError(f"CUDA error surfaced after: {label}") from err


def graphed(fn: Callable[[], object], reps: int = 20) -> Callable[[], None]:
    """A callable replaying a CUDA graph that holds `fn` `reps` times (divide timings by `reps`).

    NOTE: the returned callable keeps `fn` alive, and with it every buffer `fn` closes over. A graph
    holds raw addresses, not tensors: if a launcher's scratch buffers were freed while its graph
    lives on, a replay would write into whatever the caching allocator put there next (an early
    version of the staircase benchmark did exactly that, and a later kernel read a clobbered slot
    index: CUDA error 'operation not supported on global/shared address space')."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # warm-up outside the capture: Triton compiles on first launch
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()

    def replay() -> None:
        graph.replay()

    replay.keep_alive = (graph, fn)
    return replay


def per_call(times: dict[str, float], reps: int) -> dict[str, float]:
    """Milliseconds per call from the timings of graphs that hold `reps` calls each."""
    return {name: ms / reps for name, ms in times.items()}
