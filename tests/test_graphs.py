from __future__ import annotations

import pytest
import torch

from labkit.errors import LabkitInputError
from labkit.graphs import GraphRunner


def test_dispatch_pads_to_the_smallest_capture_size_that_fits():
    runner = GraphRunner([1, 2, 4, 8])
    assert [runner.rows_for(n) for n in range(1, 9)] == [1, 2, 4, 4, 8, 8, 8, 8]
    eager = GraphRunner([1, 2, 4, 8], mode="eager")
    assert [eager.rows_for(n) for n in range(1, 9)] == list(range(1, 9))


@pytest.mark.parametrize("sizes,match", [
    ([], "empty"),
    ([4, 2, 8], "sorted"),
    ([1, 2, 2, 4], "sorted"),
    ([0, 1], "positive"),
    ([1, 2.5], "positive"),
])
def test_bad_capture_sizes_are_refused(sizes, match):
    with pytest.raises(LabkitInputError, match=match):
        GraphRunner(sizes)


def test_batch_larger_than_the_largest_capture_size_is_refused():
    runner = GraphRunner([1, 2, 4])
    with pytest.raises(LabkitInputError, match="larger than the largest capture size 4"):
        runner.rows_for(5)
    with pytest.raises(LabkitInputError, match="at least one"):
        runner.rows_for(0)
    with pytest.raises(LabkitInputError, match="mode"):
        GraphRunner([1], mode="piecewise")


def test_emulated_graph_always_runs_its_captured_size_and_reads_buffers_at_replay():
    buf = torch.zeros(8)
    seen = []

    def step(rows):
        seen.append((rows, buf[:rows].clone()))

    runner = GraphRunner([2, 8])
    buf[:3] = torch.tensor([1.0, 2.0, 3.0])
    assert runner.run(3, step) == 8
    buf[:3] = torch.tensor([7.0, 8.0, 9.0])  # changed after "capture"
    runner.run(2, step)
    runner.run(3, step)
    assert runner.num_captures == 2 and runner.num_replays == 3
    assert [r for r, _ in seen] == [8, 2, 8]
    assert seen[2][1][:3].tolist() == [7.0, 8.0, 9.0], "replay must read the buffers as they are now"


def test_capture_all_captures_every_size_once():
    calls = []
    runner = GraphRunner([1, 2, 4])
    runner.capture_all(calls.append)
    runner.capture_all(calls.append)
    assert runner.num_captures == 3
    runner.run(3, calls.append)
    assert runner.num_captures == 3 and calls == [4]


@pytest.mark.gpu
def test_real_cuda_graph_replays_with_new_buffer_contents():
    x = torch.zeros(8, device="cuda")
    y = torch.zeros(8, device="cuda")

    def step(rows):
        y[:rows].copy_(x[:rows] * 2)

    runner = GraphRunner([4, 8], device="cuda")
    x[:3] = 1.0
    runner.run(3, step)
    x[:4] = torch.tensor([5.0, 6.0, 7.0, 8.0], device="cuda")
    runner.run(3, step)
    torch.cuda.synchronize()
    assert runner.real_graphs and y[:4].tolist() == [10.0, 12.0, 14.0, 16.0]


def test_graph_for_captures_once_and_returns_a_graph_to_replay():
    calls = []
    runner = GraphRunner([2, 4])
    graph = runner.graph_for(4, calls.append)
    assert runner.graph_for(4, calls.append) is graph and runner.num_captures == 1
    graph.replay()
    assert calls == [4]
    assert runner.run(3, calls.append) == 4 and runner.num_captures == 1, "run() reuses the same graph"


def test_graph_for_refuses_sizes_that_were_not_declared_and_eager_runners():
    runner = GraphRunner([2, 4])
    for rows in (3, 0, 4.0, True):
        with pytest.raises(LabkitInputError, match=r"one of the capture sizes \[2, 4\]"):
            runner.graph_for(rows, print)
    with pytest.raises(LabkitInputError, match="eager runner captures no graphs"):
        GraphRunner([2], mode="eager").graph_for(2, print)
