"""The bench's outcome as a figure: per mode, responses identical to the eager reference and corrupted ones."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from labkit.viz.style import BAD_COLOR, OK_COLOR, QUIET_COLOR, add_caption, run_caption


def bench_figure(result, modes=None, *, title: str | None = None, source: str | None = None) -> Figure:
    """Per mode, responses identical to the eager reference (green) and corrupted (red).

    `result` is a :class:`labkit.bench.repro.BenchResult`; `source` the provenance line under the figure
    (default: the labkit backend and device in use, the ones that ran a bench drawn right after).
    """
    names = list(modes or result.modes)
    fig = Figure(figsize=(8.0, 0.5 * len(names) + 1.7), layout="constrained")
    ax = fig.add_subplot()
    for i, name in enumerate(names):
        r = result.modes[name]
        y = len(names) - 1 - i
        if r.error:
            ax.barh(y, result.config.prompts, color="white", edgecolor=QUIET_COLOR, hatch="//")
            ax.text(result.config.prompts / 2, y, "refused before launch (unmasked kernel, slot -1)",
                    ha="center", va="center", fontsize=8, bbox={"facecolor": "white", "edgecolor": "none"})
            continue
        ax.barh(y, r.identical_to_eager, color=OK_COLOR)
        ax.barh(y, r.corrupted, left=r.identical_to_eager, color=BAD_COLOR)
        note = "(the reference)" if r.reference == name else f"{r.corrupted} of {r.responses} corrupted"
        ax.text(r.responses + 0.5, y, note, va="center", fontsize=8)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(list(reversed(names)), fontsize=8)
    ax.set_xlim(0, result.config.prompts * 1.35)
    ax.set_xlabel("responses (compared token by token with the eager run of the same drafter)")
    legend = fig.legend(handles=[Patch(color=OK_COLOR, label="identical to the eager reference"),
                                 Patch(color=BAD_COLOR, label="corrupted")],
                        loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    ax.set_title(title or f"{result.config.prompts} prompts, seed {result.config.seed}", fontsize=10)
    return add_caption(fig, source or run_caption(), legend=legend)
