"""Progress bars: one per run, advanced to what the run reports, closed when it is done."""

from __future__ import annotations

import pytest

from labkit import backends
from labkit.bench.repro import BenchConfig, run_bench
from labkit.viz.progress import progress_bars

tqdm_auto = pytest.importorskip("tqdm.auto")


def test_one_bar_per_run_follows_the_counts(monkeypatch):
    made = []

    class Recorder:
        def __init__(self, total, desc, unit, leave):
            self.total, self.desc, self.n, self.closed = total, desc, 0, False
            made.append(self)

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    monkeypatch.setattr(tqdm_auto, "tqdm", Recorder)
    update = progress_bars()
    for done in (1, 3, 4):
        update("eager", done, 4)
    update("graph-buggy", 2, 4)
    assert [(b.desc, b.n, b.total, b.closed) for b in made] == [("eager", 4, 4, True), ("graph-buggy", 2, 4, False)]


def test_run_bench_reports_every_mode_to_a_callable():
    seen = {}

    def record(mode, done, total):
        seen.setdefault(mode, []).append((done, total))

    with backends.using_backend("torch"):
        run_bench(BenchConfig(prompts=3), ("graph-buggy",), progress=record)
    assert set(seen) == {"eager", "graph-buggy"}
    assert all(calls[-1] == (3, 3) for calls in seen.values())
