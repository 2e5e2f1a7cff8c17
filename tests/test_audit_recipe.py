"""examples/audit_recipe.py runs in the suite: the audit fails the buggy step, naming the padded row
and the buffer it overwrote, and passes the fixed one. Every expectation is derived from the batch
and the capture sizes, not copied from a printed report."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("audit_recipe", ROOT / "examples" / "audit_recipe.py")
recipe = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = recipe  # dataclasses look their module up there
_spec.loader.exec_module(recipe)

OUTPUTS = ("sampled_logprob", "sampled_rank")


@pytest.fixture(scope="module")
def run():
    """main() as a user runs it, with what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        results = recipe.main([])
    return results, out.getvalue()


def _check_buggy(report, batch):
    n = len(batch)
    padded_row, stale_slot, owner = n, batch[-1], n - 1  # the "stale" poison: row n keeps the last live slot
    assert recipe.rows_for(n) > n, "the headline batch must need padding"
    assert not report.passed and str(report).startswith("FAIL")
    stale = [f for f in report.findings if recipe.STALE in f.poisons]
    assert {f.buffer for f in stale} == set(OUTPUTS), "both slot-indexed outputs are overwritten"
    for f in stale:
        assert (f.writer, f.index[0], f.owner) == (padded_row, stale_slot, owner)
        assert f.sentence() == f"padded row {padded_row} wrote {f.buffer}[{stale_slot}] owned by row {owner}"
    # Every finding names a padded row writing a live slot's record, in a checked output.
    for f in report.findings:
        assert f.writer is not None and n <= f.writer < recipe.rows_for(n)
        assert f.buffer in OUTPUTS and f.index[0] in batch
        assert f.writer_text == f"padded row {f.writer}"


def test_buggy_step_fails_and_names_the_padded_row_and_the_overwritten_buffer(run):
    results, printed = run
    report = results.reports["buggy"]
    _check_buggy(report, recipe.HEADLINE_BATCH)
    assert str(report) in printed


def test_fixed_step_passes(run):
    results, printed = run
    report = results.reports["fixed"]
    assert report.passed and not report.findings
    assert set(report.checked) == set(OUTPUTS)
    assert str(report) in printed


def test_the_walk_fails_exactly_the_padded_batches_without_the_fill(run):
    results, _ = run
    assert set(results.sweeps) == set(recipe.FORMS)
    for form, cases in results.sweeps.items():
        sizes = {c.size for c in cases}
        assert sizes == set(recipe.CAPTURE_SIZES)
        for size in recipe.CAPTURE_SIZES:
            smaller = max([s for s in recipe.CAPTURE_SIZES if s < size], default=0)
            counts = {len(c.live_slots) for c in cases if c.size == size}
            assert counts == set(range(smaller + 1, size + 1)), "every live count that pads into the size"
        assert any(c.padded for c in cases) and any(not c.padded for c in cases)
        for c in cases:
            fill, _mask = recipe.FORMS[form]
            # Without the host fill a padded row keeps a live slot (the "stale" poison); the mask
            # alone cannot tell a stale slot from a live one. Unpadded batches have nothing to corrupt.
            assert c.report.passed == (fill or not c.padded), (form, c.size, c.live_slots, str(c.report))


@pytest.mark.skipif(not recipe.triton_interpreted(), reason="needs Triton, run in its CPU interpreter")
def test_the_triton_form_gives_the_same_verdicts():
    _check_buggy(recipe.audit("buggy", kernel="triton"), recipe.HEADLINE_BATCH)
    assert recipe.audit("fixed", kernel="triton").passed
    assert not recipe.audit("mask-only", kernel="triton").passed


def test_the_unmasked_kernel_refuses_a_negative_slot():
    scatter = recipe.LogprobScatter(recipe.HEADLINE_BATCH, form="fixed")
    scatter.copy_inputs()  # padded row 7 now holds -1
    with pytest.raises(IndexError, match="out-of-bounds"):
        recipe.scatter_torch(scatter.logits, scatter.sampled, scatter.idx_mapping, scatter.sampled_logprob,
                             scatter.sampled_rank, rows=recipe.MAX_ROWS, mask=False)


# -- the second property: examples/lifetime_recipe.py ------------------------------------------------

_lspec = importlib.util.spec_from_file_location("lifetime_recipe", ROOT / "examples" / "lifetime_recipe.py")
lifetime = importlib.util.module_from_spec(_lspec)
sys.modules[_lspec.name] = lifetime
_lspec.loader.exec_module(lifetime)


def _graph_rows(n: int) -> int:
    return next(size for size in lifetime.CAPTURE_SIZES if size >= n)


def test_the_overlapped_step_fails_exactly_where_the_next_step_replays_the_same_graph():
    reports = lifetime.main([])
    expected = tuple(t for t in range(lifetime.STEPS)
                     if _graph_rows(lifetime.BATCHES[t]) == _graph_rows(lifetime.BATCHES[t + 1]))
    assert 0 < len(expected) < lifetime.STEPS, "the batches must hold both kinds of step"
    (found,) = reports["buggy"].findings
    assert found.steps == expected
    assert (found.buffer, found.writer, found.reader) == ("logprobs", "graph at step t+1", "output processor of step t")
    assert found.rows == tuple(range(max(lifetime.BATCHES[t] for t in expected)))
    assert reports["copied"].passed


def test_the_recipe_page_shows_what_the_lifetime_script_prints():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        lifetime.main([])
    page = (ROOT / "docs" / "AUDIT_RECIPE.md").read_text()
    shown = page.split("Run `python\nexamples/lifetime_recipe.py`:\n\n```\n", 1)[1].split("\n```", 1)[0]
    assert shown == out.getvalue().rstrip("\n")
