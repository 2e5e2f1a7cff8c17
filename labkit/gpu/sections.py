"""GPU benchmarks: what the fix costs, how close the sampling kernel gets to memory bandwidth, and
why drafters run inside CUDA graphs at all.

    python -m labkit.gpu.sections --out DIR [--sections kernel,sweep,graphs,staircase,e2e,race,invariance]

prints a table per section and writes ``DIR/gpu_benchmarks.json``: device, driver, CUDA, torch and
Triton versions, the date, the command, and the raw medians. Copies of such records live in
``labkit/data/gpu/``; :mod:`labkit.viz.timing_plots` plots them on any machine.

Timing: CUDA events around each call, one pair per iteration, median over the iterations
(``_measure``). Kernel sections flush the L2 cache before every iteration (a 256 MiB write), so a
small launch is timed cold, as a sampling kernel meets logits the lm_head just wrote elsewhere.
Variants whose ratio matters (masked vs unmasked) are measured interleaved, iteration by iteration,
so clock drift hits both alike. Bandwidth counts the bytes the kernel must move: read the logits of
every row it processes, write q for every live row. The device-to-device copy of the same number of
bytes is measured in the same run, beside it.

Needs a CUDA device; these are measurements, not tests (tests/test_gpu.py holds the checks).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

RECORD_NAME = "gpu_benchmarks.json"
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
VOCABS = (32000, 128256, 151936)
COMPILE_ROWS = (1, 8, 64, 256, 512)
SECTIONS = ("kernel", "sweep", "graphs", "staircase_kernel", "staircase_toy", "e2e", "race", "invariance",
            "exactness")


# -- provenance -------------------------------------------------------------------------------------

def _run(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(command: str | None = None) -> dict:
    """Where and when a record was made: everything needed to judge its numbers later."""
    import triton

    props = torch.cuda.get_device_properties(0)
    smi = _run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit",
                "--format=csv,noheader"])
    driver = max_sm = max_mem = power = None
    if smi:
        parts = [p.strip() for p in smi.splitlines()[0].split(",")]
        driver, max_sm, max_mem, power = (parts + [None] * 4)[:4]
    root = Path(__file__).resolve().parents[2]
    commit = _run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"])
    if commit is None and os.environ.get("LABKIT_SOURCE_COMMIT"):
        # A copy of the working tree without .git (a lent GPU machine): the caller says which.
        commit, dirty = os.environ["LABKIT_SOURCE_COMMIT"], None
    from labkit.kernels import gumbel

    return {
        "device": torch.cuda.get_device_name(0),
        "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": driver,
        "max_sm_clock": max_sm,
        "max_mem_clock": max_mem,
        "power_limit": power,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command or "python -m labkit.gpu.sections " + " ".join(sys.argv[1:]),
        "git_commit": commit,
        "git_dirty": bool(dirty) if dirty is not None else None,
        "kernel_defaults": {"block_v": gumbel.GPU_BLOCK_V, "num_warps": gumbel.GPU_NUM_WARPS,
                            "fast_math": gumbel.GPU_FAST_MATH},
        "timing": "CUDA events per iteration, median. kernel.ms: a CUDA graph holding one call, replayed "
                  "with the L2 flushed (256 MiB write) before each replay (cold GPU time, no Python); "
                  "kernel.eager_ms: the same calls launched from Python; kernel.graph_ms: warm replays "
                  "of 20 calls / 20, interleaved masked/unmasked",
    }


# -- timing -----------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _flush_buffer() -> torch.Tensor:
    return torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")


def _measure(fns: dict, *, flush: bool = True, budget_ms: float = 40.0, min_iters: int = 5,
             max_iters: int = 200) -> dict:
    """Median milliseconds of each callable, measured interleaved (A B C A B C ...)."""
    names = list(fns)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    est = _time_loop(fns, names, 3, flush)
    longest = max(statistics.median(v) for v in est.values())
    iters = int(min(max_iters, max(min_iters, budget_ms / max(longest * len(names), 1e-3))))
    times = _time_loop(fns, names, iters, flush)
    return {n: statistics.median(times[n]) for n in names}


def _time_loop(fns, names, iters, flush):
    buf = _flush_buffer() if flush else None
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


def _checkpoint(label: str) -> None:
    """Synchronise and name the stage if an earlier asynchronous launch failed."""
    try:
        torch.cuda.synchronize()
    except Exception as err:
        raise RuntimeError(f"CUDA error surfaced after: {label}") from err


def _graphed(fn, reps: int = 20):
    """A callable replaying a CUDA graph that holds `fn` `reps` times (timings divide by reps).

    NOTE: the returned callable keeps `fn` alive, and with it every buffer `fn` closes over. A graph
    holds raw addresses, not tensors: if a launcher's scratch buffers were freed while its graph
    lives on, a replay would write into whatever the caching allocator put there next (the first
    version of the staircase benchmark did exactly that, and a later kernel read a clobbered slot
    index: CUDA error 'operation not supported on global/shared address space')."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()

    def replay() -> None:
        graph.replay()

    replay.keep_alive = (graph, fn)
    return replay


# -- the sampling kernel and its torch versions ----------------------------------------------------

def torch_gumbel_sample(logits, slots, temperature, seeds, positions, q, step, vocab_index):
    """The same sampling written as plain torch: gather by slot, scale, store q by slot, add noise,
    argmax. torch has no 32-bit unsigned multiply, so the hash runs in int64 (as in
    :mod:`labkit.kernels.noise`); every stage is its own kernel and its own pass over memory."""
    from labkit.kernels.noise import SALT_DRAFT, gumbel_torch, row_key_torch

    slots = slots.long()
    scaled = logits / temperature[slots][:, None]
    q[slots, step] = scaled
    key = row_key_torch(seeds[slots], positions, SALT_DRAFT)
    return (scaled + gumbel_torch(key[:, None], vocab_index[None, :])).argmax(dim=1)


def _case(rows: int, vocab: int, *, padded: int = 0, max_num_reqs: int | None = None, k: int = 2,
          seed: int = 0, greedy: bool = False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    M = max_num_reqs or max(rows, 1)
    logits = 3 * torch.randn(rows, vocab, device="cuda", generator=g)
    slots = torch.randperm(M, device="cuda", generator=g)[:rows].to(torch.int32)
    if padded:
        slots[rows - padded:] = -1
    temperature = torch.zeros(M, device="cuda") if greedy else 0.5 + torch.rand(M, device="cuda", generator=g)
    seeds = torch.randint(0, 2**62, (M,), device="cuda", generator=g)
    positions = torch.randint(0, 4096, (rows,), device="cuda", generator=g)
    q = torch.empty(M, k, vocab, device="cuda")
    return logits, slots, temperature, seeds, positions, q


def _bytes_moved(rows: int, live: int, vocab: int, store_q: bool = True) -> int:
    return 4 * vocab * (rows + (live if store_q else 0))


def bench_kernel(rows_list=ROWS, vocabs=VOCABS, compile_rows=COMPILE_ROWS, log=print) -> dict:
    """Kernel variants, torch, torch.compile and a same-bytes copy, per (rows, vocab)."""
    from labkit.kernels.gumbel import gumbel_sample, kernel_launcher

    compiled = torch.compile(torch_gumbel_sample, dynamic=True)
    compile_s = None
    out = []
    for vocab in vocabs:
        vocab_index = torch.arange(vocab, device="cuda")
        for rows in rows_list:
            logits, slots, temperature, seeds, positions, q = _case(rows, vocab)
            src = torch.empty(rows * vocab, device="cuda").normal_()
            dst = torch.empty_like(src)
            args = (logits, slots, temperature, seeds, positions, q, 1)
            unmasked, _ = kernel_launcher(*args, masked=False)
            masked, _ = kernel_launcher(*args, masked=True)
            call = lambda: gumbel_sample(*args, masked=True, validate=False)  # noqa: E731
            plain = lambda: torch_gumbel_sample(logits, slots, temperature, seeds, positions, q, 1,  # noqa: E731
                                                vocab_index)
            # Each variant as a graph holding one call, L2 flushed before each replay: GPU time of a
            # cold call, without Python's launch overhead (which dwarfs small launches).
            fns = {"copy": _graphed(lambda: dst.copy_(src), 1), "unmasked": _graphed(unmasked, 1),
                   "masked": _graphed(masked, 1), "masked_call": _graphed(call, 1), "torch": _graphed(plain, 1)}
            entry = {"rows": rows, "vocab": vocab, "bytes": _bytes_moved(rows, rows, vocab),
                     "ms": _measure(fns)}
            # The same calls launched from Python, as an eager drafter would.
            entry["eager_ms"] = _measure({"masked": masked, "masked_call": call, "torch": plain})
            # Warm back-to-back replays, interleaved: the masked/unmasked ratio at every size.
            g = {"unmasked": _graphed(unmasked), "masked": _graphed(masked)}
            entry["graph_ms"] = {n: v / 20 for n, v in _measure(g, flush=False, budget_ms=30).items()}
            if rows >= 2:
                half = rows // 2
                hl, hs, ht, hseeds, hp, hq = _case(rows, vocab, padded=rows - half)
                hargs = (hl, hs, ht, hseeds, hp, hq, 1)
                no_exit, _ = kernel_launcher(*hargs, masked=True)
                early, _ = kernel_launcher(*hargs, masked=True, early_exit=True)
                live_only, _ = kernel_launcher(hl[:half], hs[:half], ht, hseeds, hp[:half], hq, 1, masked=True)
                entry["half_padded_ms"] = _measure({"masked": _graphed(no_exit, 1), "early_exit": _graphed(early, 1),
                                                    "live_rows_only": _graphed(live_only, 1)})
                entry["half_padded_bytes"] = {"masked": _bytes_moved(rows, half, vocab),
                                              "early_exit": _bytes_moved(half, half, vocab)}
            if rows in compile_rows:
                try:
                    if compile_s is None:
                        t0 = time.perf_counter()
                        compiled(logits, slots, temperature, seeds, positions, q, 1, vocab_index)
                        torch.cuda.synchronize()
                        compile_s = time.perf_counter() - t0
                    comp = lambda: compiled(logits, slots, temperature, seeds, positions, q, 1,  # noqa: E731
                                            vocab_index)
                    entry["eager_ms"]["compiled"] = _measure({"compiled": comp})["compiled"]
                    entry["compiled_ms"] = _measure({"compiled": _graphed(comp, 1)})["compiled"]
                except Exception as err:  # noqa: BLE001 - recorded, not fatal
                    entry["compiled_error"] = f"{type(err).__name__}: {err}"[:400]
            ms = entry["ms"]
            gbs = lambda t: entry["bytes"] / t / 1e6  # noqa: E731
            log(f"  rows {rows:>4} V {vocab:>6}: copy {ms['copy']*1e3:8.1f} us {gbs(ms['copy']):7.0f} GB/s | "
                f"masked {ms['masked']*1e3:8.1f} us {gbs(ms['masked']):7.0f} GB/s "
                f"({ms['copy']/ms['masked']:.0%} of copy) | unmasked {ms['unmasked']*1e3:8.1f} | "
                f"torch {ms['torch']*1e3:9.1f} | compiled {entry.get('compiled_ms', float('nan'))*1e3:8.1f}")
            out.append(entry)
        torch.cuda.empty_cache()
    return {"sizes": out, "torch_compile_first_call_s": compile_s}


def peak_copy_bandwidth(n_bytes: int = 2 * 2**30) -> dict:
    src = torch.empty(n_bytes // 4, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = _measure({"copy": lambda: dst.copy_(src)}, flush=False, budget_ms=200)["copy"]
    return {"bytes_each_way": n_bytes, "ms": ms, "gb_per_s": 2 * n_bytes / ms / 1e6}


SWEEP_CONFIGS = ((1024, 4), (2048, 4), (2048, 8), (4096, 4), (4096, 8), (8192, 8), (8192, 16))
SWEEP_SHAPES = ((256, 151936), (512, 151936), (512, 128256), (64, 151936))


def bench_sweep(shapes=SWEEP_SHAPES, configs=SWEEP_CONFIGS, log=print) -> dict:
    """What bounds the kernel: fast-math level x block size x warps, plus stripped-down variants
    (greedy rows: no hash and no logs; no q store) that show the memory-only floor of its structure."""
    from labkit.kernels.gumbel import kernel_launcher

    out = []
    for rows, vocab in shapes:
        logits, slots, temperature, seeds, positions, q = _case(rows, vocab)
        greedy_t = torch.zeros_like(temperature)
        src = torch.empty(rows * vocab, device="cuda").normal_()
        dst = torch.empty_like(src)
        copy_ms = _measure({"copy": lambda: dst.copy_(src)})["copy"]
        nbytes = _bytes_moved(rows, rows, vocab)
        for block_v, warps in configs:
            fns = {}
            for fm in (0, 1, 2):
                fns[f"fast{fm}"], _ = kernel_launcher(logits, slots, temperature, seeds, positions, q, 1,
                                                      block_v=block_v, num_warps=warps, fast_math=fm)
            fns["greedy"], _ = kernel_launcher(logits, slots, greedy_t, seeds, positions, q, 1,
                                               block_v=block_v, num_warps=warps)
            fns["no_store"], _ = kernel_launcher(logits, slots, temperature, seeds, positions, None, 1,
                                                 block_v=block_v, num_warps=warps)
            ms = _measure(fns)
            out.append({"rows": rows, "vocab": vocab, "block_v": block_v, "num_warps": warps,
                        "bytes": nbytes, "no_store_bytes": _bytes_moved(rows, rows, vocab, False),
                        "copy_ms": copy_ms, "ms": ms})
            log(f"  {rows:>3} x {vocab:>6} BLOCK_V {block_v:>5} warps {warps:>2}: " + "  ".join(
                f"{n} {copy_ms / t:5.0%}" for n, t in ms.items()) + "  (share of copy bandwidth)")
    return {"configs": out}


# -- a draft step: graph replay vs eager launches ----------------------------------------------------

def _toy_speculator(max_num_reqs: int, capture_sizes, k: int = 4, drafter: str = "autoregressive"):
    from labkit.models import load_toy_models
    from labkit.speculator import FixSwitches, make_speculator

    models = load_toy_models("cuda")
    spec = make_speculator(drafter, models.draft, max_num_reqs=max_num_reqs, num_steps=k,
                           capture_sizes=capture_sizes, use_graphs=True, fix=FixSwitches.after(),
                           probabilistic=True, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(1)
    M = max_num_reqs
    spec.temperature.copy_(0.7 + 0.3 * torch.rand(M, device="cuda", generator=g))
    spec.seeds.copy_(torch.randint(0, 2**62, (M,), device="cuda", generator=g))
    spec.input_tokens.copy_(torch.randint(1, models.draft.vocab_size, spec.input_tokens.shape, device="cuda",
                                          generator=g))
    spec.idx_mapping.copy_(torch.arange(M, dtype=torch.int32, device="cuda"))
    spec.positions.copy_(torch.randint(10, 200, (M,), device="cuda", generator=g))
    return spec


class _no_checks:
    """Within the block, the drafter's sampling launch skips its host-side input checks."""

    def __enter__(self):
        import labkit.speculator as sp
        from labkit.kernels.gumbel import gumbel_sample

        self._mod, self._orig = sp, sp.gumbel_sample
        sp.gumbel_sample = functools.partial(gumbel_sample, validate=False)

    def __exit__(self, *exc):
        self._mod.gumbel_sample = self._orig


def bench_graphs(capture_sizes=(1, 2, 4, 8, 16, 32, 64), k: int = 4, log=print) -> dict:
    """One draft step (k x (draft forward + sampling)) per batch size: eager vs graph replay.

    'eager' is the kit's eager path (the sampling launch checks its inputs on the host, which
    synchronises); 'eager_launches' skips those checks, leaving only the launches, as a production
    eager mode would; 'graph' replays the captured step."""
    spec = _toy_speculator(max(capture_sizes), capture_sizes, k)
    out = []
    with torch.no_grad():
        for n in capture_sizes:
            graph_fn = None
            with _no_checks():
                spec.runner.run(n, spec._propose_rows)  # captures once
                graph_fn = spec.runner._graphs[n].replay
                eager_fast = functools.partial(spec._propose_rows, n)
                t_fast = _measure({"eager_launches": eager_fast, "graph": graph_fn}, flush=False)
            t_kit = _measure({"eager": functools.partial(spec._propose_rows, n)}, flush=False)
            entry = {"rows": n, "k": k, "ms": {**t_kit, **t_fast}}
            entry["speedup_vs_eager_launches"] = t_fast["eager_launches"] / t_fast["graph"]
            entry["speedup_vs_kit_eager"] = t_kit["eager"] / t_fast["graph"]
            log(f"  rows {n:>3}: graph {t_fast['graph']*1e3:7.1f} us, eager launches "
                f"{t_fast['eager_launches']*1e3:7.1f} us ({entry['speedup_vs_eager_launches']:.1f}x), "
                f"kit eager {t_kit['eager']*1e3:7.1f} us ({entry['speedup_vs_kit_eager']:.1f}x)")
            out.append(entry)
    return {"draft_model": "toy TinyLM draft (labkit/data/draft.pt)", "vocab": spec.vocab_size,
            "capture_sizes": list(capture_sizes), "sizes": out}


def bench_staircase_toy(capture_sizes=(1, 2, 4, 8, 16, 32, 64), log=print) -> dict:
    """Time of the toy draft step against live rows: graph replay of the padded size vs eager
    launches on exactly the live rows."""
    spec = _toy_speculator(max(capture_sizes), capture_sizes)
    toy = []
    with torch.no_grad(), _no_checks():
        for n in range(1, max(capture_sizes) + 1):
            rows = spec.runner.rows_for(n)
            spec.runner.run(n, spec._propose_rows)
            spec.idx_mapping[n:].fill_(-1)
            t = _measure({"graph": spec.runner._graphs[rows].replay,
                          "eager_launches": functools.partial(spec._propose_rows, n)},
                         flush=False, budget_ms=20)
            spec.idx_mapping.copy_(torch.arange(spec.max_num_reqs, dtype=torch.int32, device="cuda"))
            toy.append({"live": n, "padded_to": rows, "ms": t})
    log(f"  toy draft step: graph {toy[0]['ms']['graph']*1e3:.0f}..{toy[-1]['ms']['graph']*1e3:.0f} us, "
        f"eager {toy[0]['ms']['eager_launches']*1e3:.0f}..{toy[-1]['ms']['eager_launches']*1e3:.0f} us")

    return {"capture_sizes": list(capture_sizes), "points": toy}


def bench_staircase_kernel(kernel_sizes=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), vocab: int = 151936,
                           log=print) -> dict:
    """The sampling kernel at a real vocabulary against live rows: a graph captured at each size,
    replayed with rows n.. holding -1, masked with and without early exit, vs exactly n rows."""
    from labkit.kernels.gumbel import kernel_launcher

    kern = []
    sizes = sorted(kernel_sizes)
    for s in sizes:
        # Fresh inputs per capture size (as in bench_kernel): the graph of s rows, masked, with and
        # without early exit; then the live count n goes down, rows n.. holding -1.
        logits, slots, temperature, seeds, positions, q = _case(s, vocab)
        full_slots = slots.clone()
        graphs = {}
        for ee in (False, True):
            launch, _ = kernel_launcher(logits, slots, temperature, seeds, positions, q, 1,
                                        masked=True, early_exit=ee)
            graphs[ee] = _graphed(launch, reps=5)
        _checkpoint(f"kernel staircase: graphs of {s} rows")
        for n in sorted({s, s // 2 + 1, (3 * s) // 4 + 1}):
            slots.copy_(full_slots)
            slots[n:] = -1
            el, es, et, eseeds, ep, eq = _case(n, vocab, seed=n)
            exact, _ = kernel_launcher(el, es, et, eseeds, ep, eq, 1, masked=True)
            t = _measure({"graph_masked": graphs[False], "graph_early_exit": graphs[True],
                          "eager": _graphed(exact, reps=5)}, budget_ms=20)
            _checkpoint(f"kernel staircase: {n} live rows of {s}")
            kern.append({"live": n, "padded_to": s, "ms": {k: v / 5 for k, v in t.items()}})
    log(f"  kernel V={vocab}: " + ", ".join(
        f"{p['live']}/{p['padded_to']}: {p['ms']['graph_masked']*1e3:.0f}|{p['ms']['graph_early_exit']*1e3:.0f}|"
        f"{p['ms']['eager']*1e3:.0f} us" for p in kern[-3:]) + "  (live/padded: masked|early exit|exact rows)")
    return {"vocab": vocab, "capture_sizes": sorted(kernel_sizes), "points": kern}


def bench_staircase(log=print) -> dict:
    """Both staircases (run them as separate sections to keep a CUDA error in one from the other)."""
    return {"toy": bench_staircase_toy(log=log), "kernel": bench_staircase_kernel(log=log)}


# -- end to end ---------------------------------------------------------------------------------------

def graph_step_applications() -> int:
    """How many times GraphRunner.run applies a step on the call that captures its graph.

    1 is right. The runner warms the step up eagerly (so Triton compiles before capture); if it
    then replayed the new graph as well, a step that updates its own inputs (the autoregressive
    drafter shifts its context and positions in place) would run twice on that call. The record
    made on 2026-11-29 found 2 (fixed since in labkit/graphs.py)."""
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
    from labkit.models import load_toy_models
    from labkit.repro import BenchConfig, run_bench

    out = {"warmup_runs": 1, "graph_step_applications": graph_step_applications()}
    models = load_toy_models("cuda")
    runs = []
    run_bench(BenchConfig(), modes, progress=False, device="cuda", models=models)  # warm-up
    for r in range(repeats):
        res = run_bench(BenchConfig(), modes, progress=False, device="cuda", models=models).to_json()
        runs.append(res["modes"])
        log("  run %d: " % r + ", ".join(f"{m} {v['tokens_per_s']:.0f} tok/s ({v['corrupted']} corrupted)"
                                         for m, v in res["modes"].items()))
    out.update(config=res["config"], runs=runs,
               median_tokens_per_s={m: statistics.median(run[m]["tokens_per_s"] for run in runs) for m in runs[0]})
    return out


# -- is the fast kernel still exact? ------------------------------------------------------------------

def exactness(log=print) -> dict:
    """The sampling distribution of the compiled kernel, per fast-math level.

    small vocabulary: token frequencies over 2**20 seeds against softmax(logits / T), chi-square;
    real vocabulary (151936): 65536 draws, tokens in 4 classes (index % 4) with logits 0, .5, 1,
    1.5, where the winners' Gumbel values come from u within ~1e-5 of 1; and how many tokens the
    fast kernel picks differently from the exact one (libdevice logs) on the same inputs."""
    from labkit.kernels.gumbel import gumbel_sample

    out = {}
    n, vocab, temp = 1 << 20, 64, 0.7
    g = torch.Generator(device="cuda").manual_seed(5)
    row = 2.0 * torch.randn(vocab, device="cuda", generator=g)
    logits = row.expand(n, vocab).contiguous()
    mapping = torch.arange(n, dtype=torch.int32, device="cuda")
    expected = torch.softmax(row.double() / temp, dim=0) * n
    for fm in (0, 1, 2):
        tokens = gumbel_sample(logits, mapping, torch.full((n,), temp, device="cuda"),
                               torch.arange(n, device="cuda") * 7919 + 1, torch.zeros(n, dtype=torch.int64, device="cuda"),
                               None, fast_math=fm)
        counts = torch.bincount(tokens, minlength=vocab).double()
        keep = expected >= 5
        chi2 = float((((counts - expected) ** 2) / expected)[keep].sum())
        dof = int(keep.sum()) - 1
        out[f"small_vocab_fast{fm}"] = {"draws": n, "vocab": vocab, "chi2": chi2, "dof": dof,
                                        "z": (chi2 - dof) / (2 * dof) ** 0.5}
    rows, vocab, launches = 2048, 151936, 32
    cls_logit = torch.tensor([0.0, 0.5, 1.0, 1.5], device="cuda")
    logits = cls_logit[torch.arange(vocab, device="cuda") % 4].expand(rows, vocab).contiguous()
    mapping = torch.arange(rows, dtype=torch.int32, device="cuda")
    ones = torch.ones(rows, device="cuda")
    zeros = torch.zeros(rows, dtype=torch.int64, device="cuda")
    counts = {fm: torch.zeros(4, dtype=torch.float64, device="cuda") for fm in (0, 2)}
    differ = 0
    for i in range(launches):
        seeds = torch.arange(rows, device="cuda") + i * rows + 11
        toks = {fm: gumbel_sample(logits, mapping, ones, seeds, zeros, None, fast_math=fm) for fm in (0, 2)}
        differ += int((toks[0] != toks[2]).sum())
        for fm in (0, 2):
            counts[fm] += torch.bincount(toks[fm] % 4, minlength=4).double()
    expected = torch.softmax(cls_logit.double(), dim=0) * rows * launches
    for fm in (0, 2):
        chi2 = float(((counts[fm] - expected) ** 2 / expected).sum())
        out[f"vocab_151936_fast{fm}"] = {"draws": rows * launches, "class_counts": counts[fm].tolist(),
                                         "expected": expected.tolist(), "chi2": chi2, "dof": 3}
    out["vocab_151936_tokens_fast2_vs_fast0_differ"] = differ
    log("  " + "; ".join(f"{k}: chi2 {v['chi2']:.1f} on {v['dof']} dof" for k, v in out.items() if isinstance(v, dict))
        + f"; fast vs exact tokens differ: {differ} of {rows * launches}")
    return out


# -- the race and the models' batch invariance on the GPU ------------------------------------------

def race_stats(launches: int = 500, vocab: int = 30, graph: bool = False, block_v: int | None = None) -> dict:
    """Who wins the collision of MECHANICS' timeline (rows -> slots 0 1 2 4 5 6 7 | 7) on the GPU.

    Row 6 (live) and padded row 7 both hold slot 7. Every launch gets fresh logits; afterwards each
    element of q[7] is compared with both candidates' scaled logits. Counts: launches where the
    padded row's values won everywhere, where the live row's did, and where q[7] is a mixture
    (programs of different vocab blocks, or warps of one block, finishing in different orders).
    """
    from labkit.kernels.gumbel import kernel_launcher

    M = 8
    mapping = torch.tensor([0, 1, 2, 4, 5, 6, 7, 7], dtype=torch.int32, device="cuda")
    temperature = torch.full((M,), 0.8, device="cuda")
    seeds = torch.arange(M, device="cuda", dtype=torch.int64)
    positions = torch.zeros(8, dtype=torch.int64, device="cuda")
    logits = torch.empty(8, vocab, device="cuda")
    q = torch.zeros(M, 1, vocab, device="cuda")
    launch, _ = kernel_launcher(logits, mapping, temperature, seeds, positions, q, 0, masked=False,
                                block_v=block_v)
    replay = _graphed(launch, reps=1) if graph else launch
    padded_won = live_won = mixed = 0
    padded_elems = 0
    gen = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(launches):
        logits.normal_(generator=gen)
        logits[7] += 100.0  # the two candidates never share a value
        replay()
        got = q[7, 0]
        from_padded = torch.isclose(got, logits[7] / 0.8, rtol=1e-6, atol=0)
        from_live = torch.isclose(got, logits[6] / 0.8, rtol=1e-6, atol=0)
        if not bool((from_padded | from_live).all()):
            raise AssertionError("q[7] holds values from neither candidate row")
        n_pad = int(from_padded.sum())
        padded_elems += n_pad
        if n_pad == vocab:
            padded_won += 1
        elif n_pad == 0:
            live_won += 1
        else:
            mixed += 1
    return {"launches": launches, "vocab": vocab, "graph": graph, "padded_row_won": padded_won,
            "live_row_won": live_won, "mixed": mixed,
            "padded_share_of_elements": padded_elems / (launches * vocab)}


def layer_invariance(sizes=(1, 2, 3, 5, 8, 16, 33, 64)) -> dict:
    """Which layers change a row's bits with the batch size: each layer on random inputs."""
    from labkit.models import RowwiseLinear, load_toy_models

    models = load_toy_models("cuda")
    out = {}
    g = torch.Generator(device="cuda").manual_seed(3)
    with torch.no_grad():
        for name in ("draft", "target"):
            for lname, mod in getattr(models, name).named_modules():
                if not isinstance(mod, (RowwiseLinear, torch.nn.LayerNorm)):
                    continue
                width = mod.in_features if isinstance(mod, RowwiseLinear) else mod.normalized_shape[0]
                x = torch.randn(max(sizes), width, device="cuda", generator=g)
                alone = torch.cat([mod(x[i:i + 1]) for i in range(x.shape[0])])
                bad = [n for n in sizes if not torch.equal(mod(x[:n]), alone[:n])]
                out[f"{name}.{lname}"] = {"type": type(mod).__name__, "mismatched_sizes": bad}
    return out


def batch_invariance(sizes=(1, 2, 3, 5, 7, 8, 16, 33, 64), graphs: bool = True) -> dict:
    """Do the toy models give a row the same logits, bit for bit, whatever the batch around it?

    Each row computed alone is the reference; it is compared with the same row inside batches of
    every size, eagerly and replayed from a CUDA graph captured at that size (the padded case)."""
    from labkit.models import load_toy_models

    models = load_toy_models("cuda")
    result = {}
    with torch.no_grad():
        for name in ("draft", "target"):
            model = getattr(models, name)
            g = torch.Generator(device="cuda").manual_seed(2)
            x = torch.randint(0, model.vocab_size, (max(sizes), model.context_len), device="cuda", generator=g)
            alone = torch.cat([model(x[i:i + 1]) for i in range(x.shape[0])])
            bad_eager, bad_graph, worst = [], [], 0.0
            for n in sizes:
                out = model(x[:n])
                if not torch.equal(out, alone[:n]):
                    bad_eager.append(n)
                    worst = max(worst, float((out - alone[:n]).abs().max()))
                if graphs:
                    buf = x[:n].clone()
                    static = {}

                    def step():
                        static["out"] = model(buf)

                    _graphed(step, reps=1)()
                    torch.cuda.synchronize()
                    if not torch.equal(static["out"], alone[:n]):
                        bad_graph.append(n)
                        worst = max(worst, float((static["out"] - alone[:n]).abs().max()))
            result[name] = {"sizes": list(sizes), "mismatched_sizes_eager": bad_eager,
                            "mismatched_sizes_graph": bad_graph, "max_abs_diff": worst}
    return result


# -- command line --------------------------------------------------------------------------------------

def _print_summary(record: dict) -> None:
    k = record.get("kernel")
    if k:
        print("\nSampling kernel at rows x vocab >= 256 x 151936 (kernel alone; bytes = read logits + write q):")
        for e in k["sizes"]:
            if e["rows"] * e["vocab"] >= 256 * 151936:
                ms = e["ms"]
                line = (f"  {e['rows']:>3} x {e['vocab']}: masked {e['bytes']/ms['masked']/1e6:6.0f} GB/s = "
                        f"{ms['copy']/ms['masked']:.0%} of copy; masked/unmasked {ms['masked']/ms['unmasked']:.3f}; "
                        f"torch {ms['torch']/ms['masked_call']:.1f}x slower")
                if "compiled_ms" in e:
                    line += f"; torch.compile {e['compiled_ms']/ms['masked_call']:.1f}x slower"
                print(line)
                if "half_padded_ms" in e:
                    h = e["half_padded_ms"]
                    print(f"      half padded: early exit {h['early_exit']/h['masked']:.2f} of masked, "
                          f"live rows alone {h['live_rows_only']/h['masked']:.2f}")
    gr = record.get("graphs")
    if gr:
        print("\nDraft step, graph replay speed-up over eager launches: " + ", ".join(
            f"{e['rows']}: {e['speedup_vs_eager_launches']:.1f}x" for e in gr["sizes"]))
    if record.get("e2e"):
        print("\nEnd to end tokens/s (median): " + ", ".join(
            f"{m} {v:.0f}" for m, v in record["e2e"]["median_tokens_per_s"].items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.gpu.sections", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for gpu_benchmarks.json")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help="comma-separated subset of: " + ", ".join(SECTIONS))
    parser.add_argument("--quick", action="store_true", help="fewer sizes (a smoke run)")
    parser.add_argument("--append", action="store_true",
                        help="add the sections to an existing record in --out (one process per section "
                             "keeps a CUDA error in one from losing the others)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("python -m labkit.gpu.sections: needs a CUDA device; on the CPU, plot the recorded data with "
              "labkit.viz.timing_plots.save_timing_figures", file=sys.stderr)
        return 2
    os.environ.setdefault("LABKIT_BACKEND", "triton")
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RECORD_NAME
    if args.append and path.exists():
        record = json.loads(path.read_text())
        record["provenance"].setdefault("commands", [record["provenance"]["command"]])
        record["provenance"]["commands"].append(provenance()["command"])
    else:
        record = {"provenance": provenance(), "peak_copy": peak_copy_bandwidth()}
    print(f"{record['provenance']['device']}, driver {record['provenance']['driver']}, CUDA "
          f"{record['provenance']['cuda']}, torch {record['provenance']['torch']}, triton "
          f"{record['provenance']['triton']}; copy {record['peak_copy']['gb_per_s']:.0f} GB/s", flush=True)
    rows = (1, 8, 64, 256, 512) if args.quick else ROWS
    runners = {
        "kernel": lambda: bench_kernel(rows_list=rows),
        "sweep": lambda: bench_sweep(shapes=SWEEP_SHAPES[:1] if args.quick else SWEEP_SHAPES),
        "graphs": bench_graphs,
        "staircase_kernel": bench_staircase_kernel,
        "staircase_toy": bench_staircase_toy,
        "e2e": lambda: bench_e2e(repeats=1 if args.quick else 5),
        "race": lambda: {"toy_vocab": race_stats(2000 if not args.quick else 200),
                         "toy_vocab_graph": race_stats(2000 if not args.quick else 200, graph=True),
                         "vocab_151936": race_stats(200 if not args.quick else 20, vocab=151936),
                         "vocab_151936_graph": race_stats(200 if not args.quick else 20, vocab=151936,
                                                          graph=True)},
        "exactness": exactness,
        "invariance": lambda: {"models": batch_invariance(), "layers": layer_invariance()},
    }
    for name in sections:
        print(f"[{name}]", flush=True)
        t0 = time.perf_counter()
        try:
            record[name] = runners[name]()
        except Exception as err:  # noqa: BLE001 - keep the other sections' data
            import traceback

            traceback.print_exc()
            record[name] = {"error": f"{type(err).__name__}: {err}"[:1000]}
        record.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 1)
        path.write_text(json.dumps(record, indent=1))
        if name in ("race", "invariance"):
            print(json.dumps(record[name], indent=1))
    _print_summary(record)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
