"""Timing plots, drawn from recorded GPU measurements on any machine (the CPU included).

The records are JSON files written by ``python -m labkit.gpu.sections --out DIR`` on a GPU and kept in
``labkit/data/gpu/``. Every figure prints, under the plot, the device, driver, CUDA, torch and Triton
versions and the date of the record it was drawn from. Without any record, :func:`save_timing_figures`
says so and draws what can be measured on this CPU instead, labelled as CPU-measured.

    load_record()              -> dict | None   the newest record in labkit/data/gpu/
    caption(record)            -> str           "NVIDIA H200 · driver ... · 2026-11-29"
    kernel_table(record)       -> list[dict]    per (rows, vocab): times, GB/s, share of copy
    headline(record)           -> dict          the figures the kit claims, computed from the record
    plot_*(record)             -> Figure        one figure each (see below)
    save_timing_figures(dir)   -> list[Path]    all of them as PNG files

Figures use ``matplotlib.figure.Figure`` (no pyplot state), fixed sizes and no randomness.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from matplotlib.figure import Figure

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "gpu"
DPI = 110
MASKED, UNMASKED, COPY, TORCH, COMPILED = "#3182bd", "#9ecae1", "#636363", "#e6550d", "#fdae6b"
GRAPH, EAGER, EARLY = "#31a354", "#de2d26", "#756bb1"
VOCAB_STYLE = {32000: ":", 128256: "--", 151936: "-"}


# -- records -----------------------------------------------------------------------------------------

def record_paths(data_dir: Path | str | None = None) -> list[Path]:
    """Recorded GPU benchmark files, oldest first by their recorded date."""
    folder = Path(data_dir) if data_dir is not None else DATA_DIR
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return sorted(paths, key=lambda p: (_read(p).get("provenance", {}).get("date", ""), p.name))


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def load_record(path: Path | str | None = None, data_dir: Path | str | None = None) -> dict | None:
    """The record at `path`, or the newest one in `data_dir` (default labkit/data/gpu); None if none."""
    if path is not None:
        return json.loads(Path(path).read_text())
    paths = record_paths(data_dir)
    return _read(paths[-1]) if paths else None


def caption(record: dict | None) -> str:
    """One line naming where and when the numbers were measured."""
    if not record:
        return "no GPU record"
    p = record.get("provenance", {})
    if p.get("cpu_measured"):
        return (f"CPU-measured on this machine ({p.get('device', 'cpu')}), torch {p.get('torch')}, "
                f"{p.get('date', '')[:10]}: no GPU record found")
    return (f"{p.get('device')} · driver {p.get('driver')} · CUDA {p.get('cuda')} · torch {p.get('torch')} · "
            f"triton {p.get('triton')} · {p.get('date', '')[:10]}")


def _finish(fig: Figure, record: dict | None, note: str = "") -> Figure:
    text = caption(record) + (f"\n{note}" if note else "")
    fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=7.5, color="#555555")
    return fig


def _figure(width=7.2, height=3.8, bottom=0.22) -> Figure:
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(bottom=bottom, top=0.88, left=0.1, right=0.97)
    return fig


# -- tables computed from a record --------------------------------------------------------------------

def kernel_table(record: dict) -> list[dict]:
    """Per (rows, vocab): medians in microseconds, effective GB/s and share of the same-bytes copy."""
    rows = []
    for e in record.get("kernel", {}).get("sizes", []):
        ms, g = e["ms"], e.get("graph_ms", {})
        row = {
            "rows": e["rows"], "vocab": e["vocab"], "bytes": e["bytes"],
            "copy_us": ms["copy"] * 1e3, "masked_us": ms["masked"] * 1e3, "unmasked_us": ms["unmasked"] * 1e3,
            "call_us": ms["masked_call"] * 1e3, "torch_us": ms["torch"] * 1e3,
            "masked_gbs": e["bytes"] / ms["masked"] / 1e6, "copy_gbs": e["bytes"] / ms["copy"] / 1e6,
            "share_of_copy": ms["copy"] / ms["masked"],
            "masked_over_unmasked": (g["masked"] / g["unmasked"]) if g else ms["masked"] / ms["unmasked"],
            "speedup_vs_torch": ms["torch"] / ms["masked_call"],
        }
        if "eager_ms" in e:
            row["eager_call_us"] = e["eager_ms"]["masked_call"] * 1e3
        if "compiled_ms" in e:
            row["compiled_us"] = e["compiled_ms"] * 1e3
            row["speedup_vs_compiled"] = e["compiled_ms"] / ms["masked_call"]
        if "half_padded_ms" in e:
            h = e["half_padded_ms"]
            row["early_exit_over_masked"] = h["early_exit"] / h["masked"]
            row["live_only_over_masked"] = h["live_rows_only"] / h["masked"]
        rows.append(row)
    return rows


def headline(record: dict, min_elements: int = 256 * 151936) -> dict:
    """The figures the kit claims, at rows x vocab >= 256 x 151936 (worst case over those sizes)."""
    big = [r for r in kernel_table(record) if r["rows"] * r["vocab"] >= min_elements]
    out = {"sizes": [(r["rows"], r["vocab"]) for r in big]}
    if big:
        out["min_share_of_copy"] = min(r["share_of_copy"] for r in big)
        out["max_masked_over_unmasked"] = max(r["masked_over_unmasked"] for r in big)
        out["min_speedup_vs_torch"] = min(r["speedup_vs_torch"] for r in big)
        comp = [r["speedup_vs_compiled"] for r in big if "speedup_vs_compiled" in r]
        if comp:
            out["min_speedup_vs_compiled"] = min(comp)
        ee = [r["early_exit_over_masked"] for r in big if "early_exit_over_masked" in r]
        if ee:
            out["max_early_exit_over_masked"] = max(ee)
    all_rows = kernel_table(record)
    if all_rows:
        out["max_masked_over_unmasked_all_sizes"] = max(r["masked_over_unmasked"] for r in all_rows)
    graphs = record.get("graphs", {}).get("sizes", [])
    if graphs:
        out["graph_speedup_by_rows"] = {e["rows"]: round(e["speedup_vs_eager_launches"], 2) for e in graphs}
    if record.get("peak_copy"):
        out["peak_copy_gbs"] = record["peak_copy"]["gb_per_s"]
    e2e = record.get("e2e", {}).get("median_tokens_per_s")
    if e2e:
        out["tokens_per_s"] = e2e
    return out


# -- figures ----------------------------------------------------------------------------------------

def plot_kernel_bandwidth(record: dict, vocabs=(151936, 128256, 32000)) -> Figure:
    """Effective bandwidth of the masked kernel against the same-bytes copy, per batch size."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    table = kernel_table(record)
    for vocab in vocabs:
        pts = [r for r in table if r["vocab"] == vocab]
        if not pts:
            continue
        x = [r["rows"] for r in pts]
        style = VOCAB_STYLE.get(vocab, "-")
        ax.plot(x, [r["masked_gbs"] for r in pts], style, color=MASKED, marker="o", ms=3,
                label=f"masked kernel, V={vocab}")
        ax.plot(x, [r["copy_gbs"] for r in pts], style, color=COPY, lw=1, label=f"copy, same bytes, V={vocab}")
    if record.get("peak_copy"):
        ax.axhline(record["peak_copy"]["gb_per_s"], color=COPY, lw=0.6, alpha=0.6)
        ax.text(512, record["peak_copy"]["gb_per_s"], "peak copy (2 GiB) ", va="bottom", ha="right", fontsize=7,
                color=COPY)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.1 * max([record.get("peak_copy", {}).get("gb_per_s", 0)] + [r["copy_gbs"] for r in table]))
    ax.set_xlabel("rows (batch size)")
    ax.set_ylabel("GB/s (read logits + write q)")
    ax.set_title("Gumbel sampling kernel vs device-to-device copy")
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    return _finish(fig, record, "the kernel alone: a CUDA graph of one launch, L2 flushed before each replay; "
                                "medians of CUDA-event timings")


def plot_masked_vs_unmasked(record: dict) -> Figure:
    """Time of the masked kernel over the unmasked one, same live rows: the fix's cost."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    table = kernel_table(record)
    for vocab in sorted({r["vocab"] for r in table}):
        pts = [r for r in table if r["vocab"] == vocab]
        ax.plot([r["rows"] for r in pts], [r["masked_over_unmasked"] for r in pts], VOCAB_STYLE.get(vocab, "-"),
                marker="o", ms=3, color=MASKED, label=f"V={vocab}")
    ax.axhline(1.0, color=COPY, lw=0.8)
    ax.axhspan(0.98, 1.02, color=COPY, alpha=0.12, label="within 2%")
    ax.set_ylim(0.9, 1.1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rows (all live)")
    ax.set_ylabel("masked time / unmasked time")
    ax.set_title("What the fix costs in the kernel: nothing measurable")
    ax.legend(fontsize=7)
    return _finish(fig, record, "GPU time from CUDA-graph replays (no launch overhead)")


def plot_early_exit(record: dict, vocab: int = 151936) -> Figure:
    """A half-padded batch: masked, masked with early exit, and the live rows alone."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    pts = [e for e in record.get("kernel", {}).get("sizes", []) if e["vocab"] == vocab and "half_padded_ms" in e]
    x = list(range(len(pts)))
    width = 0.27
    for i, (key, label, color) in enumerate([("masked", "masked (padded rows still read)", MASKED),
                                             ("early_exit", "masked + early exit", EARLY),
                                             ("live_rows_only", "live rows alone (the floor)", COPY)]):
        ax.bar([v + (i - 1) * width for v in x], [e["half_padded_ms"][key] * 1e3 for e in pts], width,
               color=color, label=label)
    ax.set_xticks(x, [str(e["rows"]) for e in pts])
    ax.set_yscale("log")
    ax.set_xlabel(f"rows launched (half of them padded with -1), V={vocab}")
    ax.set_ylabel("time (us)")
    ax.set_title("Early exit: a padded row skips its loads too")
    ax.legend(fontsize=7)
    return _finish(fig, record)


def plot_kernel_vs_torch(record: dict, vocab: int = 151936) -> Figure:
    """The kernel call against plain torch and torch.compile of the same sampling."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    pts = [r for r in kernel_table(record) if r["vocab"] == vocab]
    x = [r["rows"] for r in pts]
    ax.plot(x, [r["call_us"] for r in pts], "-o", ms=3, color=MASKED, label="Triton kernel (whole call)")
    if all("eager_call_us" in r for r in pts):
        ax.plot(x, [r["eager_call_us"] for r in pts], "--", lw=1, color=MASKED, label="... launched from Python")
    ax.plot(x, [r["torch_us"] for r in pts], "-o", ms=3, color=TORCH, label="plain torch")
    comp = [r for r in pts if "compiled_us" in r]
    if comp:
        ax.plot([r["rows"] for r in comp], [r["compiled_us"] for r in comp], "-o", ms=3, color=COMPILED,
                label="torch.compile of it")
    ax.plot(x, [r["copy_us"] for r in pts], ":", color=COPY, label="copy, same bytes")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("rows")
    ax.set_ylabel("time (us)")
    ax.set_title(f"Sampling {vocab} tokens per row: one fused kernel vs torch")
    ax.legend(fontsize=7)
    return _finish(fig, record, "GPU time of a cold call (one-call CUDA graph, L2 flushed); "
                                "dashed: launched from Python")


def plot_sweep(record: dict, rows: int = 512, vocab: int = 151936) -> Figure:
    """What bounds the kernel: math level x block configuration, as a share of copy bandwidth."""
    fig = _figure(height=4.0)
    ax = fig.add_subplot(1, 1, 1)
    cfgs = [c for c in record.get("sweep", {}).get("configs", []) if c["rows"] == rows and c["vocab"] == vocab]
    variants = [("fast0", "libdevice logs, divide", "#fdd0a2"), ("fast1", "+ hardware lg2 (outer log)", "#9ecae1"),
                ("fast2", "+ inner log without special cases", MASKED),
                ("greedy", "no noise at all (floor)", COPY), ("no_store", "no q store (reads only)", "#bdbdbd")]
    width = 0.16
    x = list(range(len(cfgs)))
    for i, (key, label, color) in enumerate(variants):
        ax.bar([v + (i - 2) * width for v in x], [c["copy_ms"] / c["ms"][key] for c in cfgs], width,
               color=color, label=label)
    ax.axhline(0.7, color=EAGER, lw=0.8, ls="--")
    ax.text(len(cfgs) - 0.5, 0.7, "70%", color=EAGER, fontsize=7, va="bottom", ha="right")
    ax.set_ylim(0, 1.45)
    ax.set_xticks(x, [f"{c['block_v']}/{c['num_warps']}w" for c in cfgs], fontsize=8)
    ax.set_xlabel("BLOCK_V / warps per program")
    ax.set_ylabel("share of copy bandwidth")
    ax.set_title(f"What bounds the kernel ({rows} x {vocab})")
    ax.legend(fontsize=6.5, ncol=3, loc="upper center")
    return _finish(fig, record, "no_store counts read bytes only, so it may pass 100% of a read+write copy")


def plot_graph_vs_eager(record: dict) -> Figure:
    """One draft step (k x forward + sampling): graph replay against eager launches."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    sizes = record.get("graphs", {}).get("sizes", [])
    x = list(range(len(sizes)))
    width = 0.27
    for i, (key, label, color) in enumerate([("graph", "graph replay", GRAPH),
                                             ("eager_launches", "eager launches", EAGER),
                                             ("eager", "kit eager (host checks)", "#fc9272")]):
        ax.bar([v + (i - 1) * width for v in x], [e["ms"][key] * 1e3 for e in sizes], width, color=color, label=label)
    for v, e in zip(x, sizes):
        ax.text(v, e["ms"]["eager_launches"] * 1e3, f"{e['speedup_vs_eager_launches']:.1f}x", ha="center",
                va="bottom", fontsize=7)
    ax.set_xticks(x, [str(e["rows"]) for e in sizes])
    ax.set_xlabel("batch size (rows)")
    ax.set_ylabel("time per draft step (us)")
    k = sizes[0]["k"] if sizes else "k"
    ax.set_title(f"Why drafters run in CUDA graphs: {k} draft steps, toy model")
    ax.legend(fontsize=7)
    return _finish(fig, record, "labels: eager launches / graph replay")


def plot_staircase(record: dict) -> Figure:
    """Time against live rows: graphs pay for the padded size, eager for the live rows."""
    fig = _figure(width=9.0, height=3.8)
    st = staircase_data(record)
    ax1 = fig.add_subplot(1, 2, 1)
    toy = st.get("toy", {}).get("points", [])
    if toy:
        lv = [p["live"] for p in toy]
        ax1.step(lv, [p["ms"]["graph"] * 1e3 for p in toy], where="mid", color=GRAPH, label="graph (padded)")
        ax1.plot(lv, [p["ms"]["eager_launches"] * 1e3 for p in toy], ".", ms=3, color=EAGER, label="eager (live rows)")
        ax1.set_yscale("log")
        for s in st["toy"]["capture_sizes"]:
            ax1.axvline(s, color=COPY, lw=0.4, alpha=0.5)
        ax1.legend(fontsize=7)
    else:
        ax1.text(0.5, 0.5, "no toy staircase in this record", ha="center", transform=ax1.transAxes)
    ax1.set_xlabel("live rows")
    ax1.set_ylabel("time (us)")
    ax1.set_title("toy draft step", fontsize=9)
    ax2 = fig.add_subplot(1, 2, 2)
    kern = st.get("kernel", {}).get("points", [])
    if kern:
        lv = [p["live"] for p in kern]
        ax2.plot(lv, [p["ms"]["graph_masked"] * 1e3 for p in kern], "-o", ms=2.5, color=MASKED,
                 label="graph of padded size, masked")
        ax2.plot(lv, [p["ms"]["graph_early_exit"] * 1e3 for p in kern], "-o", ms=2.5, color=EARLY,
                 label="... with early exit")
        ax2.plot(lv, [p["ms"]["eager"] * 1e3 for p in kern], "-o", ms=2.5, color=COPY, label="exactly the live rows")
        ax2.set_xscale("log", base=2)
        ax2.set_yscale("log")
        for s in st["kernel"]["capture_sizes"]:
            ax2.axvline(s, color=COPY, lw=0.4, alpha=0.5)
        ax2.set_title(f"sampling kernel, V={st['kernel']['vocab']}", fontsize=9)
        ax2.legend(fontsize=7)
    else:
        ax2.text(0.5, 0.5, "no kernel staircase in this record", ha="center", transform=ax2.transAxes)
    ax2.set_xlabel("live rows")
    fig.suptitle("The padding staircase (grey lines: capture sizes)", fontsize=10)
    fig.subplots_adjust(wspace=0.25)
    return _finish(fig, record)


def staircase_data(record: dict) -> dict:
    """{'toy': ..., 'kernel': ...} from a record (sections 'staircase_toy' and 'staircase_kernel',
    or an older combined 'staircase'); parts that failed or are missing are left out."""
    old = record.get("staircase", {}) if isinstance(record.get("staircase"), dict) else {}
    out = {}
    for part in ("toy", "kernel"):
        data = record.get(f"staircase_{part}", old.get(part))
        if isinstance(data, dict) and "error" not in data and data.get("points"):
            out[part] = data
    return out


def plot_tokens_per_s(record: dict) -> Figure:
    """End-to-end tokens/s of the toy engine, per mode (median of repeated runs)."""
    fig = _figure(width=6.0)
    ax = fig.add_subplot(1, 1, 1)
    e2e = record.get("e2e", {})
    med = e2e.get("median_tokens_per_s", {})
    names = list(med)
    colors = {"eager": EAGER, "graph-fixed": GRAPH, "graph-buggy": "#fdae6b"}
    ax.bar(names, [med[n] for n in names], color=[colors.get(n, COPY) for n in names])
    runs = e2e.get("runs", [])
    for i, n in enumerate(names):
        vals = [r[n]["tokens_per_s"] for r in runs if n in r]
        ax.plot([i] * len(vals), vals, "k.", ms=3)
        ax.text(i, med[n], f"{med[n]:.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("emitted tokens / s")
    ax.set_title("Toy engine end to end, 50 prompts")
    return _finish(fig, record, "dots: single runs; the toy engine is bound by Python, not by the GPU")


FIGURES = {
    "timing_kernel_bandwidth.png": plot_kernel_bandwidth,
    "timing_masked_vs_unmasked.png": plot_masked_vs_unmasked,
    "timing_early_exit.png": plot_early_exit,
    "timing_kernel_vs_torch.png": plot_kernel_vs_torch,
    "timing_what_bounds_the_kernel.png": plot_sweep,
    "timing_graph_vs_eager.png": plot_graph_vs_eager,
    "timing_padding_staircase.png": plot_staircase,
    "timing_tokens_per_s.png": plot_tokens_per_s,
}
_NEEDS = {"timing_kernel_bandwidth.png": "kernel", "timing_masked_vs_unmasked.png": "kernel",
          "timing_early_exit.png": "kernel", "timing_kernel_vs_torch.png": "kernel",
          "timing_what_bounds_the_kernel.png": "sweep", "timing_graph_vs_eager.png": "graphs",
          "timing_tokens_per_s.png": "e2e"}


def available_figures(record: dict) -> list[str]:
    """Names of the figures this record has data for (a section that failed has an 'error')."""
    names = [name for name, section in _NEEDS.items()
             if isinstance(record.get(section), dict) and "error" not in record[section]]
    if staircase_data(record):
        names.append("timing_padding_staircase.png")
    return [n for n in FIGURES if n in names]


# -- CPU fallback -------------------------------------------------------------------------------------

def cpu_record(rows=(1, 4, 16, 64), vocab: int = 32000, repeats: int = 5) -> dict:
    """What can be measured without a GPU, shaped like a GPU record's 'kernel' and 'graphs' sections.

    Kernel: the torch reference of the masked and unmasked sampling (the Triton kernel on the CPU
    runs in an interpreter, whose speed says nothing about a GPU). Draft step: eager against the
    emulated graph runner, which replays the same Python: equal times, no launch overhead saved.
    """
    import platform

    import torch

    from labkit.kernels.gumbel import gumbel_sample_torch

    def best_ms(fn):
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    g = torch.Generator().manual_seed(0)
    sizes = []
    for n in rows:
        logits = torch.randn(n, vocab, generator=g)
        slots = torch.arange(n, dtype=torch.int32)
        temp, seeds = torch.full((n,), 0.8), torch.arange(n)
        pos = torch.zeros(n, dtype=torch.int64)
        q = torch.empty(n, 1, vocab)
        src = torch.randn(n * vocab, generator=g)
        dst = torch.empty_like(src)
        masked = best_ms(lambda: gumbel_sample_torch(logits, slots, temp, seeds, pos, q, 0, masked=True))
        unmasked = best_ms(lambda: gumbel_sample_torch(logits, slots, temp, seeds, pos, q, 0, masked=False))
        copy = best_ms(lambda: dst.copy_(src))
        sizes.append({"rows": n, "vocab": vocab, "bytes": 8 * n * vocab,
                      "ms": {"copy": copy, "masked": masked, "unmasked": unmasked, "masked_call": masked,
                             "torch": masked}})
    return {
        "provenance": {"cpu_measured": True, "device": platform.processor() or platform.machine(),
                       "torch": torch.__version__, "triton": None,
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "kernel": {"sizes": sizes},
    }


def plot_cpu_kernel(record: dict) -> Figure:
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    table = kernel_table(record)
    x = [r["rows"] for r in table]
    ax.plot(x, [r["masked_us"] / 1e3 for r in table], "-o", color=MASKED, ms=3, label="torch reference, masked")
    ax.plot(x, [r["unmasked_us"] / 1e3 for r in table], "--", color=UNMASKED, label="torch reference, unmasked")
    ax.plot(x, [r["copy_us"] / 1e3 for r in table], ":", color=COPY, label="copy, same bytes")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("rows")
    ax.set_ylabel("time (ms)")
    ax.set_title("CPU-measured: sampling with the torch reference (no GPU record)")
    ax.legend(fontsize=7)
    return _finish(fig, record, "CPU timings; they say nothing about the GPU kernel")


# -- saving -------------------------------------------------------------------------------------------

def save_timing_figures(outdir="figures", record: dict | None = None, *, data_dir=None, log=print) -> list[Path]:
    """Write the timing figures as PNGs into `outdir`; returns the paths.

    Uses `record`, else the newest record in `data_dir` (default labkit/data/gpu/). With none, says
    so and writes a CPU-measured figure instead (labelled as such on the plot)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    record = record if record is not None else load_record(data_dir=data_dir)
    paths = []
    if not record:
        log("labkit.viz.timing_plots: no GPU record in labkit/data/gpu/ (python -m labkit.gpu.sections --out DIR on a "
            "GPU makes one); plotting CPU-measured figures instead, labelled as such")
        cpu = cpu_record()
        path = out / "timing_cpu_measured.png"
        plot_cpu_kernel(cpu).savefig(path, dpi=DPI, metadata={"Software": None})
        return [path]
    for name in available_figures(record):
        path = out / name
        FIGURES[name](record).savefig(path, dpi=DPI, metadata={"Software": None})
        paths.append(path)
    return paths
