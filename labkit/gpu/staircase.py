"""The padding staircase: a graph captured for `s` rows costs the same for any number of live rows
up to `s`, while eager launches cost what the live rows cost.

    bench_staircase_toy      the toy draft step, graph of the padded size vs eager on the live rows
    bench_staircase_kernel   the sampling kernel at a real vocabulary, masked with and without early exit
"""

from __future__ import annotations

import functools

import torch

from labkit.gpu.drafter import toy_speculator
from labkit.gpu.kernel import STEP, kernel_case
from labkit.gpu.sizes import KERNEL_SIZES, REAL_VOCAB, TOY_CAPTURE_SIZES
from labkit.gpu.timing import checkpoint, graphed, measure, per_call
from labkit.kernels.gumbel import kernel_launcher

REPS = 5  # calls per graph in the kernel staircase


def bench_staircase_toy(capture_sizes=TOY_CAPTURE_SIZES, log=print) -> dict:
    """Time of the toy draft step against live rows: graph replay of the padded size vs eager
    launches on exactly the live rows (rows past the live ones as the fix fills them: mode graph-fixed)."""
    from labkit.bench.scenario import propose_inputs

    spec = toy_speculator(capture_sizes, validate=False)
    points = []
    with torch.no_grad():
        for n in range(1, max(capture_sizes) + 1):
            rows = spec.runner.rows_for(n)
            graph = spec.runner.graph_for(rows, spec.run_rows)
            spec.copy_request_inputs(*propose_inputs(spec, list(range(n)), seed=n))
            t = measure({"graph": graph.replay, "eager_launches": functools.partial(spec.run_rows, n)},
                        flush=False, budget_ms=20)
            points.append({"live": n, "padded_to": rows, "ms": t})
    log(f"  toy draft step: graph {points[0]['ms']['graph']*1e3:.0f}..{points[-1]['ms']['graph']*1e3:.0f} us, "
        f"eager {points[0]['ms']['eager_launches']*1e3:.0f}..{points[-1]['ms']['eager_launches']*1e3:.0f} us")
    return {"capture_sizes": list(capture_sizes), "points": points}


def _padded_graphs(case) -> dict:
    """Graphs of the masked kernel over all rows of `case`, with and without early exit."""
    graphs = {}
    for early_exit in (False, True):
        launch, _ = kernel_launcher(*case, draft_step=STEP, masked=True, early_exit=early_exit)
        graphs[early_exit] = graphed(launch, reps=REPS)
    return graphs


def _live_counts(size: int) -> list[int]:
    return sorted({size, size // 2 + 1, (3 * size) // 4 + 1})


def _staircase_points(size: int, vocab: int) -> list[dict]:
    # Fresh inputs per capture size: the graph of `size` rows; then the live count n goes down,
    # rows n.. holding -1, against a launch of exactly n rows.
    case = kernel_case(size, vocab)
    slots = case[1].idx_mapping
    full_slots = slots.clone()
    graphs = _padded_graphs(case)
    checkpoint(f"kernel staircase: graphs of {size} rows")
    points = []
    for n in _live_counts(size):
        slots.copy_(full_slots)
        slots[n:] = -1
        exact, _ = kernel_launcher(*kernel_case(n, vocab, seed=n), draft_step=STEP, masked=True)
        t = measure({"graph_masked": graphs[False], "graph_early_exit": graphs[True],
                     "eager": graphed(exact, reps=REPS)}, budget_ms=20)
        checkpoint(f"kernel staircase: {n} live rows of {size}")
        points.append({"live": n, "padded_to": size, "ms": per_call(t, REPS)})
    return points


def bench_staircase_kernel(kernel_sizes=KERNEL_SIZES, vocab: int = REAL_VOCAB, log=print) -> dict:
    """The sampling kernel at a real vocabulary against live rows: a graph captured at each size,
    replayed with rows n.. as the fix fills them, masked with and without early exit, vs exactly n rows."""
    points = []
    for size in sorted(kernel_sizes):
        points += _staircase_points(size, vocab)
    log(f"  kernel V={vocab}: " + ", ".join(
        f"{p['live']}/{p['padded_to']}: {p['ms']['graph_masked']*1e3:.0f}|{p['ms']['graph_early_exit']*1e3:.0f}|"
        f"{p['ms']['eager']*1e3:.0f} us" for p in points[-3:]) + "  (live/padded: masked|early exit|exact rows)")
    return {"vocab": vocab, "capture_sizes": sorted(kernel_sizes), "points": points}
