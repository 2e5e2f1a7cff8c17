"""`python -m labkit figures`: write the kit's figures as PNG files.

Computed on the spot from the shipped models and fixed seeds:

    moving_parts.png          the buffers, who indexes them by row or by slot, the graph boundary,
                              where the bug is (the learner's map: nothing of the fix)
    moving_parts_fixed.png    the same with the three parts of the PR's fix
    mapping_heatmap.png       idx_mapping over an engine run, before and after the fix
    ownership_map.png         the two-step timeline: padded row 7 overwrites slot 7's q
    q_used_vs_drawn.png       the q verification used vs the q the draft token was drawn from, with p
    bench_before_after.png    the bench: corrupted responses per mode (runs the 50-prompt bench)

Drawn from the newest recorded GPU run in labkit/data/gpu/ (:data:`RECORD_FIGURES`): the timing
plots and the race's vocab blocks. Without a record, a CPU-measured timing figure instead.
"""

from __future__ import annotations

from pathlib import Path

from labkit.viz import cpu_timing, race_plots, timing_plots
from labkit.viz.bench_plots import bench_figure
from labkit.viz.fixed_map import moving_parts_fixed
from labkit.viz.gpu_records import load_record, staircase_data
from labkit.viz.mapping_plots import compare_mappings, launched_width, mapping_grid
from labkit.viz.moving_parts import moving_parts
from labkit.viz.ownership_plots import ownership_map
from labkit.viz.q_plots import q_used_vs_drawn, timeline_q_pair
from labkit.viz.style import save_png

# file name -> (the record section it needs, the function drawing it from the record)
RECORD_FIGURES = {
    "timing_kernel_bandwidth.png": ("kernel", timing_plots.plot_kernel_bandwidth),
    "timing_masked_vs_unmasked.png": ("kernel", timing_plots.plot_masked_vs_unmasked),
    "timing_early_exit.png": ("kernel", timing_plots.plot_early_exit),
    "timing_kernel_vs_torch.png": ("kernel", timing_plots.plot_kernel_vs_torch),
    "timing_what_bounds_the_kernel.png": ("sweep", timing_plots.plot_sweep),
    "timing_graph_vs_eager.png": ("graphs", timing_plots.plot_graph_vs_eager),
    "timing_padding_staircase.png": ("staircase", timing_plots.plot_staircase),
    "timing_tokens_per_s.png": ("e2e", timing_plots.plot_tokens_per_s),
    "race_blocks.png": ("race_blocks", race_plots.plot_race_blocks),
    "timing_peers.png": ("peers", timing_plots.plot_peers),
}


def available_figures(record: dict) -> list[str]:
    """Names of the figures this record has data for (a section that failed holds an 'error')."""
    def has(section: str) -> bool:
        if section == "staircase":
            return bool(staircase_data(record))
        data = record.get(section)
        return bool(data) and not (isinstance(data, dict) and "error" in data)

    return [name for name, (section, _) in RECORD_FIGURES.items() if has(section)]


def write_record_figures(outdir="figures", record: dict | None = None, *, data_dir=None, log=print) -> list[Path]:
    """Write the figures drawn from a GPU record into `outdir`; returns the paths.

    Uses `record`, else the newest record in `data_dir` (default labkit/data/gpu/). With none, says
    so and writes a CPU-measured figure instead (labelled as such on the plot)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    record = record if record is not None else load_record(data_dir=data_dir)
    if not record:
        log("labkit figures: no GPU record in labkit/data/gpu/ (python -m labkit gpu on a GPU makes one); "
            "plotting a CPU-measured figure instead, labelled as such")
        return [save_png(cpu_timing.plot_cpu_kernel(cpu_timing.cpu_record()), out / "timing_cpu_measured.png")]
    return [save_png(RECORD_FIGURES[name][1](record), out / name) for name in available_figures(record)]


def q_pair_that_matters(min_change: float = 0.01):
    """A (slot, draft step) of the timeline, before the fix, where the wrong q changes the chance that
    the verifier keeps the drafted token (min(1, p/q) often saturates at 1 under both), and a title
    naming the two distributions its total variation compares. The autoregressive drafter's steps
    first, then DFlash's (pad 0: padded sample rows overwrite slot 0's q)."""
    from dataclasses import replace

    from labkit.bench.runs import timeline_run
    from labkit.bench.scenario import TIMELINE

    runs = {drafter: timeline_run(config=replace(TIMELINE, drafter=drafter).before_fix())
            for drafter in ("autoregressive", "dflash")}
    candidates = [("autoregressive", step) for step in (0, 1)] + [("dflash", step) for step in (0, 1)]
    for drafter, step in candidates:
        pair = timeline_q_pair(runs[drafter], step=step)
        drawn, used = pair.acceptance(pair.q_drawn), pair.acceptance(pair.q_used)
        if drawn is not None and used is not None and abs(drawn - used) >= min_change:
            break
    name = "DFlash-style drafter (pad 0)" if drafter == "dflash" else "autoregressive drafter"
    return pair, (f"{name} before the fix, slot {pair.slot}, draft step {pair.step}:\ntotal variation distance "
                  f"between the q the token was drawn from and the q verification used = {pair.total_variation:.2f}")


# The figures a learner may meet before the exercises (the README shows them outside its spoiler
# section): drawn here, and nowhere else, so that a test reads the very strings they are drawn from.
LEARNER_FIGURES = ("moving_parts.png", "ownership_map.png")


def draw_learner_figure(name: str):
    """One of :data:`LEARNER_FIGURES`, as a matplotlib figure."""
    if name == "moving_parts.png":
        return moving_parts()  # the learner's map: the bug's places, nothing of the fix
    if name == "ownership_map.png":
        from labkit.bench.runs import timeline_run

        shrunk = timeline_run().launches[-1]  # the two-step timeline of notebook 02, before the fix
        return ownership_map(shrunk, title="eight requests, then slot 3 finishes: step t+1, before the fix")
    raise KeyError(f"{name} is not a learner's figure: {', '.join(LEARNER_FIGURES)}")


def write_explaining_figures(outdir="figures", *, bench=None, bench_prompts: int = 50,
                             explorer_prompts: int = 10) -> list[Path]:
    """Write the figures computed on the spot (see the module's docstring); returns the paths.

    `bench`: a BenchResult to draw instead of running the bench (the default modes over
    `bench_prompts` prompts).
    """
    from labkit.bench.modes import DEFAULT_MODES
    from labkit.bench.repro import BenchConfig, run_bench
    from labkit.bench.runs import engine_source
    from labkit.config import DrafterConfig

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [save_png(draw_learner_figure("moving_parts.png"), out / "moving_parts.png"),
             save_png(moving_parts_fixed(), out / "moving_parts_fixed.png")]

    runs = engine_source(explorer_prompts)
    before, after = runs(DrafterConfig().before_fix()), runs(DrafterConfig().with_pr_fix())
    width = max(launched_width(before.launches), launched_width(after.launches))
    fig = compare_mappings([
        ("before the fix: stale slots stay in padded rows", mapping_grid(before.launches, before.steps, width)),
        ("after the fix: padded rows hold -1", mapping_grid(after.launches, after.steps, width)),
    ])
    paths.append(save_png(fig, out / "mapping_heatmap.png"))

    paths.append(save_png(draw_learner_figure("ownership_map.png"), out / "ownership_map.png"))
    pair, title = q_pair_that_matters()
    paths.append(save_png(q_used_vs_drawn(pair, title=title), out / "q_used_vs_drawn.png"))

    if bench is None:
        bench = run_bench(BenchConfig(prompts=bench_prompts), DEFAULT_MODES, progress=False)
    paths.append(save_png(bench_figure(bench, title="the bench: before and after the fix"),
                          out / "bench_before_after.png"))
    return paths


def write_all(outdir="figures", *, bench=None, bench_prompts: int = 50, explorer_prompts: int = 10,
              record: dict | None = None, data_dir=None, log=print) -> list[Path]:
    """Every figure: the explaining ones, then those drawn from the GPU record; returns the paths."""
    paths = write_explaining_figures(outdir, bench=bench, bench_prompts=bench_prompts,
                                     explorer_prompts=explorer_prompts)
    return paths + write_record_figures(outdir, record, data_dir=data_dir, log=log)
