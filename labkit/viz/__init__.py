"""What the notebooks draw, and the figures in figures/.

    style             colours, PNG settings, the provenance line under every figure
    mapping_plots     the mapping buffer over a run (heat maps)
    ownership_plots   who stored last to each draft_logits[slot, step] of one launch
    q_plots           q used vs q drawn, with the drafted token and the target's p
    bench_plots       the bench's outcome per mode
    moving_parts      the map of buffers, row vs slot indexing, the graph boundary, where the bug is
    fixed_map         the same map with the parts of the fix (notebook 03)
    gpu_records       reading recorded GPU runs (labkit/data/gpu/) and the tables computed from them
    timing_plots      timing figures from a GPU record
    race_plots        the race on a GPU, vocab block by vocab block, from a GPU record
    cpu_timing        what can be timed without a GPU
    html_views        side-by-side diffs, stable text tables, numbered source excerpts
    widgets           the stale-mapping explorer
    fix_explorer      the explorer with a switch per part of the fix (notebook 03)
    figures           `python -m labkit figures`
"""
