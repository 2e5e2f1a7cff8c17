"""The kernel's blocks: its bandwidth, the mask's cost, torch and graphs, end to end, early exit; all
from the GPU record's sections, each named with the run it comes from."""

from __future__ import annotations

from labkit import records
from labkit.docgen.prose import date_of, pct, span, when_measured
from labkit.docgen.sources import gpu_records

BIG = (256 * 151936)  # rows x vocab from which the kernel's claims are made (the headline sizes)
REAL_VOCAB = 151936


def kernel_numbers(record: dict) -> dict:
    """The kernel section's claims: shares of copy, the mask's cost, the speed-ups over torch."""
    g = gpu_records()
    table = g.kernel_table(record)
    big = [r for r in table if r["rows"] * r["vocab"] >= BIG]
    real = [r for r in big if r["vocab"] == REAL_VOCAB]
    natural = [s for s in record.get("torch_natural", {}).get("sizes", []) if s["vocab"] == REAL_VOCAB]
    return {
        "big_shapes": [(r["rows"], r["vocab"]) for r in big],
        "real_rows": [r["rows"] for r in real],
        "share_of_copy": [r["share_of_copy"] for r in real],
        "share_of_peak_copy": [r["share_of_peak_copy"] for r in real],
        "peak_copy_gbs": record["peak_copy"]["gb_per_s"],
        "cold_ratio_64_up": [r["masked_over_unmasked_cold"] for r in table if r["rows"] >= 64],
        "cold_ratio_all": [r["masked_over_unmasked_cold"] for r in table],
        "warm_ratio_all": [r["masked_over_unmasked"] for r in table],
        "rows": sorted({r["rows"] for r in table}),
        "vocabs": sorted({r["vocab"] for r in table}),
        "vs_compiled": [r["speedup_vs_compiled"] for r in big if "speedup_vs_compiled" in r],
        "vs_rand_gumbel": [s["kernel_faster_by"]["rand_gumbel"] for s in natural],
        "vs_multinomial": [s["kernel_faster_by"]["multinomial"] for s in natural],
        "vs_hash_port": [s["kernel_faster_by"]["hash_port"] for s in natural],
        "natural_rows": [s["rows"] for s in natural],
    }


def graph_numbers(record: dict) -> dict:
    """Every recorded graphs run: graph replay times, eager-launch times and speed-ups, run by run."""
    runs = []
    for stamp, data in gpu_records().graph_runs(record):
        sizes = data.get("sizes", [])
        if not sizes:
            continue
        runs.append({"stamp": stamp, "rows": [e["rows"] for e in sizes], "k": sizes[0]["k"],
                     "graph_us": [1e3 * e["ms"]["graph"] for e in sizes],
                     "eager_ms": [e["ms"]["eager_launches"] for e in sizes],
                     "speedup": [e["speedup_vs_eager_launches"] for e in sizes]})
    return {"runs": runs}


def e2e_numbers(record: dict) -> dict:
    e2e = record.get("e2e", {})
    shipped = e2e.get("as_shipped", {}).get("graph-fixed", {})
    fixed = [run["graph-fixed"]["identical_to_eager"] for run in e2e.get("runs", []) if "graph-fixed" in run]
    return {"responses": shipped.get("responses"), "as_shipped": shipped.get("identical_to_eager"),
            "with_rowwise": fixed, "rowwise": e2e.get("rowwise_triton_swapped_in")}


def _shape_list(shapes) -> str:
    by_vocab: dict[int, list[int]] = {}
    for rows, vocab in shapes:
        by_vocab.setdefault(vocab, []).append(rows)
    return " and ".join(f"{span(rows, '{:d}')} x {vocab}" for vocab, rows in sorted(by_vocab.items(), reverse=True))


def render_kernel(record: dict) -> str:
    g = gpu_records()
    k, gr, e = kernel_numbers(record), graph_numbers(record), e2e_numbers(record)
    kp, tp = g.section_provenance(record, "kernel"), g.section_provenance(record, "torch_natural")
    real = f"{span(k['real_rows'], '{:d}')} x {REAL_VOCAB}"
    lines = [
        f"- at {real} the masked kernel moves its bytes (read the logits, write q) at {pct(k['share_of_copy'])} "
        f"of the bandwidth of a device-to-device copy of the same bytes, timed beside it, and at "
        f"{pct(k['share_of_peak_copy'])} of the run's peak copy (2 GiB each way, "
        f"{k['peak_copy_gbs']:.0f} GB/s); cold calls: a CUDA graph of one launch, L2 flushed before each "
        f"replay (`kernel`, {when_measured(kp)});",
        f"- masked over unmasked kernel time, cold calls: {span(k['cold_ratio_64_up'])} at 64 rows and up, "
        f"{span(k['cold_ratio_all'])} at every recorded shape ({span(k['rows'], '{:d}')} rows, vocabularies "
        f"of {min(k['vocabs'])} to {max(k['vocabs'])}); warm back-to-back replays, as notebook 04 plots them: "
        f"{span(k['warm_ratio_all'])}. The fix costs nothing measurable;",
        f"- at {span(k['natural_rows'], '{:d}')} x {REAL_VOCAB} the kernel's whole call is "
        f"{span(k['vs_rand_gumbel'], '{:.1f}', 'x')} faster than a natural torch sampler (Gumbel noise from "
        f"`torch.rand`, same distribution, other tokens), {span(k['vs_multinomial'], '{:.1f}', 'x')} faster "
        f"than `torch.multinomial` over the softmax and {span(k['vs_hash_port'], '{:.0f}', 'x')} faster than "
        f"a torch port of the kit's own hash noise (same tokens) (`torch_natural`, {when_measured(tp)}); at "
        f"{_shape_list(k['big_shapes'])}, {span(k['vs_compiled'], '{:.1f}', 'x')} faster than "
        "`torch.compile` of that port (`kernel`); all cold CUDA-graph replays;",
    ]
    if gr["runs"]:
        runs = gr["runs"]
        per_run = "; ".join(f"{span(r['speedup'], '{:.0f}', 'x')} ({when_measured(r['stamp'])})" for r in runs)
        rows = sorted({n for r in runs for n in r["rows"]})
        lines.append(
            f"- one {runs[0]['k']}-step draft of the toy drafter ({rows[0]} to {rows[-1]} rows) replayed as a "
            f"CUDA graph took {span([u for r in runs for u in r['graph_us']], '{:.0f}', ' µs')} of GPU time "
            f"in every recorded run; launching the same kernels eagerly from Python took "
            f"{span([m for r in runs for m in r['eager_ms']], '{:.1f}', ' ms')}, which depends on the "
            f"host and varies from run to run, so the graph is "
            f"{span([s for r in runs for s in r['speedup']], '{:.0f}', 'x')} faster over {len(runs)} runs "
            f"(per run: {per_run});")
    if e["as_shipped"] is not None and e["with_rowwise"]:
        lines.append(
            f"- end to end, `graph-fixed` gives {span(e['with_rowwise'], '{:d}')} of {e['responses']} responses "
            "identical to eager on the GPU only with the batch-invariant row-wise Triton linear layer in the toy "
            f"models; as first shipped, with cuBLAS linear layers (whose rows change bits with the batch size), "
            f"{e['as_shipped']} of {e['responses']} (`e2e`, {when_measured(g.section_provenance(record, 'e2e'))}; "
            "notebook 08, section 6).")
    return "\n".join(lines)


def render_fix_cost(record: dict) -> str:
    stamp = gpu_records().section_provenance(record, "kernel")
    device = str(stamp.get("device", "GPU")).removeprefix("NVIDIA ")
    k = kernel_numbers(record)
    return (f"- **The fix's cost.** It touches only padded rows. On the {device}, masked over unmasked kernel time is "
            f"{span(k['cold_ratio_64_up'])} at 64 rows and up and {span(k['cold_ratio_all'])} at every recorded "
            f"shape ({span(k['rows'], '{:d}')} rows of {min(k['vocabs'])} to {max(k['vocabs'])}), timed as cold "
            f"calls; {span(k['warm_ratio_all'])} from warm back-to-back replays (notebook 04's plot). "
            f"`{records.GPU.relative_to(records.paths.REPO)}`, section `kernel`, {when_measured(stamp)}: "
            "the same within measurement noise.")


def render_early_exit(record: dict) -> str:
    """Notebook 04: early exit in row order (the run the record keeps for it) against this record."""
    g = gpu_records()
    cited = g.cited_run(record, "kernel", "early exit")
    then, now = g.early_exit_shares(cited["data"]), g.early_exit_shares(record["kernel"])
    when = date_of(cited.get("provenance") or {})
    return (f"In plain row order early exit cost {span(then['early_exit'])} of the masked launch (the run of "
            f"{when}, which the record keeps for this comparison); with the rows taken from both ends it costs "
            f"{span(now['early_exit'])}, beside {span(now['live_rows_only'])} for the live rows alone (64 to "
            f"512 rows, V={REAL_VOCAB}, half the rows padded).")
