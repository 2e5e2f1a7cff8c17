"""The measured numbers the kit teaches, rendered from its records (see :mod:`labkit.docgen.blocks`).

Every block here is a function of a record, of the code's constants (``const:``) or of a seeded,
deterministic run (``run:``), and nothing else; the docs and the notebooks' markdown hold its output
between ``<!-- KIND:NAME -->`` markers, and ``tests/test_taught_numbers.py`` keeps them equal.

    gpu:kernel          README: bandwidth (and against which copy), the mask's cost, torch, graphs, e2e
    gpu:race            README: the race in both recorded runs, and compute-sanitizer's three cases
    gpu:race-mechanics  docs/MECHANICS.md: the race, run by run
    gpu:fix-cost        docs/MECHANICS.md: what the mask costs, cold and warm
    gpu:race-guide      docs/INSTRUCTOR_GUIDE.md: the race numbers to say at notebook 04
    cpu:repro           README: the default repro's table and wall time, against the target
    cpu:downloads       docs/MAINTAINING.md: what a fresh `make lab` downloads, per platform
    cpu:make-test       docs/MAINTAINING.md: each stage of `make test` in a fresh clone, and the whole
    run:ablations       README: each part of the fix alone, from a seeded run of every mode
    gpu:race-notebook   notebook 04: the race at both vocabularies, every run counted
    gpu:early-exit      notebook 04: early exit in row order against this record
    const:gpu-default   notebook 08: the compiled kernel's default launch
    const:block-map     docs/VLLM_MAP.md: the block on each backend, the grid's row cap

The case book's blocks (``cpu:family-N``, ``gpu:family``, ``const:family-...``) are
:mod:`labkit.docgen.family_blocks`'.

GPU numbers come from ``labkit/data/gpu/h200.json`` (read through :mod:`labkit.viz.gpu_records`),
CPU times from ``labkit/data/cpu/command_times.json`` (written by ``make bench-cpu``). Ranges are
the record's minimum and maximum over the stated shapes, rounded as printed; each block names the
sections and dates it comes from.
"""

from __future__ import annotations

import functools
import json
import textwrap
from importlib import resources
from typing import Callable

GPU_RECORD = "labkit/data/gpu/h200.json"
CPU_RECORD = "data/cpu/command_times.json"
BIG = (256 * 151936)  # rows x vocab from which the kernel's claims are made (the headline sizes)
REAL_VOCAB = 151936
DEFAULT_REPRO = "python -m labkit repro"
INTERPRETER_REPRO = "python -m labkit repro --backend interpreter"


WIDTH = 100  # the docs' line length


# -- helpers ---------------------------------------------------------------------------------------

def wrap(text: str, width: int = WIDTH) -> str:
    """Each paragraph (or "- " / "  - " bullet) of `text` wrapped to `width`, bullets with a hanging
    indent; indented code lines (four spaces) and blank lines are kept as they are."""
    out = []
    for line in text.split("\n"):
        if not line.strip() or line.startswith("    "):
            out.append(line)
            continue
        stripped = line.lstrip(" ")
        lead = line[:len(line) - len(stripped)]
        hang = lead + ("  " if stripped.startswith("- ") else "")
        out.append(textwrap.fill(line, width, initial_indent="", subsequent_indent=hang,
                                 break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)


def _span(values, fmt: str = "{:.2f}", unit: str = "") -> str:
    """"a-b" (or "a" when both round alike) of `values`, formatted."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def _pct(values) -> str:
    return _span([100 * v for v in values], "{:.0f}", "%")


def _date(stamp: dict) -> str:
    return str(stamp.get("date", ""))[:10]


def _where(stamp: dict) -> str:
    """When a section was measured: its date names the run in the record's section provenance."""
    return _date(stamp)


def _gpu():
    from labkit.viz import gpu_records

    return gpu_records


def gpu_record() -> dict:
    record = _gpu().load_record()
    if not record:
        raise FileNotFoundError(f"no GPU record ({GPU_RECORD})")
    return record


def cpu_record() -> dict:
    return json.loads(resources.files("labkit").joinpath(CPU_RECORD).read_text())


# -- numbers computed from the GPU record ------------------------------------------------------------

def kernel_numbers(record: dict) -> dict:
    """The kernel section's claims: shares of copy, the mask's cost, the speed-ups over torch."""
    g = _gpu()
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
    for stamp, data in _gpu().graph_runs(record):
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


# -- GPU blocks ----------------------------------------------------------------------------------------

def _shape_list(shapes) -> str:
    by_vocab: dict[int, list[int]] = {}
    for rows, vocab in shapes:
        by_vocab.setdefault(vocab, []).append(rows)
    return " and ".join(f"{_span(rows, '{:d}')} x {vocab}" for vocab, rows in sorted(by_vocab.items(), reverse=True))


def render_kernel(record: dict) -> str:
    g = _gpu()
    k, gr, e = kernel_numbers(record), graph_numbers(record), e2e_numbers(record)
    kp, tp = g.section_provenance(record, "kernel"), g.section_provenance(record, "torch_natural")
    real = f"{_span(k['real_rows'], '{:d}')} x {REAL_VOCAB}"
    lines = [
        f"- at {real} the masked kernel moves its bytes (read the logits, write q) at {_pct(k['share_of_copy'])} "
        f"of the bandwidth of a device-to-device copy of the same bytes, timed beside it, and at "
        f"{_pct(k['share_of_peak_copy'])} of the run's peak copy (2 GiB each way, "
        f"{k['peak_copy_gbs']:.0f} GB/s); cold calls: a CUDA graph of one launch, L2 flushed before each "
        f"replay (`kernel`, {_where(kp)});",
        f"- masked over unmasked kernel time, cold calls: {_span(k['cold_ratio_64_up'])} at 64 rows and up, "
        f"{_span(k['cold_ratio_all'])} at every recorded shape ({_span(k['rows'], '{:d}')} rows, vocabularies "
        f"of {min(k['vocabs'])} to {max(k['vocabs'])}); warm back-to-back replays, as notebook 04 plots them: "
        f"{_span(k['warm_ratio_all'])}. The fix costs nothing measurable;",
        f"- at {_span(k['natural_rows'], '{:d}')} x {REAL_VOCAB} the kernel's whole call is "
        f"{_span(k['vs_rand_gumbel'], '{:.1f}', 'x')} faster than a natural torch sampler (Gumbel noise from "
        f"`torch.rand`, same distribution, other tokens), {_span(k['vs_multinomial'], '{:.1f}', 'x')} faster "
        f"than `torch.multinomial` over the softmax and {_span(k['vs_hash_port'], '{:.0f}', 'x')} faster than "
        f"a torch port of the kit's own hash noise (same tokens) (`torch_natural`, {_where(tp)}); at "
        f"{_shape_list(k['big_shapes'])}, {_span(k['vs_compiled'], '{:.1f}', 'x')} faster than "
        "`torch.compile` of that port (`kernel`); all cold CUDA-graph replays;",
    ]
    if gr["runs"]:
        runs = gr["runs"]
        per_run = "; ".join(f"{_span(r['speedup'], '{:.0f}', 'x')} ({_where(r['stamp'])})" for r in runs)
        rows = sorted({n for r in runs for n in r["rows"]})
        lines.append(
            f"- one {runs[0]['k']}-step draft of the toy drafter ({rows[0]} to {rows[-1]} rows) replayed as a "
            f"CUDA graph took {_span([u for r in runs for u in r['graph_us']], '{:.0f}', ' µs')} of GPU time "
            f"in every recorded run; launching the same kernels eagerly from Python took "
            f"{_span([m for r in runs for m in r['eager_ms']], '{:.1f}', ' ms')}, which depends on the "
            f"host and varies from run to run, so the graph is "
            f"{_span([s for r in runs for s in r['speedup']], '{:.0f}', 'x')} faster over {len(runs)} runs "
            f"(per run: {per_run});")
    if e["as_shipped"] is not None and e["with_rowwise"]:
        lines.append(
            f"- end to end, `graph-fixed` gives {_span(e['with_rowwise'], '{:d}')} of {e['responses']} responses "
            "identical to eager on the GPU only with the batch-invariant row-wise Triton linear layer in the toy "
            f"models; as first shipped, with cuBLAS linear layers (whose rows change bits with the batch size), "
            f"{e['as_shipped']} of {e['responses']} (`e2e`, {_where(g.section_provenance(record, 'e2e'))}; "
            "notebook 08, section 6).")
    return "\n".join(lines)


def _race_parts(record: dict):
    """The GPU-record reader, the race runs at the toy vocabulary and at the real one, and the real
    vocabulary's block layout (None if not recorded): what the README and MECHANICS both tell."""
    g = _gpu()
    runs = g.race_runs(record)
    toy = [r for r in runs if r["vocab"] != REAL_VOCAB]
    real = [r for r in runs if r["vocab"] == REAL_VOCAB]
    blocks = next((e for e in g.race_block_entries(record) if e["vocab"] == REAL_VOCAB), None)
    return g, toy, real, blocks


def toy_race_span(record: dict) -> tuple[float, float, int]:
    """(lowest, highest) share of launches the padded row won at the toy vocabulary, and how many
    runs that spans: every recorded run, the superseded ones too (what "how often changes from run to
    run" stands on)."""
    shares = [r["padded_won"] / r["launches"] for r in _gpu().race_runs(record, include_superseded=True)
              if r["vocab"] != REAL_VOCAB]
    return min(shares), max(shares), len(shares)


def render_race(record: dict) -> str:
    """README: the race in both recorded runs, and what memcheck sees."""
    g, toy, real, blocks = _race_parts(record)
    toy_txt = "; ".join(
        f"{r['padded_won']} of {r['launches']} launches ({r['padded_share']:.0%}) in run {r['run']}"
        + (" replayed from a CUDA graph" if r["graph"] else "") + f" ({_date(r['provenance'])})" for r in toy)
    real_txt = ", ".join(f"{r['padded_share']:.0%} in run {r['run']}" + (" (graph)" if r["graph"] else "")
                         for r in real)
    text = (f"The stale store is a race on a GPU, not \"the padded row wins\" (details in `docs/MECHANICS.md`): at "
            f"a toy vocabulary of {toy[0]['vocab']} (one block per row) the padded row's store landed last in "
            f"{toy_txt}. At {REAL_VOCAB}"
            + (f" ({blocks['num_blocks']} blocks of {blocks['block_v']})" if blocks else "")
            + f" no row won a whole launch in {_span([r['launches'] for r in real], '{:d}')} launches, in any run, "
            f"and q came out a per-block patchwork; the padded row's share of it: {real_txt} "
            "(`race` is run 1, `race_blocks` run 2; `figures/race_blocks.png` plots both).")
    san = record.get("sanitizer", {})
    if all(isinstance(san.get(c), dict) for c in ("fixed", "fill_only", "stale_slot")):
        audit = san["stale_slot"]["probe"]["audit"]
        text += (
            f"\n\nCompute-sanitizer's memcheck (`sanitizer`, {_where(g.section_provenance(record, 'sanitizer'))}) "
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
        + f" in run {r['run']} ({_where(r['provenance'])})" for r in toy)
    real_lines = ", ".join(f"{r['padded_share']:.1%}" + (" replayed from a graph" if r["graph"] else "")
                           + f" in run {r['run']}" for r in real)
    return (
        f"  - at a toy vocabulary of {toy[0]['vocab']} (one vocabulary block per row, so one store decides a "
        f"launch), the padded row's store landed last in {toy_lines}. How often it wins changes from run to run "
        f"({_toy_span_text(record)}); never count on either row;\n"
        f"  - at a vocabulary of {REAL_VOCAB}"
        + (f" ({blocks['num_blocks']} blocks of {blocks['block_v']} per row)" if blocks else "")
        + f", no row won a whole launch in {_span([r['launches'] for r in real], '{:d}')} launches, in any run: "
        f"every time q[7] came out a patchwork of the two rows, block by block, with this share of its elements "
        f"from the padded row: {real_lines}. `figures/race_blocks.png` plots every run, the superseded ones too.")


def _toy_span_text(record: dict) -> str:
    lo, hi, n = toy_race_span(record)
    return f"{100 * lo:.0f}-{100 * hi:.0f}% of the launches over all {n} recorded runs, the superseded ones too"


def render_fix_cost(record: dict) -> str:
    g = _gpu()
    k = kernel_numbers(record)
    return (f"- **The fix's cost.** It touches only padded rows. On the H200, masked over unmasked kernel time is "
            f"{_span(k['cold_ratio_64_up'])} at 64 rows and up and {_span(k['cold_ratio_all'])} at every recorded "
            f"shape ({_span(k['rows'], '{:d}')} rows of {min(k['vocabs'])} to {max(k['vocabs'])}), timed as cold "
            f"calls; {_span(k['warm_ratio_all'])} from warm back-to-back replays (notebook 04's plot). "
            f"`labkit/data/gpu/h200.json`, section `kernel`, {_where(g.section_provenance(record, 'kernel'))}: "
            "the same within measurement noise.")


def render_race_guide(record: dict) -> str:
    _, toy, real, _ = _race_parts(record)
    return ("*The race:* at a toy vocabulary one program stores a row's whole q, and each launch has one winner, "
            "but which one changes from launch to launch, and how often from run to run (the padded row won "
            + ", ".join(f"{r['padded_share']:.0%} of the launches in run {r['run']}"
                        + (" replayed from a graph" if r["graph"] else "") for r in toy)
            + f"; {_toy_span_text(record)}); at {REAL_VOCAB} every vocab block races on its own, and the warps "
            "inside a block too, so q is a "
            f"patchwork of both rows ({_pct([r['padded_share'] for r in real])} from the padded row in the "
            "current runs). The fix removes the padded store rather than ordering it.")


# -- CPU blocks ------------------------------------------------------------------------------------------

def render_repro(record: dict) -> str:
    """README: the default repro's table, and its whole-command time against the target."""
    commands = record["commands"]
    default = commands[DEFAULT_REPRO]
    prov = default["provenance"]
    text = ["The default run printed, on the CPU (seed 0; three corrupted samples side by side follow the table "
            "in the real output):", "", *("    " + line for line in default["output"].splitlines()), ""]
    timing = (f"The whole command took {_span(default['seconds'], '{:.1f}', ' s')} over {len(default['seconds'])} "
              f"run(s) (target: under {default['target_s']:.0f} s on 2 cores)")
    interp = commands.get(INTERPRETER_REPRO)
    if interp:
        timing += (f"; with `--backend interpreter`, {_span(interp['seconds'], '{:.0f}', ' s')} "
                   f"({interp['provenance']['date']})")
    text.append(timing + f". Measured {prov['date']} on {prov['machine']}; torch {prov['torch']}: "
                "`labkit/data/cpu/command_times.json`, written by `make bench-cpu`.")
    return "\n".join(text)


def render_first_lab(record: dict) -> str:
    """README: a first `make lab`'s set-up, now and before the set-up changed, from one bench session."""
    from labkit.tools.bench_cpu import FIRST_LAB

    runs = sorted(((what, entry) for what, entry in record["commands"].items() if what.startswith(FIRST_LAB)),
                  key=lambda item: item[1]["provenance"]["date"])
    if not runs:
        return ("No first `make lab` is recorded yet: `make bench-cpu ARGS=\"--only first-lab\"` times its set-up in a "
                "fresh clone with empty download caches.")

    def how(what: str) -> str:
        return what[len(FIRST_LAB):].strip(" ()").split(";")[0]

    def commit(entry: dict) -> str:
        return (entry["provenance"].get("commit") or "?")[:7]

    now_what, now = runs[-1]
    text = (f"A first `make lab` on a fresh machine spends {_span(now['seconds'], '{:.0f}', ' s')} on its set-up "
            f"(a fresh clone of commit {commit(now)}, no venv, empty download caches; {how(now_what)})")
    before = [(what, entry) for what, entry in runs[:-1] if how(what) != how(now_what)]
    if before:
        then_what, then = before[-1]
        ratio = min(then["seconds"]) / min(now["seconds"])
        text += (f", where commit {commit(then)}'s set-up ({how(then_what)}) spent "
                 f"{_span(then['seconds'], '{:.0f}', ' s')}: {ratio:.1f}x faster")
    prov = now["provenance"]
    return (text + f". Measured {prov['date']} on {prov['machine']}, the two runs one after the other; the "
            "network's speed and the machine's other work change both. `labkit/data/cpu/command_times.json`, "
            "written by `make bench-cpu ARGS=\"--only first-lab [--commit REV]\"`.")


DOWNLOADS_RECORD = "data/cpu/downloads.json"
PLATFORM_NAMES = {"linux-x86_64": "Linux x86-64", "linux-x86_64-cuda": "Linux x86-64, `TORCH=cuda`",
                  "darwin-arm64": "macOS arm64", "win32-amd64": "Windows x86-64"}


def downloads_record() -> dict:
    return json.loads(resources.files("labkit").joinpath(DOWNLOADS_RECORD).read_text())


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def render_downloads(record: dict) -> str:
    """docs/MAINTAINING.md: what a fresh `make lab` downloads on each platform, and how each number was measured."""
    platforms = record["platforms"]
    rows = ["| platform | download | largest wheels | measured |", "| --- | --- | --- | --- |"]
    for key, name in PLATFORM_NAMES.items():
        entry = platforms.get(key)
        if entry is None:
            continue
        if "torch_and_cuda_bytes" in entry:  # PyPI's torch and its CUDA packages in place of the CPU build
            cpu = platforms["linux-x86_64"]
            cpu_torch = dict(cpu["largest"])["torch"]
            total = cpu["bytes"] - cpu_torch + entry["torch_and_cuda_bytes"]
            size = f"about {total / 1e9:.1f} GB"
            largest = (f"torch {_mb(entry['torch_bytes'])} and {entry['cuda_packages']} CUDA packages: "
                       f"{_mb(entry['torch_and_cuda_bytes'])} together, in place of the CPU build")
        else:
            size = f"{_mb(entry['bytes'])}, {entry['wheels']} wheels"
            largest = ", ".join(f"{name} {_mb(n)}" for name, n in entry["largest"])
        prov = entry["provenance"]
        how = "`make wheelhouse RECORD=1`" if prov["command"].startswith("make wheelhouse") else "by hand (see record)"
        rows.append(f"| {name} | {size} | {largest} | {prov['date'][:10]}, {how} |")
    linux = platforms["linux-x86_64"]
    return "\n".join(rows) + "\n\n" + wrap(  # the table's rows stay whole: only the note is wrapped
        f"MB = 10^6 bytes, Python {linux['provenance']['python']}. On Linux, {_mb(linux['from_disk_bytes'])} of "
        "the measured download came from the measuring machine's own disk. The room stage of `make test` "
        "downloads the Linux wheelhouse again and checks its size against this record. "
        "`labkit/data/cpu/downloads.json` says how each entry was measured.")


FRESH_CLONE = "make test (fresh clone)"


def render_make_test(record: dict) -> str:
    """docs/MAINTAINING.md: the wall time of each stage of `make test` in a fresh clone, and of the whole command, and
    the commit that clone held (tests/test_taught_numbers.py checks it is an ancestor of HEAD)."""
    commands = record["commands"]
    whole = commands.get(FRESH_CLONE)
    if whole is None:
        return "No fresh-clone run of `make test` is recorded yet: `make bench-cpu ARGS=\"--only fresh-clone\"`."
    prefix = FRESH_CLONE + " stage "
    stages = {what.removeprefix(prefix): entry for what, entry in commands.items() if what.startswith(prefix)}
    rows = ["| stage | seconds |", "| --- | --- |"]
    # A stage that ran in the background (scripts/timed logs it "passed beside") overlapped the ones
    # after it: the stages then add up to more than the whole command's wall time.
    beside = [name for name, entry in stages.items() if entry.get("note", "").endswith(" beside")]
    rows += [f"| {name}{' (beside other stages)' * (name in beside)} | {_span(entry['seconds'], '{:.0f}')} |"
             for name, entry in stages.items()]
    prov = whole["provenance"]
    verdict = "passed" if whole["ok"] else "FAILED"
    rows.append(f"| **whole command** ({verdict}) | **{_span(whole['seconds'], '{:.0f}')}** |")
    excluded = [name for name in whole.get("target_excludes", []) if name in stages]
    target = f"under {whole['target_s'] / 60:.0f} minutes"
    if excluded:
        counted = [w - sum(stages[n]["seconds"][i] for n in excluded) for i, w in enumerate(whole["seconds"])]
        rows.append(f"| **without the {', '.join(excluded)}** | **{_span(counted, '{:.0f}')}** |")
        target += f" without the {', '.join(excluded)}"
    commit = prov.get("commit")
    measured = f"commit {commit[:7]}" if commit else "a commit the record does not name"
    note = f" Commit {commit[:7]}: {prov['commit_note']}." if commit and prov.get("commit_note") else ""
    overlap = (f" {' and '.join(beside)} ran in the background, beside other stages, so the stages add up to more "
               "than the whole command, which is the wall clock." if beside else "")
    # Whether Chromium was there is read from the run: scripts/timed logs a browser stage without it
    # as "skipped" (the fresh-clone bench makes it fail instead, as CI does).
    browser = stages.get("browser", {}).get("note", "")
    chromium = ("Chromium already installed" if browser.startswith("passed")
                else "the browser stage skipped: no Chromium" if browser.startswith("skipped")
                else "no browser stage recorded")
    return "\n".join(rows) + (
        f"\n\nMeasured in a fresh clone of {measured} (set-up included; {chromium}) "
        f"{prov['date']} on {prov['machine']}; target: {target}.{overlap}{note} "
        "`labkit/data/cpu/command_times.json`, written by `make bench-cpu ARGS=\"--only fresh-clone\"`.")


# -- sentences from a run of the bench (seeded, torch backend: the same counts on every machine) ------------

@functools.lru_cache(maxsize=1)
def ablation_run():
    """Every mode of the bench at its default workload (50 prompts, seed 0), on the torch backend."""
    from labkit.backends import using_backend
    from labkit.bench.modes import ALL_MODES
    from labkit.bench.repro import BenchConfig, run_bench

    with using_backend("torch"):
        return run_bench(BenchConfig(prompts=50, seed=0), list(ALL_MODES), progress=False)


def render_ablations(result) -> str:
    """README: what each part of the fix does alone, as the bench counts it."""
    m = result.modes

    def of(mode: str) -> str:
        return f"{m[mode].corrupted} of {m[mode].responses}"

    same = m["graph-kernel-only"].corrupted == m["graph-buggy"].corrupted
    mask_only = (f"`graph-kernel-only` corrupts exactly as much as `graph-buggy` ({of('graph-buggy')} at seed 0: stale "
                 "slots are >= 0, nothing is masked)" if same else
                 f"`graph-kernel-only` corrupts {of('graph-kernel-only')} at seed 0 and `graph-buggy` "
                 f"{of('graph-buggy')}")
    fill_only = ("`graph-host-only` is refused before the launch with an explanation of the out-of-bounds access"
                 if m["graph-host-only"].refused else f"`graph-host-only` corrupts {of('graph-host-only')}")
    greedy = ("greedy drafting corrupts nothing" if m["greedy-graph-buggy"].corrupted == 0 else
              f"greedy drafting corrupts {of('greedy-graph-buggy')}")
    dflash = (f"DFlash's pad 0 corrupts slot 0's requests ({of('dflash-buggy')} at seed 0) while -1 "
              + ("does not" if m["dflash-fixed"].corrupted == 0 else f"corrupts {of('dflash-fixed')}"))
    return (f"{mask_only}, {fill_only}, {greedy}, and {dflash}. Every response is compared token by token with "
            "the eager run of the same drafter; with per-request seeds, any difference is the bug's doing.")


# -- sentences that restate the code's constants ---------------------------------------------------------

def render_gpu_default() -> str:
    """Notebook 08: the compiled kernel's default launch, as the code sets it."""
    from labkit.kernels.gumbel_tuning import GPU_BLOCK_V, GPU_NUM_WARPS, SINGLE_PASS

    passes = "one pass" if SINGLE_PASS else "two passes"
    return (f"The kit's compiled default is {GPU_NUM_WARPS} warps, {passes}, and blocks of {GPU_BLOCK_V} entries at "
            "every row count.")


def render_block_map() -> str:
    """docs/VLLM_MAP.md: the block the kit launches on each backend, and when a batch launches in parts."""
    from labkit.kernels.gumbel_tuning import DEFAULT_BLOCK_V, GPU_BLOCK_V, GPU_NUM_WARPS, MAX_GRID_ROWS

    block = (f"On both backends the block is {GPU_BLOCK_V}" if GPU_BLOCK_V == DEFAULT_BLOCK_V else
             f"The interpreter's block is {DEFAULT_BLOCK_V} and the compiled kit's {GPU_BLOCK_V}")
    return (f"CUDA caps a grid's second axis at {MAX_GRID_ROWS}, so a bigger batch launches in parts (`grid_parts` "
            f"in `labkit/kernels/gumbel_tuning.py`). {block}, as in vLLM, at every row count; compiled, the kit "
            f"runs it with {GPU_NUM_WARPS} warps and fast-math logs (`launch_config` in "
            "`labkit/kernels/gumbel_tuning.py`, the logs in `labkit/kernels/fast_math.py`; the ``sweep`` section "
            "of the record, measured on an H200, is what chose them).")


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
        f"{_pct([r['padded_share'] for r in real])} of it from the padded row in the current runs. In these runs a "
        "row's blocks are consecutive programs, so the padded row's programs start after the live row's."
        + (f" The {len(earlier)} runs they replaced (kept under `superseded`, and plotted) took "
           f"{_pct([r['padded_share'] for r in earlier])} of q from the padded row." if earlier else ""),
    ]
    return "\n".join(lines)


def render_early_exit(record: dict) -> str:
    """Notebook 04: early exit in row order (the run the record keeps for it) against this record."""
    g = _gpu()
    cited = g.cited_run(record, "kernel", "early exit")
    then, now = g.early_exit_shares(cited["data"]), g.early_exit_shares(record["kernel"])
    when = _date(cited.get("provenance") or {})
    return (f"In plain row order early exit cost {_span(then['early_exit'])} of the masked launch (the run of "
            f"{when}, which the record keeps for this comparison); with the rows taken from both ends it costs "
            f"{_span(now['early_exit'])}, beside {_span(now['live_rows_only'])} for the live rows alone (64 to "
            f"512 rows, V={REAL_VOCAB}, half the rows padded).")


def renderers(gpu: dict | None = None, cpu: dict | None = None) -> dict[str, Callable[[], str]]:
    """``{"gpu:NAME" | "cpu:NAME": render}``, from the given records or the shipped ones."""
    def with_gpu(fn):
        return lambda: wrap(fn(gpu if gpu is not None else gpu_record()))

    def with_cpu(fn):
        return lambda: wrap(fn(cpu if cpu is not None else cpu_record()))

    return {"gpu:kernel": with_gpu(render_kernel), "gpu:race": with_gpu(render_race),
            "gpu:race-mechanics": with_gpu(render_race_mechanics), "gpu:fix-cost": with_gpu(render_fix_cost),
            "gpu:race-guide": with_gpu(render_race_guide), "gpu:race-notebook": with_gpu(render_race_notebook),
            "gpu:early-exit": with_gpu(render_early_exit),
            "cpu:repro": with_cpu(render_repro), "cpu:make-test": with_cpu(render_make_test),
            "cpu:first-lab": with_cpu(render_first_lab),
            "cpu:downloads": lambda: render_downloads(downloads_record()),
            "run:ablations": lambda: wrap(render_ablations(ablation_run())),
            "const:gpu-default": lambda: wrap(render_gpu_default()),
            "const:block-map": lambda: wrap(render_block_map())}


def all_renderers() -> dict[str, Callable[[], str]]:
    """Every block the kit renders, from the records it ships: the agendas and the taught numbers.

    (Here, not in :mod:`labkit.docgen.blocks`: the agendas live on the workshop's floor, above the
    marker mechanics that they use.) The room's blocks come from the room's distribution where it is
    installed, through its ``labkit.renderers`` entry point: the lesson never imports the room.
    """
    from importlib.metadata import entry_points

    from labkit.docgen import family_blocks
    from labkit.upstream import record as upstream_record
    from labkit.workshop.editions import agenda

    found = {**agenda.renderers(), **renderers(), **upstream_record.renderers(),
             **family_blocks.renderers(wrap, gpu_loader=lambda: _gpu().load_record())}
    for plugin in entry_points(group="labkit.renderers"):
        found.update(plugin.load()(wrap))
    return found
