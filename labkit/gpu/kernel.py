"""The sampling kernel on its own: what the mask costs, how close it gets to memory bandwidth, what
bounds it, and how it compares with torch.

    bench_kernel          kernel variants, torch, torch.compile and same-bytes copies per (rows, vocab):
                          torch's, and a plain Triton copy with the kernel's grid, block size and warps
                          (and in vLLM's program order)
    bench_torch_natural   the kernel against samplers one would write in torch (torch.rand, multinomial)
    bench_sweep           block size x warps x fast-math level, and stripped-down variants
    peak_copy_bandwidth   a 2 GiB device-to-device copy: the machine's ceiling

Bandwidth counts the bytes the kernel must move: read the logits of every row it processes, write
q for every live row. The device-to-device copy of the same number of bytes is measured in the same
run, beside it: torch's device-to-device copy, and a Triton kernel that only copies, launched on the
sampling kernel's grid with its block size and warps (what the kernel's structure alone allows), and
that copy once more with its programs in vLLM's order (block 0 of every row first). Each size prints
the kernel alone and the whole call as fractions of the first two, beside the kit's targets
(:data:`labkit.gpu.summary.TARGETS`); no test asserts them: timings belong to the machine they were taken on.
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace

import torch
import triton
import triton.language as tl

from labkit.gpu.sizes import COMPILE_ROWS, NATURAL_ROWS, REAL_VOCAB, ROWS, SWEEP_CONFIGS, SWEEP_SHAPES, VOCABS
from labkit.gpu.summary import fraction_line, fractions, targets_for
from labkit.gpu.timing import graphed, measure, per_call
from labkit.gpu.torch_samplers import NATURAL_SAMPLERS, hash_port_sample, hash_port_tensors
from labkit.kernels.gumbel import gumbel_sample, kernel_launcher
from labkit.kernels.gumbel_tuning import launch_config, program_row_and_block
from labkit.kernels.sampling_state import SamplingState

STEP = 1  # the draft step the kernel stores q for (any step in 0..k-1 costs the same)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, vocab, BLOCK_V: tl.constexpr, ROWS_FIRST: tl.constexpr):
    """A copy on the sampling kernel's grid, (vocab blocks, rows), in which a row's blocks are
    consecutive programs: its memory traffic and nothing else. ROWS_FIRST takes vLLM's grid, (rows,
    vocab blocks), instead, which runs every row's block b together."""
    if ROWS_FIRST:
        row, blk = tl.program_id(0), tl.program_id(1)
    else:  # the sampling kernel's own order, from the helper it uses
        row, blk = program_row_and_block(0, False)
    row = row.to(tl.int64)
    offs = blk * BLOCK_V + tl.arange(0, BLOCK_V)
    mask = offs < vocab
    tl.store(dst_ptr + row * vocab + offs, tl.load(src_ptr + row * vocab + offs, mask=mask), mask=mask)


def _triton_copy(rows: int, vocab: int, rows_first: bool = False):
    """The same bytes as the kernel (read the logits, write q), with its grid, block size and warps
    (`rows_first`: block 0 of every row first, as vLLM orders its programs)."""
    cfg = launch_config(rows, vocab, interpreted=False)
    src = torch.empty(rows, vocab, device="cuda").normal_()
    dst = torch.empty_like(src)
    blocks = triton.cdiv(vocab, cfg["block_v"])
    grid = (rows, blocks) if rows_first else (blocks, rows)

    def copy() -> None:
        _copy_kernel[grid](src, dst, vocab, BLOCK_V=cfg["block_v"], ROWS_FIRST=rows_first, num_warps=cfg["num_warps"])

    copy.keep_alive = (src, dst)
    return copy


def kernel_case(rows: int, vocab: int, *, padded: int = 0, max_num_reqs: int | None = None, k: int = 2,
                seed: int = 0, greedy: bool = False):
    """(logits, SamplingState(slots, temperature, seeds, positions, q)) on the GPU; the last `padded`
    rows hold the host fill's value."""
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
    return logits, SamplingState(slots, temperature, seeds, positions, q)


def bytes_moved(rows: int, live: int, vocab: int, store_q: bool = True) -> int:
    """Read the logits of every row processed; write q for every live row (float32)."""
    return 4 * vocab * (rows + (live if store_q else 0))


def _same_bytes_copy(rows: int, vocab: int):
    src = torch.empty(rows * vocab, device="cuda").normal_()
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def _whole_call(case):
    """The public entry point, checks off (on a GPU they synchronise): every launch it makes."""
    return lambda: gumbel_sample(*case, draft_step=STEP, masked=True, validate=False, backend="triton")


def _pass_call(case, single_pass: bool, **tuning):
    """The kernel with the reduction over blocks in Triton (single pass: one packed word per program,
    then a small launch that reduces each row's words) or left to torch (an argmax and a gather after
    it), whichever the default is."""
    tuning.setdefault("draft_step", STEP)
    launch, finish = kernel_launcher(*case, masked=True, single_pass=single_pass, **tuning)

    def call():
        launch()
        return finish()

    return call


def _hash_port_call(case, vocab_index):
    logits, state = case
    return lambda: hash_port_sample(logits, state, draft_step=STEP, vocab_index=vocab_index)


class _CompiledHashPort:
    """torch.compile of the hash port, compiled once (dynamic shapes) and timed where asked."""

    def __init__(self):
        self.fn = torch.compile(hash_port_tensors, dynamic=True)
        self.first_call_s: float | None = None

    def timings(self, case, vocab_index) -> dict:
        logits, s = case
        call = functools.partial(self.fn, logits, s.idx_mapping, s.temperature, s.seeds, s.positions, s.draft_logits,
                                 STEP, vocab_index)
        try:
            if self.first_call_s is None:
                t0 = time.perf_counter()
                call()
                torch.cuda.synchronize()
                self.first_call_s = time.perf_counter() - t0
            return {"eager": measure({"compiled": call})["compiled"],
                    "graph": measure({"compiled": graphed(call, 1)})["compiled"]}
        except Exception as err:  # recorded, not fatal: the other variants still count
            return {"error": f"{type(err).__name__}: {err}"[:400]}


def _kernel_entry(rows: int, vocab: int, vocab_index, compiled: _CompiledHashPort | None) -> dict:
    case = kernel_case(rows, vocab)
    # "The kernel alone" is its pass over the vocabulary, without the reduction over blocks (which
    # the whole call adds, in the kernel or after it): the part a same-bytes copy bounds.
    unmasked, _ = kernel_launcher(*case, draft_step=STEP, masked=False, single_pass=False)
    masked, _ = kernel_launcher(*case, draft_step=STEP, masked=True, single_pass=False)
    call, plain = _whole_call(case), _hash_port_call(case, vocab_index)
    # Each variant as a graph holding one call, L2 flushed before each replay: GPU time of a cold
    # call, without Python's launch overhead (which dwarfs small launches).
    cold = {"copy": graphed(_same_bytes_copy(rows, vocab), 1), "triton_copy": graphed(_triton_copy(rows, vocab), 1),
            "triton_copy_rows_first": graphed(_triton_copy(rows, vocab, rows_first=True), 1),
            "unmasked": graphed(unmasked, 1), "masked": graphed(masked, 1), "masked_call": graphed(call, 1),
            "single_pass_call": graphed(_pass_call(case, True), 1),
            "two_pass_call": graphed(_pass_call(case, False), 1), "torch": graphed(plain, 1)}
    entry = {"rows": rows, "vocab": vocab, "bytes": bytes_moved(rows, rows, vocab), "ms": measure(cold)}
    entry["fractions"] = fractions(entry)
    entry["targets"] = targets_for(rows, vocab)
    # The same calls launched from Python, as an eager drafter would.
    entry["eager_ms"] = measure({"masked": masked, "masked_call": call, "torch": plain})
    # Warm back-to-back replays, interleaved: the masked/unmasked ratio at every size.
    warm = {"unmasked": graphed(unmasked), "masked": graphed(masked)}
    entry["graph_ms"] = per_call(measure(warm, flush=False, budget_ms=30), 20)
    if compiled is not None:
        t = compiled.timings(case, vocab_index)
        if "error" in t:
            entry["compiled_error"] = t["error"]
        else:
            entry["eager_ms"]["compiled"], entry["compiled_ms"] = t["eager"], t["graph"]
    return entry


def _half_padded(rows: int, vocab: int) -> dict:
    """Half the rows padded (-1): masked, masked with early exit, and only the live rows launched."""
    half = rows // 2
    case = kernel_case(rows, vocab, padded=rows - half)
    logits, s = case
    no_exit, _ = kernel_launcher(*case, draft_step=STEP, masked=True)
    early, _ = kernel_launcher(*case, draft_step=STEP, masked=True, early_exit=True)
    live = replace(s, idx_mapping=s.idx_mapping[:half], positions=s.positions[:half])
    live_only, _ = kernel_launcher(logits[:half], live, draft_step=STEP, masked=True)
    ms = measure({"masked": graphed(no_exit, 1), "early_exit": graphed(early, 1),
                  "live_rows_only": graphed(live_only, 1)})
    nbytes = {"masked": bytes_moved(rows, half, vocab), "early_exit": bytes_moved(half, half, vocab)}
    return {"half_padded_ms": ms, "half_padded_bytes": nbytes}


def _log_kernel_entry(entry: dict, log) -> None:
    ms, nbytes = entry["ms"], entry["bytes"]

    def gbs(t: float) -> float:
        return nbytes / t / 1e6

    log(f"  rows {entry['rows']:>4} V {entry['vocab']:>6}: copy {ms['copy']*1e3:8.1f} us {gbs(ms['copy']):7.0f} GB/s"
        f" | masked {ms['masked']*1e3:8.1f} us {gbs(ms['masked']):7.0f} GB/s ({ms['copy']/ms['masked']:.0%} of copy)"
        f" | unmasked {ms['unmasked']*1e3:8.1f} | torch {ms['torch']*1e3:9.1f}"
        f" | compiled {entry.get('compiled_ms', float('nan'))*1e3:8.1f}")
    log("      " + fraction_line(entry))


def bench_kernel(rows_list=ROWS, vocabs=VOCABS, compile_rows=COMPILE_ROWS, log=print) -> dict:
    """Kernel variants, the torch hash port, torch.compile of it and a same-bytes copy, per (rows, vocab)."""
    compiled = _CompiledHashPort() if compile_rows else None
    out = []
    for vocab in vocabs:
        vocab_index = torch.arange(vocab, device="cuda")
        for rows in rows_list:
            entry = _kernel_entry(rows, vocab, vocab_index, compiled if rows in compile_rows else None)
            if rows >= 2:
                entry.update(_half_padded(rows, vocab))
            _log_kernel_entry(entry, log)
            out.append(entry)
        torch.cuda.empty_cache()
    return {"sizes": out, "torch_compile_first_call_s": compiled.first_call_s if compiled else None}


# -- the honest comparison with torch --------------------------------------------------------------

def _natural_calls(case, vocab) -> dict:
    logits, s = case
    calls = {"kernel": _whole_call(case), "hash_port": _hash_port_call(case, torch.arange(vocab, device="cuda"))}
    for name, sampler in NATURAL_SAMPLERS.items():
        calls[name] = functools.partial(sampler, logits, s, draft_step=STEP)
    return calls


def _graphs_or_errors(calls: dict) -> tuple[dict, dict]:
    """One graph per call; a call that cannot be captured (a host sync inside) is noted instead."""
    graphs, errors = {}, {}
    for name, fn in calls.items():
        try:
            graphs[name] = graphed(fn, 1)
            torch.cuda.synchronize()
        except Exception as err:  # recorded: the eager timing of that sampler still counts
            errors[name] = f"{type(err).__name__}: {err}"[:300]
    return graphs, errors


def _faster_by(ms: dict) -> dict:
    return {name: t / ms["kernel"] for name, t in ms.items() if name != "kernel"}


def bench_torch_natural(rows_list=NATURAL_ROWS, vocab: int = REAL_VOCAB, log=print) -> dict:
    """The kernel's whole call against the torch hash port and natural torch samplers.

    Every sampler scales by temperature, stores q by slot and draws one token per row. Timed as in
    ``kernel``: a graph holding one call, L2 flushed before each replay (``ms``), and the same calls
    launched from Python (``eager_ms``). ``kernel_faster_by[name]`` = that sampler's time / the kernel's."""
    out = []
    for rows in rows_list:
        calls = _natural_calls(kernel_case(rows, vocab), vocab)
        entry = {"rows": rows, "vocab": vocab, "eager_ms": measure(calls)}
        graphs, errors = _graphs_or_errors(calls)
        entry["ms"] = measure(graphs)
        if errors:
            entry["graph_errors"] = errors
        entry["kernel_faster_by"] = _faster_by(entry["ms"])
        entry["kernel_faster_by_eager"] = _faster_by(entry["eager_ms"])
        log(f"  {rows} x {vocab}: kernel {entry['ms']['kernel']*1e3:.1f} us; faster by " + ", ".join(
            f"{n} {v:.1f}x" for n, v in entry["kernel_faster_by"].items())
            + " (eager: " + ", ".join(f"{n} {v:.1f}x" for n, v in entry["kernel_faster_by_eager"].items()) + ")")
        out.append(entry)
        torch.cuda.empty_cache()
    return {"vocab": vocab, "rows": list(rows_list), "sizes": out,
            "samplers": {"kernel": "labkit gumbel_sample (Triton), whole call, validate=False",
                         "hash_port": "the kit's hash noise ported to torch (the 'torch' of section kernel)",
                         "rand_gumbel": "torch: scaled - log(-log(torch.rand_like(scaled))), argmax",
                         "multinomial": "torch.multinomial(torch.softmax(scaled, -1), 1)"},
            "note": "every sampler also stores q[slot, step] = logits / T, as the kernel does"}


# -- what bounds the kernel --------------------------------------------------------------------------

def peak_copy_bandwidth(n_bytes: int = 2 * 2**30) -> dict:
    src = torch.empty(n_bytes // 4, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = measure({"copy": lambda: dst.copy_(src)}, flush=False, budget_ms=200)["copy"]
    return {"bytes_each_way": n_bytes, "ms": ms, "gb_per_s": 2 * n_bytes / ms / 1e6}


def _sweep_variants(case, block_v: int, warps: int) -> dict:
    """The kernel's pass (fast-math levels, and two floors) and the whole call in one and two passes,
    each a CUDA graph holding one call."""
    logits, s = case
    cfg = dict(draft_step=STEP, block_v=block_v, num_warps=warps)
    kernel = functools.partial(kernel_launcher, single_pass=False, **cfg)
    fns = {f"fast{fm}": kernel(*case, fast_math=fm)[0] for fm in (0, 1, 2)}
    # Greedy rows: no hash and no logs; no q store: the memory-only floor of the kernel's structure.
    fns["greedy"] = kernel(logits, replace(s, temperature=torch.zeros_like(s.temperature)))[0]
    fns["no_store"] = kernel(logits, s.with_q(None))[0]
    for name, single in (("call_two_pass", False), ("call_single_pass", True)):
        fns[name] = _pass_call(case, single, **cfg)
    return {name: graphed(fn, 1) for name, fn in fns.items()}


def bench_sweep(shapes=SWEEP_SHAPES, configs=SWEEP_CONFIGS, log=print) -> dict:
    """What bounds the kernel: fast-math level x block size x warps, plus stripped-down variants
    (greedy rows: no hash and no logs; no q store) that show the memory-only floor of its structure,
    and the whole call per configuration in one and in two passes (what chose the defaults)."""
    out = []
    for rows, vocab in shapes:
        case = kernel_case(rows, vocab)
        copy_ms = measure({"copy": _same_bytes_copy(rows, vocab)})["copy"]
        for block_v, warps in configs:
            ms = measure(_sweep_variants(case, block_v, warps))
            out.append({"rows": rows, "vocab": vocab, "block_v": block_v, "num_warps": warps,
                        "bytes": bytes_moved(rows, rows, vocab),
                        "no_store_bytes": bytes_moved(rows, rows, vocab, store_q=False), "copy_ms": copy_ms, "ms": ms})
            log(f"  {rows:>3} x {vocab:>6} BLOCK_V {block_v:>5} warps {warps:>2}: " + "  ".join(
                f"{n} {copy_ms / t:5.0%}" for n, t in ms.items()) + "  (share of copy bandwidth)")
    return {"configs": out}
