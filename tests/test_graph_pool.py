"""Graphs that share one memory pool (labkit.graph_pool) and GraphRunner.forward, which returns a graph's output.

On the CPU the pool is emulated: each capture takes the lowest free block of one arena, a block whose
output the runner does not own is free again once its capture ends, and a replay writes the blocks
of its own capture. So two runners sharing a pool, neither owning its outputs, alias; owning keeps
them apart. The GPU tests at the end let PyTorch's caching allocator decide the same.
"""

from __future__ import annotations

import pytest
import torch

from labkit import backends
from labkit.errors import LabkitInputError
from labkit.graph_pool import ALIGN, GraphPool
from labkit.graphs import GraphRunner

gpu = pytest.mark.gpu


def _scaled(runner: GraphRunner, source: torch.Tensor, factor: float):
    """A step that returns `factor` times the first `rows` entries of `source`, in a tensor of the pool."""
    def step(rows: int) -> torch.Tensor:
        out = runner.pool.empty((rows,))
        torch.mul(source[:rows], factor, out=out)
        return out
    return step


def _runners(keep_outputs: bool, device="cpu"):
    pool = GraphPool(device)
    first = GraphRunner([4, 8], pool=pool, keep_outputs=keep_outputs, device=device)
    second = GraphRunner([4], pool=pool, keep_outputs=keep_outputs, device=device)
    return first, second


def test_unowned_outputs_of_two_runners_alias_and_a_later_replay_changes_the_earlier_one():
    source = torch.arange(8.0)
    first, second = _runners(keep_outputs=False)
    handed = first.forward(3, _scaled(first, source, 2.0))
    expected = source[:4] * 2.0
    assert torch.equal(handed, expected)
    later = second.forward(3, _scaled(second, source, -1.0))
    assert later.data_ptr() == handed.data_ptr(), "the second capture is given the first's freed block"
    assert torch.equal(handed, source[:4] * -1.0), "the earlier output now holds the later graph's"
    assert not torch.equal(handed, expected)


def test_owned_outputs_keep_their_memory():
    source = torch.arange(8.0)
    first, second = _runners(keep_outputs=True)
    handed = first.forward(3, _scaled(first, source, 2.0))
    later = second.forward(3, _scaled(second, source, -1.0))
    assert later.data_ptr() != handed.data_ptr()
    assert torch.equal(handed, source[:4] * 2.0)


def test_a_replay_writes_the_blocks_of_its_capture_and_reads_its_inputs_then():
    source = torch.arange(8.0)
    runner = GraphRunner([4, 8], pool=GraphPool(), keep_outputs=False)
    step = _scaled(runner, source, 3.0)
    first = runner.forward(2, step)
    source[:4] = torch.tensor([10.0, 11.0, 12.0, 13.0])
    again = runner.forward(4, step)
    assert again.data_ptr() == first.data_ptr() and again.shape == (4,)
    assert again.tolist() == [30.0, 33.0, 36.0, 39.0]
    assert runner.num_captures == 1 and runner.num_replays == 2


def test_eager_forward_returns_a_fresh_tensor_of_exactly_the_live_rows():
    source = torch.arange(8.0)
    runner = GraphRunner([4, 8], mode="eager", pool=GraphPool())
    step = _scaled(runner, source, 1.0)
    a, b = runner.forward(3, step), runner.forward(3, step)
    assert a.shape == (3,) and a.data_ptr() != b.data_ptr() and not runner.pool.holds(a)


def test_the_emulated_pool_takes_the_lowest_free_block_and_merges_freed_neighbours():
    pool = GraphPool(emulated_bytes=8 * ALIGN)
    with pool.capturing() as capture:
        a = pool.empty((ALIGN // 4,))  # one block
        b = pool.empty((2 * ALIGN // 4,))  # two blocks, right after it
    assert b.data_ptr() - a.data_ptr() == ALIGN
    pool.release_all_but(capture, [b])
    with pool.capturing() as again:
        c = pool.empty((ALIGN // 4,))
    assert c.data_ptr() == a.data_ptr(), "the lowest free block first"
    pool.release_all_but(again, [])
    pool.release_all_but(capture, [])  # b goes too: the arena is one free run again
    with pool.capturing():
        whole = pool.empty((8 * ALIGN // 4,))
    assert whole.data_ptr() == a.data_ptr()


def test_a_kept_view_anywhere_in_a_block_keeps_the_whole_block():
    pool = GraphPool(emulated_bytes=8 * ALIGN)
    with pool.capturing() as capture:
        pool.empty((ALIGN // 4,))
        big = pool.empty((3 * ALIGN // 4,))  # three blocks' worth, one block of the pool
    pool.release_all_but(capture, [big[ALIGN // 4 + 5:]])  # a view that starts past its first 512 bytes
    with pool.capturing():
        again = pool.empty((ALIGN // 4,))
        after = pool.empty((ALIGN // 4,))
    assert again.data_ptr() < big.data_ptr() and after.data_ptr() >= big.data_ptr() + 3 * ALIGN


def test_a_replay_asks_for_what_its_capture_did():
    pool = GraphPool()
    with pool.capturing() as capture:
        pool.empty((4,))
    with pool.replaying(capture):
        pool.empty((4,))
        with pytest.raises(LabkitInputError, match="more than its capture did"):
            pool.empty((4,))


@pytest.mark.parametrize("make,match", [
    (lambda: GraphPool(emulated_bytes=10), "emulated_bytes"),
    (lambda: GraphRunner([4], pool=object()), "GraphPool"),
    (lambda: GraphRunner([4], keep_outputs="yes"), "keep_outputs"),
    (lambda: GraphRunner([4], pool=GraphPool("meta"), device="cpu"), "pool is on meta"),
])
def test_bad_pools_and_runners_are_refused_in_one_line(make, match):
    with pytest.raises(LabkitInputError, match=match):
        make()


def test_a_pool_too_small_says_how_to_grow_it():
    pool = GraphPool(emulated_bytes=ALIGN)
    with pool.capturing(), pytest.raises(LabkitInputError, match="larger emulated_bytes"):
        pool.empty((ALIGN,))


def test_nested_captures_are_refused():
    pool = GraphPool()
    with pool.capturing(), pytest.raises(LabkitInputError, match="already under way"):
        with pool.capturing():
            pass


# -- on a GPU: PyTorch's caching allocator decides ----------------------------------------------------

needs_compiled = pytest.mark.skipif(backends.backend() != "triton",
                                    reason="GraphRunner captures real CUDA graphs under the compiled backend only")


@gpu
def test_an_unowned_view_on_the_gpu_shares_the_address_and_keeps_nothing_alive():
    pool = GraphPool("cuda")
    source = torch.arange(8.0, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool.cuda_handle()):
        out = pool.empty((4,))
        torch.mul(source[:4], 2.0, out=out)
    view = pool.unowned(out)
    address = out.data_ptr()
    assert view.data_ptr() == address and view.dtype == out.dtype and view.shape == out.shape
    del out  # the view alone does not keep the block: the next capture into the pool may take it
    later_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(later_graph, pool=pool.cuda_handle()):
        later = pool.empty((4,))
        torch.mul(source[:4], -1.0, out=later)
    assert later.data_ptr() == address
    graph.replay()
    later_graph.replay()
    torch.cuda.synchronize()
    assert view.tolist() == [-0.0, -1.0, -2.0, -3.0]


@gpu
@needs_compiled
@pytest.mark.parametrize("keep_outputs", [False, True])
def test_runners_sharing_a_pool_on_the_gpu_alias_only_unowned_outputs(keep_outputs):
    source = torch.arange(8.0, device="cuda")
    first, second = _runners(keep_outputs, device="cuda")
    assert first.real_graphs
    handed = first.forward(3, _scaled(first, source, 2.0))
    later = second.forward(3, _scaled(second, source, -1.0))
    torch.cuda.synchronize()
    assert (later.data_ptr() == handed.data_ptr()) == (not keep_outputs)
    expected = source[:4] * (-1.0 if not keep_outputs else 2.0)
    assert torch.equal(handed, expected)
