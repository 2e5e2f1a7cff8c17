"""Progress bars for the notebooks' longer runs.

`tqdm.auto` draws a widget bar in JupyterLab and a text bar in a terminal. The kit's long runs
report progress as ``progress(run, done, total)`` (:func:`labkit.bench.repro.run_bench` per mode,
:func:`labkit.workshop.exercises.capstone.run_capstone` per drafter); :func:`progress_bars` turns those calls
into one bar per run.
"""

from __future__ import annotations

from typing import Callable


def progress_bars(unit: str = "requests") -> Callable[[str, int, int], None]:
    """A ``progress(run, done, total)`` callback that keeps one tqdm bar per run name."""
    try:
        from tqdm.auto import tqdm
    except ImportError as err:
        raise ImportError("progress bars need tqdm: pip install 'labkit[lab]'", name="tqdm") from err
    bars: dict[str, object] = {}

    def update(run: str, done: int, total: int) -> None:
        bar = bars.get(run)
        if bar is None:
            bar = bars[run] = tqdm(total=total, desc=str(run), unit=unit, leave=True)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update
