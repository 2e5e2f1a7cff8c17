"""What can be timed without a GPU: the torch reference of the sampling, against a same-bytes copy.

Used by ``python -m labkit figures`` when there is no GPU record. The Triton kernel on a CPU runs
in an interpreter, whose speed says nothing about a GPU, so the timer measures the torch
reference instead, and the figure says so.

    cpu_record(rows, vocab)   -> dict     shaped like a GPU record's 'kernel' section
    plot_cpu_kernel(record)   -> Figure
"""

from __future__ import annotations

import platform
import statistics
import time

import torch
from matplotlib.figure import Figure

from labkit.kernels.gumbel import gumbel_sample_torch
from labkit.kernels.sampling_state import SamplingState
from labkit.viz.gpu_records import kernel_table
from labkit.viz.timing_plots import COPY, MASKED, UNMASKED, finish, new_figure


def median_ms(fn, repeats: int = 5) -> float:
    """Median wall time of `fn()` in milliseconds, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _time_size(n: int, vocab: int, repeats: int, g: torch.Generator) -> dict:
    logits = torch.randn(n, vocab, generator=g)
    slots = torch.arange(n, dtype=torch.int32)
    temp, seeds = torch.full((n,), 0.8), torch.arange(n)
    pos = torch.zeros(n, dtype=torch.int64)
    q = torch.empty(n, 1, vocab)
    state = SamplingState(slots, temp, seeds, pos, q)
    src = torch.randn(n * vocab, generator=g)
    dst = torch.empty_like(src)

    def sample(masked: bool):
        return lambda: gumbel_sample_torch(logits, state, draft_step=0, masked=masked)

    masked, unmasked = median_ms(sample(True), repeats), median_ms(sample(False), repeats)
    copy = median_ms(lambda: dst.copy_(src), repeats)
    # The reference is both "the kernel" and "torch" here: there is no separate fused kernel to time.
    return {"rows": n, "vocab": vocab, "bytes": 8 * n * vocab,
            "ms": {"copy": copy, "masked": masked, "unmasked": unmasked, "masked_call": masked, "torch": masked}}


def cpu_record(rows=(1, 4, 16, 64), vocab: int = 32000, repeats: int = 5) -> dict:
    """CPU timings of the torch reference (masked and unmasked) and a copy, as a record's 'kernel' section."""
    g = torch.Generator().manual_seed(0)
    return {
        "provenance": {"cpu_measured": True, "device": platform.processor() or platform.machine(),
                       "torch": torch.__version__, "triton": None,
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "kernel": {"sizes": [_time_size(n, vocab, repeats, g) for n in rows]},
    }


def plot_cpu_kernel(record: dict) -> Figure:
    """Time of the torch reference against a same-bytes copy, per batch size, measured on this CPU."""
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    table = kernel_table(record)
    x = [r["rows"] for r in table]
    ax.plot(x, [r["masked_us"] / 1e3 for r in table], "-o", color=MASKED, ms=3, label="torch reference, masked")
    ax.plot(x, [r["unmasked_us"] / 1e3 for r in table], "--", color=UNMASKED, label="torch reference, unmasked")
    ax.plot(x, [r["copy_us"] / 1e3 for r in table], ":", color=COPY, label="copy, same bytes")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("rows (batch size)")
    ax.set_ylabel("time per call (ms)")
    ax.set_title("CPU-measured: sampling with the torch reference (no GPU record)")
    ax.legend(fontsize=7)
    return finish(fig, record, "CPU timings; they say nothing about the GPU kernel")
