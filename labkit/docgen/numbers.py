"""Every block the kit renders, by name: the registry of the renderers (see :mod:`labkit.docgen.blocks`).

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
    cpu:refresh         docs/MAINTAINING.md: `make refresh` in a fresh clone, no GPU
    run:ablations       README: each part of the fix alone, from a seeded run of every mode
    gpu:race-notebook   notebook 04: the race at both vocabularies, every run counted
    gpu:early-exit      notebook 04: early exit in row order against this record
    const:gpu-default   notebook 08: the compiled kernel's default launch
    const:block-map     docs/VLLM_MAP.md: the block on each backend, the grid's row cap
    const:exercise-table     notebook 07: each exercise, what the learner writes, what its checker runs it through
    const:exercise-versions  docs/INSTRUCTOR_GUIDE.md: which exercises are plain Python, which have a torch version

The case book's blocks (``cpu:family-N``, ``gpu:family``, ``const:family-...``) are
:mod:`labkit.docgen.family_blocks`'.

The renderers live by what they render: :mod:`~labkit.docgen.kernel_blocks` and
:mod:`~labkit.docgen.race_blocks` (the GPU record, ``labkit/data/gpu/runs.json``),
:mod:`~labkit.docgen.cpu_blocks` (the CPU records, ``make bench-cpu``, ``make wheelhouse RECORD=1``),
:mod:`~labkit.docgen.code_blocks` (the code's constants, a seeded run); :mod:`~labkit.docgen.sources`
reads the records and :mod:`~labkit.docgen.prose` writes the sentences. Ranges are the record's
minimum and maximum over the stated shapes, rounded as printed; each block names the sections and
dates it comes from.
"""

from __future__ import annotations

from typing import Callable

from labkit.docgen.code_blocks import (
    ablation_run,
    render_ablations,
    render_block_map,
    render_exercise_table,
    render_exercise_versions,
    render_gpu_default,
)
from labkit.docgen.cpu_blocks import DEFAULT_REPRO as DEFAULT_REPRO
from labkit.docgen.cpu_blocks import FRESH_CLONE as FRESH_CLONE
from labkit.docgen.cpu_blocks import (
    render_downloads,
    render_first_lab,
    render_make_test,
    render_refresh,
    render_repro,
)
from labkit.docgen.kernel_blocks import REAL_VOCAB as REAL_VOCAB
from labkit.docgen.kernel_blocks import render_early_exit, render_fix_cost, render_kernel
from labkit.docgen.prose import wrap
from labkit.docgen.race_blocks import render_race, render_race_guide, render_race_mechanics, render_race_notebook
from labkit.docgen.sources import cpu_record, downloads_record, gpu_record


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
            "cpu:first-lab": with_cpu(render_first_lab), "cpu:refresh": with_cpu(render_refresh),
            "cpu:downloads": lambda: render_downloads(downloads_record()),
            "run:ablations": lambda: wrap(render_ablations(ablation_run())),
            "const:gpu-default": lambda: wrap(render_gpu_default()),
            "const:block-map": lambda: wrap(render_block_map()),
            "const:exercise-versions": lambda: wrap(render_exercise_versions()),
            "const:exercise-table": render_exercise_table}


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
             **family_blocks.renderers(wrap, gpu_loader=gpu_record)}
    for plugin in entry_points(group="labkit.renderers"):
        found.update(plugin.load()(wrap))
    return found
