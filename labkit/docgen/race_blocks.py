"""The race's blocks: which row's store lands, run by run, at the toy and the real vocabulary, and
compute-sanitizer's cases; all from the GPU record."""

from __future__ import annotations

from labkit.docgen.kernel_blocks import REAL_VOCAB
from labkit.docgen.prose import date_of, pct, span, when_measured
from labkit.docgen.sources import gpu_records


def _race_parts(record: dict):
    """The GPU-record reader, the race runs at the toy vocabulary and at the real one, and the real
    vocabulary's block layout (None if not recorded): what the README and MECHANICS both tell."""
    g = gpu_records()
    runs = g.race_runs(record)
    toy = [r for r in runs if r["vocab"] != REAL_VOCAB]
    real = [r for r in runs if r["vocab"] == REAL_VOCAB]
    blocks = next((e for e in g.race_block_entries(record) if e["vocab"] == REAL_VOCAB), None)
    return g, toy, real, blocks


def toy_race_span(record: dict) -> tuple[float, float, int]:
    """(lowest, highest) share of launches the padded row won at the toy vocabulary, and how many
    runs that spans: every recorded run, the superseded ones too (what "how often changes from run to
    run" stands on)."""
    shares = [r["padded_won"] / r["launches"] for r in gpu_records().race_runs(record, include_superseded=True)
              if r["vocab"] != REAL_VOCAB]
    return min(shares), max(shares), len(shares)


def render_race(record: dict) -> str:
    """README: the race in both recorded runs, and what memcheck sees."""
    g, toy, real, blocks = _race_parts(record)
    toy_txt = "; ".join(
        f"{r['padded_won']} of {r['launches']} launches ({r['padded_share']:.0%}) in run {r['run']}"
        + (" replayed from a CUDA graph" if r["graph"] else "") + f" ({date_of(r['provenance'])})" for r in toy)
    real_txt = ", ".join(f"{r['padded_share']:.0%} in run {r['run']}" + (" (graph)" if r["graph"] else "")
                         for r in real)
    text = (f"The stale store is a race on a GPU, not \"the padded row wins\" (details in `docs/MECHANICS.md`): at "
            f"a toy vocabulary of {toy[0]['vocab']} (one block per row) the padded row's store landed last in "
            f"{toy_txt}. At {REAL_VOCAB}"
            + (f" ({blocks['num_blocks']} blocks of {blocks['block_v']})" if blocks else "")
            + f" no row won a whole launch in {span([r['launches'] for r in real], '{:d}')} launches, in any run, "
            f"and q came out a per-block patchwork; the padded row's share of it: {real_txt} "
            "(`race` is run 1, `race_blocks` run 2; `figures/race_blocks.png` plots both).")
    san = record.get("sanitizer", {})
    if all(isinstance(san.get(c), dict) for c in ("fixed", "fill_only", "stale_slot")):
        audit = san["stale_slot"]["probe"]["audit"]
        when = when_measured(g.section_provenance(record, "sanitizer"))
        text += (
            f"\n\nCompute-sanitizer's memcheck (`sanitizer`, {when}) "
            f"finds {san['fixed']['errors']} errors in the fixed kernel and {san['fill_only']['invalid_reads']} "
            f"invalid reads when padded rows hold -1 but the kernel is unmasked (fill without mask). On the bug "
            f"itself (unmasked, the padded row still holding slot {audit['slot']}) it reports "
            f"{san['stale_slot']['errors']} errors, while in {audit['padded_values_in_live_q']} of "
            f"{audit['launches']} launches of that same run the padded row's values landed in live slot "
            f"{audit['slot']}'s q, which the padding-invariance audit's comparison (padded launch against the live "
            "rows alone) sees: every access is in bounds, so only the audit catches it.")
    return text


def render_race_mechanics(record: dict) -> str:
    """docs/MECHANICS.md: the race's sub-bullets."""
    g, toy, real, blocks = _race_parts(record)
    toy_lines = ", ".join(
        f"{r['padded_won']} of {r['launches']} ({r['padded_share']:.0%})" + (" replayed from a CUDA graph" if r["graph"]
                                                                            else "")
        + f" in run {r['run']} ({when_measured(r['provenance'])})" for r in toy)
    real_lines = ", ".join(f"{r['padded_share']:.1%}" + (" replayed from a graph" if r["graph"] else "")
                           + f" in run {r['run']}" for r in real)
    return (
        f"  - at a toy vocabulary of {toy[0]['vocab']} (one vocabulary block per row, so one store decides a "
        f"launch), the padded row's store landed last in {toy_lines}. How often it wins changes from run to run "
        f"({_toy_span_text(record)}); never count on either row;\n"
        f"  - at a vocabulary of {REAL_VOCAB}"
        + (f" ({blocks['num_blocks']} blocks of {blocks['block_v']} per row)" if blocks else "")
        + f", no row won a whole launch in {span([r['launches'] for r in real], '{:d}')} launches, in any run: "
        f"every time q[7] came out a patchwork of the two rows, block by block, with this share of its elements "
        f"from the padded row: {real_lines}. `figures/race_blocks.png` plots every run, the superseded ones too.")


def _toy_span_text(record: dict) -> str:
    lo, hi, n = toy_race_span(record)
    return f"{100 * lo:.0f}-{100 * hi:.0f}% of the launches over all {n} recorded runs, the superseded ones too"


def render_race_guide(record: dict) -> str:
    _, toy, real, _ = _race_parts(record)
    return ("*The race:* at a toy vocabulary one program stores a row's whole q, and each launch has one winner, "
            "but which one changes from launch to launch, and how often from run to run (the padded row won "
            + ", ".join(f"{r['padded_share']:.0%} of the launches in run {r['run']}"
                        + (" replayed from a graph" if r["graph"] else "") for r in toy)
            + f"; {_toy_span_text(record)}); at {REAL_VOCAB} every vocab block races on its own, and the warps "
            "inside a block too, so q is a "
            f"patchwork of both rows ({pct([r['padded_share'] for r in real])} from the padded row in the "
            "current runs). The fix removes the padded store rather than ordering it.")


def render_race_notebook(record: dict) -> str:
    """Notebook 04: the race at the real vocabulary and at the toy one, every run counted."""
    g, toy, real, blocks = _race_parts(record)
    all_runs = g.race_runs(record, include_superseded=True)
    earlier = [r for r in all_runs if r["superseded"] and r["vocab"] == REAL_VOCAB]
    toy_low = min(r["padded_won"] / r["launches"] for r in all_runs if r["vocab"] != REAL_VOCAB)
    layout = f" a row is {blocks['num_blocks']} blocks of {blocks['block_v']} (the compiled kernel's block), and" \
        if blocks else ""
    mixed = (" inside most blocks the two rows' stores interleave as well."
             if blocks and blocks["mixed_blocks"] > 0.5 * blocks["launches"] * blocks["num_blocks"] else "")
    lines = [
        f"* At a vocabulary of {toy[0]['vocab']} a row is one small block, so one store decides each launch. Which "
        "row wins changes from launch to launch, and how often changes from run to run: the plot's last row sets "
        "the current runs beside the ones they replaced, and over every recorded run the padded row won as few "
        f"as {toy_low:.0%} of the launches. Never count on either row.",
        f"* At {REAL_VOCAB}{layout} the live row's and the padded row's programs for each block race "
        f"separately;{mixed} No launch was won by either row: q came out a patchwork, "
        f"{pct([r['padded_share'] for r in real])} of it from the padded row in the current runs. In these runs a "
        "row's blocks are consecutive programs, so the padded row's programs start after the live row's."
        + (f" The {len(earlier)} runs they replaced (kept under `superseded`, and plotted) took "
           f"{pct([r['padded_share'] for r in earlier])} of q from the padded row." if earlier else ""),
    ]
    return "\n".join(lines)
