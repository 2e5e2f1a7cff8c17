"""`python -m labkit figures`: write the figures that explain the bug as PNG files.

    moving_parts.png          the buffers, who indexes them by row or by slot, the graph boundary
    mapping_heatmap.png       idx_mapping over an engine run, before and after the fix
    ownership_map.png         MECHANICS' timeline: padded row 7 overwrites slot 7's q
    q_used_vs_drawn.png       the q verification used vs the q the draft token was drawn from
    bench_before_after.png    the bench: corrupted responses per mode (runs the 50-prompt bench)

plus, if another part of the kit provides ``labkit.viz.timing_plots.save_timing_figures``, the timing plots.
Everything is computed on the spot from the shipped models and fixed seeds.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from labkit.viz import plots

DPI = 110


def _save(fig, path: Path) -> Path:
    # No "Software" stamp: the file then depends on the data and matplotlib's drawing only.
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    return path


def write_all(outdir="figures", *, bench=None, bench_prompts: int = 50, explorer_prompts: int = 10) -> list[Path]:
    """Write every figure into `outdir` (created if needed); returns the paths written.

    `bench`: a BenchResult to draw instead of running the bench (the default modes over
    `bench_prompts` prompts, about a minute on a laptop CPU).
    """
    from labkit.modes import DEFAULT_MODES
    from labkit.repro import BenchConfig, run_bench
    from labkit.runs import engine_run, timeline_run
    from labkit.speculator import FixSwitches

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [_save(plots.moving_parts(), out / "moving_parts.png")]

    before = engine_run("autoregressive", False, False, -1, explorer_prompts)
    after = engine_run("autoregressive", True, True, -1, explorer_prompts)
    width = max(plots.launched_width(before.launches), plots.launched_width(after.launches))
    fig = plots.compare_mappings([
        ("before the fix: stale slots stay in padded rows", plots.mapping_grid(before.launches, before.steps, width)),
        ("after the fix: padded rows hold -1", plots.mapping_grid(after.launches, after.steps, width)),
    ])
    paths.append(_save(fig, out / "mapping_heatmap.png"))

    timeline = timeline_run(fix=FixSwitches.before())
    shrunk = timeline.launches[-1]
    slot, step, _, _ = shrunk.collisions()[0]
    paths.append(_save(plots.ownership_map(shrunk, title="MECHANICS' timeline, step t+1 (slot 3 finished)"),
                       out / "ownership_map.png"))
    paths.append(_save(plots.q_used_vs_drawn(shrunk, slot, step), out / "q_used_vs_drawn.png"))

    if bench is None:
        bench = run_bench(BenchConfig(prompts=bench_prompts), DEFAULT_MODES, progress=False)
    paths.append(_save(plots.bench_figure(bench, title="the bench: before and after the fix"),
                       out / "bench_before_after.png"))

    try:
        timing = importlib.import_module("labkit.viz.timing_plots")
    except ImportError as err:
        if err.name != "labkit.viz.timing_plots":  # the module exists but something it imports is missing
            raise
        timing = None
    if timing is not None and hasattr(timing, "save_timing_figures"):
        paths.extend(Path(p) for p in timing.save_timing_figures(out))
    return paths
