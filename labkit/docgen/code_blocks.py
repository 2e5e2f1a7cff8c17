"""Blocks of the code itself: sentences that restate its constants (``const:``) and what a seeded run
of the bench counts (``run:``, on the torch backend: the same counts on every machine)."""

from __future__ import annotations

import functools


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


def _letters(exercises) -> str:
    named = [f"({x.letter})" for x in exercises]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def render_exercise_table() -> str:
    """Notebook 07's opening table: each exercise, what the learner writes and what its checker runs it
    through, from the exercises' record, then the capstone, which runs the parts of the PR's fix (the
    exercises notebook 03 compares) in the engine."""
    from labkit.workshop.exercises.record import EXERCISES

    lines = ["| | what you write | what the checker runs it through |", "| --- | --- | --- |"]
    lines += [f"| ({x.letter}) | {x.you_write or x.topic} | {x.checked_on or 'its checker'} |" for x in EXERCISES]
    lines.append("| capstone | nothing new: your " + _letters([x for x in EXERCISES if x.compare_notebook == "03"])
                 + " inside the toy engine | notebook 01's bench, both drafters |")
    return "\n".join(lines)


def render_exercise_versions() -> str:
    """docs/INSTRUCTOR_GUIDE.md, a room of Macs: which exercises are plain Python and which are done in
    their torch versions, from the exercises' record."""
    from labkit.workshop.exercises.record import EXERCISES

    plain = [x for x in EXERCISES if all(v.kind is None for v in x.versions)]
    torch = [x for x in EXERCISES if any(v.kind == "torch" for v in x.versions)]
    parts = []
    if plain:
        verb = "are" if len(plain) > 1 else "is"
        parts.append(f"Exercise{'s' * (len(plain) > 1)} {_letters(plain)} {verb} plain Python and identical everywhere")
    if torch:
        many = len(torch) > 1
        parts.append(f"{_letters(torch)} {'are' if many else 'is'} done in {'their' if many else 'its'} torch "
                     f"version{'s' * many}, with the same semantics and the same checker's verdict as the Triton one")
    return "; ".join(parts) + "."
