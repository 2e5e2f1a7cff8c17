"""Why drafters run inside CUDA graphs at all: a draft step replayed from a graph against eager
launches, and the toy engine end to end.

    bench_graphs                one draft step per batch size: graph replay vs eager launches
    bench_e2e                   tokens/s of the toy engine per mode
    graph_step_applications     how often GraphRunner applies a step on the call that captures it

The speculator is the kit's own (mode ``graph-fixed``), built from :data:`labkit.bench.modes.MODES`
and fed by :func:`labkit.bench.scenario.propose_inputs`; benchmarks build it with ``validate=False`` so that
the sampling launch does not check its inputs on the host (which synchronises).
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import replace

import torch

from labkit.gpu.sizes import TOY_CAPTURE_SIZES
from labkit.gpu.timing import measure


def toy_speculator(capture_sizes=TOY_CAPTURE_SIZES, *, k: int = 4, validate: bool = False,
                   mode: str = "graph-fixed"):
    """The toy drafter on the GPU, every slot live, inputs from labkit.bench.scenario.propose_inputs."""
    from labkit.bench.modes import mode_named
    from labkit.bench.scenario import propose_inputs
    from labkit.models import load_toy_models
    from labkit.speculator import build_speculator

    models = load_toy_models("cuda")
    config = replace(mode_named(mode).config, k=k, max_num_reqs=max(capture_sizes),
                     capture_sizes=tuple(capture_sizes))
    spec = build_speculator(models.draft, config, device="cuda", validate=validate)
    spec.copy_request_inputs(*propose_inputs(spec, list(range(spec.max_num_reqs)), seed=1))
    return spec


def bench_graphs(capture_sizes=TOY_CAPTURE_SIZES, k: int = 4, log=print) -> dict:
    """One draft step (k x (draft forward + sampling)) per batch size: eager vs graph replay.

    'eager' is the kit's eager path (the sampling launch checks its inputs on the host, which
    synchronises); 'eager_launches' skips those checks, leaving only the launches, as a production
    eager mode would; 'graph' replays the captured step."""
    fast = toy_speculator(capture_sizes, k=k, validate=False)
    checked = toy_speculator(capture_sizes, k=k, validate=True)
    out = []
    with torch.no_grad():
        for n in capture_sizes:
            graph = fast.runner.graph_for(n, fast.run_rows)
            t_fast = measure({"eager_launches": functools.partial(fast.run_rows, n), "graph": graph.replay},
                             flush=False)
            t_kit = measure({"eager": functools.partial(checked.run_rows, n)}, flush=False)
            entry = {"rows": n, "k": k, "ms": {**t_kit, **t_fast},
                     "speedup_vs_eager_launches": t_fast["eager_launches"] / t_fast["graph"],
                     "speedup_vs_kit_eager": t_kit["eager"] / t_fast["graph"]}
            log(f"  rows {n:>3}: graph {t_fast['graph']*1e3:7.1f} us, eager launches "
                f"{t_fast['eager_launches']*1e3:7.1f} us ({entry['speedup_vs_eager_launches']:.1f}x), "
                f"kit eager {t_kit['eager']*1e3:7.1f} us ({entry['speedup_vs_kit_eager']:.1f}x)")
            out.append(entry)
    return {"draft_model": "toy TinyLM draft (labkit/data/draft.pt)", "vocab": fast.vocab_size,
            "capture_sizes": list(capture_sizes), "sizes": out}


def graph_step_applications() -> int:
    """How many times GraphRunner.run applies a step on the call that captures its graph.

    1 is right. The runner warms the step up eagerly (so Triton compiles before capture) and does
    not replay the new graph on that call: a step that updates its own inputs (the autoregressive
    drafter shifts its context and positions in place) would otherwise run twice. ``bench_e2e``
    records the count beside its timings, so a run made with a runner that applies the step twice
    says so (``tests/test_gpu.py`` checks it is 1)."""
    from labkit.graphs import GraphRunner

    counter = torch.zeros(1, device="cuda")
    GraphRunner([2], device="cuda").run(1, lambda rows: counter.add_(1))
    torch.cuda.synchronize()
    return int(counter.item())


def bench_e2e(repeats: int = 5, modes=("eager", "graph-fixed", "graph-buggy"), log=print) -> dict:
    """Tokens/s of the toy engine over the bench workload (50 prompts), per mode.

    One warm-up run first (Triton compiles, graphs are captured on first use), then `repeats`
    runs; medians. The toy models are tiny, so the engine is bound by Python and launches: the
    numbers compare modes, they are not a serving benchmark."""
    from labkit.bench.repro import BenchConfig, run_bench
    from labkit.models import load_toy_models

    out = {"warmup_runs": 1, "graph_step_applications": graph_step_applications()}
    models = load_toy_models("cuda")
    runs = []
    run_bench(BenchConfig(), modes, progress=False, device="cuda", models=models)  # warm-up
    for r in range(repeats):
        res = run_bench(BenchConfig(), modes, progress=False, device="cuda", models=models).to_json()
        runs.append(res["modes"])
        log(f"  run {r}: " + ", ".join(f"{m} {v['tokens_per_s']:.0f} tok/s ({v['corrupted']} corrupted)"
                                       for m, v in res["modes"].items()))
    out.update(config=res["config"], runs=runs,
               median_tokens_per_s={m: statistics.median(run[m]["tokens_per_s"] for run in runs) for m in runs[0]})
    return out


# -- what the input checks cost an eager draft step ------------------------------------------------------

DRAFT_CHECK_TARGET = 1.1  # checks on / checks off, at most (printed beside the figures, not asserted)


def step_unchecked(spec, slots, temperature, seeds, contexts, positions):
    """The step ``spec.propose`` makes -- the same copies into the buffers, the same k launches, the
    same tokens -- with no check of the inputs' values: the floor the checked step is compared with.
    `spec` is built with ``validate=False`` (no check of the weights either)."""
    return spec.propose(slots, temperature, seeds, contexts, positions, check_inputs=False)


def _wall_ms(fns: dict, iters: int) -> dict[str, float]:
    """Median wall-clock milliseconds of each callable until its GPU work is done, interleaved
    (a step ends when its tokens are ready, so the drain after the last launch counts for both)."""
    import time

    times = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(iters):
        for name, fn in fns.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {name: statistics.median(v) for name, v in times.items()}


def bench_draft_checks(rows_list=(1, 8, 32, 64), k: int = 4, iters: int = 60, log=print) -> dict:
    """An eager draft step (copy-in + k x (draft forward + sampling)) with the kit's checks on --
    ``Speculator.propose``: the inputs' types, shapes and values checked at copy-in -- against the
    same step with no check (``checks_off``: :func:`step_unchecked`), and against ``propose`` of a
    speculator built with ``validate=False`` (``validate_off``: since the weights are checked once
    at construction, the same step as ``checks_on``; kept as a control for the noise).

    The inputs arrive as the engine hands them over: from the host (the live slots a list,
    temperature and seeds by slot, contexts and positions as CPU tensors), so the checks run on the
    host and read nothing back from the GPU (tests/test_gpu.py asserts that no call of the step
    synchronises). Wall clock to the step's tokens being ready, medians of `iters` interleaved
    runs."""
    from labkit.bench.scenario import propose_inputs

    capture_sizes = tuple(sorted(set(rows_list)))
    on = toy_speculator(capture_sizes, k=k, validate=True, mode="eager")
    off = toy_speculator(capture_sizes, k=k, validate=False, mode="eager")
    out = []
    with torch.no_grad():
        for n in rows_list:
            inputs = propose_inputs(on, list(range(n)), seed=1)
            args = (inputs.slots.tolist(), *(t.cpu() for t in inputs[1:]))  # the engine's form: from the host
            ms = _wall_ms({"checks_on": functools.partial(on.propose, *args),
                           "checks_off": functools.partial(step_unchecked, off, *args),
                           "validate_off": functools.partial(off.propose, *args)}, iters)
            same = torch.equal(on.propose(*args), step_unchecked(off, *args))
            entry = {"rows": n, "k": k, "ms": ms, "ratio": ms["checks_on"] / ms["checks_off"],
                     "ratio_validate_off": ms["checks_on"] / ms["validate_off"], "same_tokens": bool(same)}
            log(f"  rows {n:>3}, k {k}: checks on {ms['checks_on']*1e3:7.1f} us, off {ms['checks_off']*1e3:7.1f} us:"
                f" {entry['ratio']:.3f}x (target <= {DRAFT_CHECK_TARGET}x); over validate=False "
                f"({ms['validate_off']*1e3:.1f} us): {entry['ratio_validate_off']:.3f}x; same tokens: {same}")
            out.append(entry)
    return {"draft_model": "toy TinyLM draft (labkit/data/draft.pt)", "mode": "eager", "k": k,
            "inputs": "from the host, as the engine hands them over: live slots a list; temperature, seeds, "
                      "contexts and positions CPU tensors",
            "timing": "wall clock per step until its tokens are ready (synchronised), median of interleaved runs",
            "target_ratio_at_most": DRAFT_CHECK_TARGET, "sizes": out}
