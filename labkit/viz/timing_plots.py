"""Timing plots, drawn from a recorded GPU run (see :mod:`labkit.viz.gpu_records`) on any machine.

    plot_kernel_bandwidth(record)     the masked kernel's GB/s against a same-bytes copy
    plot_masked_vs_unmasked(record)   what the fix's mask costs in the kernel
    plot_early_exit(record)           a half-padded batch: masked, early exit, live rows alone
    plot_kernel_vs_torch(record)      the fused kernel against plain torch and torch.compile
    plot_sweep(record)                what bounds the kernel: math level x block configuration
    plot_graph_vs_eager(record)       one draft step replayed from a CUDA graph against eager launches
    plot_staircase(record)            time against live rows: graphs pay for the padded size
    plot_tokens_per_s(record)         the toy engine end to end, per mode
    plot_peers(record)                the kit beside vLLM's and FlashInfer's samplers, a read-only pass and a copy

Every figure prints, under the plot, the device, machine, driver, CUDA, torch and Triton versions and
the date of the sections it was drawn from (each section's own: a record gathers several runs).
Figures use ``matplotlib.figure.Figure`` (no pyplot state), fixed sizes and no randomness. Red is
kept for corrupted output and green for right output, as in every figure of the kit; graph replays
are dark blue.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from labkit.viz.gpu_records import kernel_table, section_caption, staircase_data
from labkit.viz.style import BAD_COLOR, CAPTION_COLOR, CAPTION_GID, CAPTION_SIZE, legible

MASKED, UNMASKED, COPY, TORCH, COMPILED = "#3182bd", "#9ecae1", "#636363", "#e6550d", "#fdae6b"
GRAPH, EAGER, KIT_EAGER, EARLY = "#08306b", "#8c6d31", "#c7b07a", "#756bb1"
# Each vocabulary its own colour and marker (none of them red or green: those mean corrupted and right).
VOCAB_LOOK = {151936: ("#3182bd", "o"), 128256: ("#756bb1", "s"), 32000: ("#8c6d31", "^")}
US = "\u00b5s"  # microseconds
TARGET_SHARE = 70  # percent of copy bandwidth: the kit's goal for its kernel at large sizes


CAPTION_LINES_ALLOWED = 2  # the caption lines new_figure's bottom margins leave room for


def finish(fig: Figure, record: dict | None, note: str = "", sections: tuple[str, ...] = ()) -> Figure:
    """Write the provenance of the record's `sections` the figure draws (and `note`) under the plot;
    a caption of more lines than the margin allows (sections measured on different machines each
    get a line) raises the axes by the extra lines."""
    text = section_caption(record, *sections) + (f"\n{note}" if note else "")
    size = legible(CAPTION_SIZE, fig)
    extra = text.count("\n") + 1 - CAPTION_LINES_ALLOWED
    if extra > 0:
        raise_by = extra * 1.25 * size / 72 / fig.get_figheight()  # line height in figure fractions
        fig.subplots_adjust(bottom=fig.subplotpars.bottom + raise_by)
    fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=size, color=CAPTION_COLOR, gid=CAPTION_GID)
    return fig


def new_figure(width=7.2, height=3.8, bottom=0.22, left=0.12) -> Figure:
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(bottom=bottom, top=0.88, left=left, right=0.97)
    return fig


def plot_kernel_bandwidth(record: dict, vocabs=(151936, 128256, 32000)) -> Figure:
    """Effective bandwidth of the masked kernel against the same-bytes copy, per batch size: each
    vocabulary its own colour and marker; the kernel solid with filled markers, the copy dotted."""
    fig = new_figure(height=4.1, bottom=0.25)
    ax = fig.add_subplot(1, 1, 1)
    table = kernel_table(record)
    for vocab in vocabs:
        pts = [r for r in table if r["vocab"] == vocab]
        if not pts:
            continue
        x = [r["rows"] for r in pts]
        color, marker = VOCAB_LOOK.get(vocab, (MASKED, "o"))
        ax.plot(x, [r["masked_gbs"] for r in pts], "-", color=color, marker=marker, ms=4,
                label=f"masked kernel, V={vocab}")
        ax.plot(x, [r["copy_gbs"] for r in pts], ":", color=color, marker=marker, ms=4, mfc="white", lw=1,
                label=f"copy of the same bytes, V={vocab}")
    peak = record.get("peak_copy", {}).get("gb_per_s", 0)
    if peak:
        ax.axhline(peak, color=COPY, lw=0.6, alpha=0.6)
        ax.text(512, peak, f"peak copy (2 GiB): {peak:.0f} GB/s ", va="bottom", ha="right", fontsize=7, color=COPY)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.45 * max([peak] + [r["copy_gbs"] for r in table]))  # the legend above the curves
    ax.set_xlabel("rows (batch size)")
    ax.set_ylabel("effective bandwidth (GB/s)\nread logits + write q")
    ax.set_title("Gumbel sampling kernel vs device-to-device copy")
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    return finish(fig, record, "the kernel alone: a CUDA graph of one launch, L2 flushed before each replay; "
                               "medians of CUDA-event timings", ("kernel", "peak_copy"))


def masked_band(record: dict) -> tuple[float, float]:
    """The lowest and highest masked/unmasked ratio (warm replays) over every recorded shape: the
    band plot_masked_vs_unmasked shades, and the range notebook 04 prints under it."""
    ratios = [r["masked_over_unmasked"] for r in kernel_table(record)]
    return min(ratios), max(ratios)


def plot_masked_vs_unmasked(record: dict) -> Figure:
    """Time of the masked kernel over the unmasked one, same live rows: the fix's cost. Warm
    back-to-back CUDA-graph replays, interleaved; the band is the range over every recorded shape."""
    fig = new_figure(left=0.14)  # room for the two-line y label beside 5-character tick labels
    ax = fig.add_subplot(1, 1, 1)
    table = kernel_table(record)
    for vocab in sorted({r["vocab"] for r in table}):
        pts = [r for r in table if r["vocab"] == vocab]
        color, marker = VOCAB_LOOK.get(vocab, (MASKED, "o"))
        ax.plot([r["rows"] for r in pts], [r["masked_over_unmasked"] for r in pts], "-", marker=marker, ms=4,
                color=color, label=f"V={vocab}")
    ax.axhline(1.0, color=COPY, lw=0.8)
    if table:
        lo, hi = masked_band(record)
        ax.axhspan(lo, hi, color=COPY, alpha=0.12, label=f"every recorded shape: {lo:.2f}-{hi:.2f}")
    ax.set_ylim(0.9, 1.1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rows (all live)")
    ax.set_ylabel("masked time / unmasked time\n(ratio, 1 = same time)")
    ax.set_title("What the fix costs in the kernel: nothing measurable")
    ax.legend(fontsize=7)
    return finish(fig, record, "GPU time from warm back-to-back CUDA-graph replays, masked and unmasked "
                               "interleaved (no launch overhead)", ("kernel",))


def plot_early_exit(record: dict, vocab: int = 151936) -> Figure:
    """A half-padded batch: masked, masked with early exit, and the live rows alone."""
    fig = new_figure()
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
    ax.set_ylabel(f"time per launch ({US})")
    ax.set_title("Early exit: a padded row skips its loads too")
    ax.legend(fontsize=7)
    return finish(fig, record, sections=("kernel",))


NATURAL_SAMPLERS = {"rand_gumbel": ("s", "torch sampler: torch.rand Gumbel + argmax"),
                    "multinomial": ("^", "torch sampler: softmax + torch.multinomial")}


def _natural_points(record: dict, vocab: int, name: str) -> list[tuple[int, float]]:
    """(rows, microseconds) of a natural torch sampler from the record's 'torch_natural' section."""
    section = record.get("torch_natural", {})
    if not isinstance(section, dict) or "error" in section:
        return []
    return [(e["rows"], e["ms"][name] * 1e3) for e in section.get("sizes", [])
            if e.get("vocab", section.get("vocab")) == vocab and name in e.get("ms", {})]


def plot_kernel_vs_torch(record: dict, vocab: int = 151936) -> Figure:
    """The kernel call against torch: a port of the kit's own hash noise (and torch.compile of it),
    and, where recorded, the samplers one would write in torch (torch.rand Gumbel, multinomial)."""
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    pts = [r for r in kernel_table(record) if r["vocab"] == vocab]
    x = [r["rows"] for r in pts]
    ax.plot(x, [r["call_us"] for r in pts], "-o", ms=3, color=MASKED, label="Triton kernel (whole call)")
    if all("eager_call_us" in r for r in pts):
        ax.plot(x, [r["eager_call_us"] for r in pts], "--", lw=1, color=MASKED, label="... launched from Python")
    ax.plot(x, [r["torch_us"] for r in pts], "-o", ms=3, color=TORCH, label="torch port of the kit's hash noise")
    comp = [r for r in pts if "compiled_us" in r]
    if comp:
        ax.plot([r["rows"] for r in comp], [r["compiled_us"] for r in comp], "-o", ms=3, color=COMPILED,
                label="torch.compile of that port")
    for name, (marker, label) in NATURAL_SAMPLERS.items():
        nat = _natural_points(record, vocab, name)
        if nat:
            ax.plot(*zip(*nat, strict=True), marker, ms=6, color=TORCH, ls="none", label=label)
    ax.plot(x, [r["copy_us"] for r in pts], ":", color=COPY, label="copy, same bytes")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("rows (batch size)")
    ax.set_ylabel(f"time per call ({US})")
    ax.set_title(f"Sampling {vocab} tokens per row: one fused kernel vs torch")
    ax.legend(fontsize=7)
    return finish(fig, record, "GPU time of a cold call (one-call CUDA graph, L2 flushed); "
                               "dashed: launched from Python; markers: the torch samplers", ("kernel", "torch_natural"))


SWEEP_VARIANTS = (("fast0", "libdevice logs, divide", "#fdd0a2"), ("fast1", "+ hardware lg2 (outer log)", "#9ecae1"),
                  ("fast2", "+ inner log without special cases", MASKED),
                  ("greedy", "no noise at all (floor)", COPY), ("no_store", "no q store (reads only)", "#bdbdbd"))


def plot_sweep(record: dict, rows: int = 512, vocab: int = 151936) -> Figure:
    """What bounds the kernel: math level x block configuration, as a share of copy bandwidth."""
    fig = new_figure(height=4.0)
    ax = fig.add_subplot(1, 1, 1)
    cfgs = [c for c in record.get("sweep", {}).get("configs", []) if c["rows"] == rows and c["vocab"] == vocab]
    width = 0.16
    x = list(range(len(cfgs)))
    for i, (key, label, color) in enumerate(SWEEP_VARIANTS):
        ax.bar([v + (i - 2) * width for v in x], [100 * c["copy_ms"] / c["ms"][key] for c in cfgs], width,
               color=color, label=label)
    ax.axhline(TARGET_SHARE, color=COPY, lw=0.9, ls="--",
               label=f"the kit's goal for its kernel: {TARGET_SHARE}% of copy bandwidth")
    ax.set_ylim(0, 145)
    ax.set_xticks(x, [f"{c['block_v']}/{c['num_warps']}w" for c in cfgs], fontsize=8)
    ax.set_xlabel("BLOCK_V (vocab entries per program) / warps per program")
    ax.set_ylabel("share of copy bandwidth (%)")
    ax.set_title(f"What bounds the kernel ({rows} x {vocab})")
    ax.legend(fontsize=6.5, ncol=3, loc="upper center")
    return finish(fig, record, "no_store counts read bytes only, so it may pass 100% of a read+write copy",
                  ("sweep",))


def plot_graph_vs_eager(record: dict) -> Figure:
    """One draft step (k x forward + sampling): graph replay against eager launches."""
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    sizes = record.get("graphs", {}).get("sizes", [])
    x = list(range(len(sizes)))
    width = 0.27
    for i, (key, label, color) in enumerate([("graph", "graph replay", GRAPH),
                                             ("eager_launches", "eager launches", EAGER),
                                             ("eager", "kit eager (host checks)", KIT_EAGER)]):
        ax.bar([v + (i - 1) * width for v in x], [e["ms"][key] * 1e3 for e in sizes], width, color=color, label=label)
    for v, e in zip(x, sizes, strict=True):
        ax.text(v, e["ms"]["eager_launches"] * 1e3, f"{e['speedup_vs_eager_launches']:.1f}x", ha="center",
                va="bottom", fontsize=7)
    ax.set_xticks(x, [str(e["rows"]) for e in sizes])
    ax.set_xlabel("batch size (rows)")
    ax.set_ylabel(f"time per draft step ({US})")
    k = sizes[0]["k"] if sizes else "k"
    ax.set_title(f"Why drafters run in CUDA graphs: {k} draft steps, toy model")
    tallest = max([e["ms"][key] * 1e3 for e in sizes for key in ("graph", "eager_launches", "eager")] + [1])
    ax.set_ylim(0, 1.35 * tallest)  # room above the bars for the legend, in one row
    ax.legend(fontsize=7, ncol=3, loc="upper center")
    return finish(fig, record, "labels: eager launches / graph replay; the eager side is host-bound and varies "
                               "between runs", ("graphs",))


def _toy_staircase(ax, toy: dict | None) -> None:
    if not toy:
        ax.text(0.5, 0.5, "no toy staircase in this record", ha="center", transform=ax.transAxes)
    else:
        lv = [p["live"] for p in toy["points"]]
        ax.step(lv, [p["ms"]["graph"] * 1e3 for p in toy["points"]], where="mid", color=GRAPH, label="graph (padded)")
        ax.plot(lv, [p["ms"]["eager_launches"] * 1e3 for p in toy["points"]], ".", ms=3, color=EAGER,
                label="eager (live rows), measured in\norder of live rows: see below")
        ax.set_yscale("log")
        for s in toy["capture_sizes"]:
            ax.axvline(s, color=COPY, lw=0.4, alpha=0.5)
        ax.legend(fontsize=7)
    ax.set_xlabel("live rows")
    ax.set_ylabel(f"time per draft step ({US})")
    ax.set_title("toy draft step", fontsize=9)


def _kernel_staircase(ax, kern: dict | None) -> None:
    if not kern:
        ax.text(0.5, 0.5, "no kernel staircase in this record", ha="center", transform=ax.transAxes)
    else:
        lv = [p["live"] for p in kern["points"]]
        for key, label, color in (("graph_masked", "graph of padded size, masked", MASKED),
                                  ("graph_early_exit", "... with early exit", EARLY),
                                  ("eager", "exactly the live rows", COPY)):
            ax.plot(lv, [p["ms"][key] * 1e3 for p in kern["points"]], "-o", ms=2.5, color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        for s in kern["capture_sizes"]:
            ax.axvline(s, color=COPY, lw=0.4, alpha=0.5)
        ax.set_title(f"sampling kernel, V={kern['vocab']}", fontsize=9)
        ax.legend(fontsize=7)
    ax.set_xlabel("live rows")
    ax.set_ylabel(f"time per launch ({US})")


def plot_staircase(record: dict) -> Figure:
    """Time against live rows: graphs pay for the padded size, eager for the live rows."""
    fig = new_figure(width=9.0, height=3.8)
    st = staircase_data(record)
    _toy_staircase(fig.add_subplot(1, 2, 1), st.get("toy"))
    _kernel_staircase(fig.add_subplot(1, 2, 2), st.get("kernel"))
    fig.suptitle("The padding staircase (grey lines: capture sizes)", fontsize=10)
    fig.subplots_adjust(wspace=0.3, bottom=0.3)
    return finish(fig, record, "left: the eager points fall in two bands because the host launched faster in "
                               "one stretch of the run (measured in order of live rows), not because of the "
                               "row count;\nthe graph replays, timed in the same loop on the GPU, barely move",
                  ("staircase_toy", "staircase_kernel"))


def _corrupted_range(runs: list[dict], mode: str) -> tuple[int, int, int] | None:
    """(fewest, most corrupted, responses) of `mode` over the recorded runs; None if not recorded."""
    found = [(r[mode]["corrupted"], r[mode]["responses"]) for r in runs if "corrupted" in r.get(mode, {})]
    if not found:
        return None
    return min(c for c, _ in found), max(c for c, _ in found), found[0][1]


def plot_tokens_per_s(record: dict) -> Figure:
    """End-to-end tokens/s of the toy engine, per mode (median of repeated runs); red: corrupted output."""
    fig = new_figure(width=6.4, height=4.0, bottom=0.24, left=0.15)
    ax = fig.add_subplot(1, 1, 1)
    e2e = record.get("e2e", {})
    med, runs = e2e.get("median_tokens_per_s", {}), e2e.get("runs", [])
    names = list(med)
    for i, name in enumerate(names):
        bad = _corrupted_range(runs, name)
        color = BAD_COLOR if bad and bad[1] > 0 else (EAGER if name.endswith("eager") else GRAPH)
        ax.bar(i, med[name], color=color)
        vals = [r[name]["tokens_per_s"] for r in runs if name in r]
        ax.plot([i] * len(vals), vals, "k.", ms=3)
        note = f"{med[name]:.0f}"
        if bad:
            fewest, most, n = bad
            note += f"\n{fewest}-{most} of {n} corrupted" if fewest != most else f"\n{most} of {n} corrupted"
        ax.text(i, max([med[name]] + vals), note, ha="center", va="bottom", fontsize=7.5)
    ax.set_xticks(range(len(names)), names)
    tallest = max([m.get("tokens_per_s", 0) for r in runs for m in r.values()] + list(med.values()) + [1])
    ax.set_ylim(0, 1.25 * tallest)
    ax.set_xlabel("mode (red: its responses were corrupted)")
    ax.set_ylabel("emitted tokens per second")
    prompts = e2e.get("config", {}).get("prompts")
    ax.set_title("Toy engine end to end" + (f", {prompts} prompts" if prompts else ""))
    return finish(fig, record, "bars: median of runs; dots: single runs; the toy engine is bound by Python, "
                               "not by the GPU", ("e2e",))


# The calls of section "peers", in the order they are drawn: (key, label, colour). The kit in the
# kit's blue, the peers in the torch colours, the references grey.
PEER_LOOK = (("kit_q", "kit, storing q", MASKED), ("vllm_q", "vLLM gumbel_sample, storing q", TORCH),
             ("copy", "copy of the same bytes", COPY), ("kit_no_q", "kit without q", UNMASKED),
             ("vllm_no_q", "vLLM without its store", COMPILED), ("flashinfer", "FlashInfer SamplingFromLogits", EARLY),
             ("read_only", "read-only pass", "#bdbdbd"))


def plot_peers(record: dict, vocab: int = 151936) -> Figure:
    """The kit's call beside vLLM's and FlashInfer's samplers and the two references, per batch size
    (section ``peers``): GPU time of a cold call, one-call CUDA graph, L2 flushed. A peer the run
    could not time is missing from the plot and named in the caption."""
    from labkit.viz.gpu_records import peers_section, peers_skipped

    fig = new_figure(height=4.0)
    ax = fig.add_subplot(1, 1, 1)
    section = peers_section(record) or {"sizes": []}
    sizes = [e for e in section["sizes"] if e["vocab"] == vocab]
    drawn = [look for look in PEER_LOOK if any(look[0] in e["ms"] for e in sizes)]
    width = 0.8 / max(len(drawn), 1)
    for i, (key, label, color) in enumerate(drawn):
        xs = [j + (i - (len(drawn) - 1) / 2) * width for j, e in enumerate(sizes) if key in e["ms"]]
        ax.bar(xs, [1e3 * e["ms"][key] for e in sizes if key in e["ms"]], width, color=color, label=label)
    ax.set_xticks(range(len(sizes)), [f"{e['rows']} rows" for e in sizes])
    ax.set_xlabel("rows (batch size)")
    ax.set_ylabel(f"time per call ({US})")
    ax.set_title(f"Sampling {vocab} tokens per row: the kit beside the samplers engineers use")
    ax.legend(fontsize=6.5, ncol=2, loc="upper left")
    skipped = peers_skipped(record)
    note = "not timed in this run: " + ", ".join(sorted(skipped)) if skipped else "every peer checked, then timed"
    return finish(fig, record, note, ("peers",))
