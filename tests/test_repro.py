"""The bench's claims, computed by running it: buggy modes corrupt, the fix restores eager exactly.

The claims run the toy engine end to end with the torch backend (the kernels' references, a few
seconds each); one check runs the Triton source (the interpreter on a CPU) on a small workload and
compares its counts with the torch backend's.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from labkit import backends
from labkit.bench.modes import ALL_MODES, MODES, resolve_modes
from labkit.bench.repro import (
    DIFF_MARK,
    LEGEND,
    BenchConfig,
    BenchResult,
    ModeResult,
    first_difference,
    format_examples,
    format_table,
    report,
    run_bench,
)
from labkit.errors import LabkitInputError

CORRUPTING = ("graph-buggy", "graph-kernel-only", "dflash-buggy")
FAITHFUL = ("graph-fixed", "greedy-graph-buggy", "dflash-fixed")


@pytest.fixture(scope="module", params=[(2, 16), (3, 16)], ids=lambda p: f"seed{p[0]}-{p[1]}prompts")
def all_modes(request, models):
    seed, prompts = request.param
    with backends.using_backend("torch"):
        return run_bench(BenchConfig(prompts=prompts, seed=seed), ALL_MODES, models=models, progress=False)


def _decoded_differences(result: BenchResult, mode: str) -> list[int]:
    ref = result.texts[result.modes[mode].reference]
    return [rid for rid, text in result.texts[mode].items() if text != ref[rid]]


def test_buggy_modes_corrupt_and_the_counts_match_the_texts(all_modes):
    for mode in CORRUPTING:
        r = all_modes.modes[mode]
        assert r.corrupted > 0 and r.identical_to_eager == r.responses - r.corrupted, mode
        # The count is the responses whose text differs from the eager reference's.
        assert r.corrupted_rids == _decoded_differences(all_modes, mode), mode
    assert all_modes.modes["graph-buggy"].mean_target_nll > all_modes.modes["eager"].mean_target_nll


def test_fixed_and_greedy_modes_are_identical_to_eager(all_modes):
    prompts = all_modes.config.prompts
    for mode in FAITHFUL + ("eager", "greedy-eager", "dflash-eager"):
        r = all_modes.modes[mode]
        assert (r.responses, r.identical_to_eager, r.corrupted) == (prompts, prompts, 0), mode
        assert all_modes.texts[mode] == all_modes.texts[MODES[mode].reference], mode


def test_fill_without_mask_is_refused_never_counted(all_modes):
    r = all_modes.modes["graph-host-only"]
    assert r.refused and "mask" in r.error and "graph-host-only" not in all_modes.texts
    record = all_modes.to_json()["modes"]["graph-host-only"]
    assert record["refused"] is True and record["corrupted"] is None and record["identical_to_eager"] is None
    assert "slot >= 0" in record["error"]
    line = next(row for row in format_table(all_modes).splitlines() if row.startswith("graph-host-only"))
    assert line.split()[3:5] == ["-", "refused"]
    assert "graph-host-only refused:" in report(all_modes)
    assert "corrupted: 0" not in report(all_modes) + json.dumps(all_modes.to_json())


def test_the_json_record_names_its_backend_and_the_words(all_modes):
    record = all_modes.to_json()
    assert record["backend"]["name"] == record["config"]["backend"] == "torch"
    assert "--backend interpreter" in record["backend"]["triton_source"]
    assert record["legend"] == LEGEND
    for mode, entry in record["modes"].items():
        assert entry["reference"] == MODES[mode].reference


def _counts(record: dict) -> dict:
    return {m: (r["responses"], r["identical_to_eager"], r["corrupted"]) for m, r in record["modes"].items()}


@pytest.mark.skipif(not backends.HAS_TRITON, reason="the interpreter runs the Triton source: needs Triton")
def test_the_triton_source_in_the_interpreter_gives_the_torch_backends_counts(models):
    modes, prompts = "graph-buggy,graph-fixed,dflash-buggy", 3  # 3: the fewest where both buggy modes corrupt
    # Through the CLI: on a GPU box it re-runs itself in a process whose kernels are interpreted.
    out = subprocess.run([sys.executable, "-m", "labkit", "repro", "--backend", "interpreter", "--prompts",
                          str(prompts), "--modes", modes, "--json", "--quiet"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    interpreted = json.loads(out.stdout)
    assert interpreted["backend"]["name"] == "interpreter"
    with backends.using_backend("torch"):
        reference = run_bench(BenchConfig(prompts=prompts), modes.split(","), models=models, progress=False)
    assert _counts(interpreted) == _counts(reference.to_json())
    assert _counts(interpreted)["graph-buggy"][2] > 0 and _counts(interpreted)["graph-fixed"][2] == 0


def _synthetic(ref: str, bad: str) -> BenchResult:
    modes = {"eager": ModeResult("eager", "eager", 1, 1, 0, 0.5, 0.3, 10.0, 0.9),
             "graph-buggy": ModeResult("graph-buggy", "eager", 1, 0, 1, 0.6, 0.5, 10.0, 0.8, corrupted_rids=[0])}
    return BenchResult(BenchConfig(prompts=1), modes, {"eager": {0: ref}, "graph-buggy": {0: bad}}, ["a "], 1.0,
                       backend="torch")


def test_samples_mark_the_first_difference_and_wrap_on_word_boundaries():
    ref = "the valley. he paints the rope and hurries to the mill\nwith a net before the rain comes"
    bad = "the valley. he paints the rope min by the beach. she is happy at last and goes home to sleep"
    at = first_difference(ref, bad)
    assert ref[:at] == bad[:at] and ref[at] != bad[at]
    text = format_examples(_synthetic(ref, bad), "graph-buggy", width=30)
    assert f"first differs at character {at}" in text
    body = [line[4:] for line in text.splitlines()[2:]]
    left = " ".join(line[:30].strip() for line in body).split()
    right = " ".join(line[32:].strip() for line in body).split()
    # Every word comes through whole (none cut at the column's edge), the mark where they part.
    assert left == (ref[:at] + DIFF_MARK + ref[at:]).replace("\n", " / ").split()
    assert right == (bad[:at] + DIFF_MARK + bad[at:]).split()
    assert all(len(line[:30].rstrip()) <= 30 for line in body)


@pytest.mark.parametrize("a,b,expected", [("abc", "abc", None), ("abc", "abd", 2), ("ab", "abc", 2), ("", "x", 0)])
def test_first_difference(a, b, expected):
    assert first_difference(a, b) == expected


def test_the_report_explains_its_words_and_backend():
    text = " ".join(report(_synthetic("up a net", "upset")).split())
    for word in ("identical:", "corrupted:", "backend torch", "Triton source: not run here", "--backend interpreter"):
        assert word in text
    assert "refused:" not in text  # explained only when a mode was refused


def test_mode_resolution_adds_references_and_refuses_unknown_modes():
    assert resolve_modes("dflash-buggy") == ["dflash-eager", "dflash-buggy"]
    assert resolve_modes("graph-buggy,greedy-graph-buggy")[:2] == ["eager", "greedy-eager"]
    assert set(resolve_modes("all")) == set(ALL_MODES)
    with pytest.raises(LabkitInputError, match="unknown mode"):
        resolve_modes("graph-bugy")


@pytest.mark.parametrize("prompts", [0, -3, 2.5, True])
def test_the_bench_refuses_a_prompt_count_that_is_not_a_positive_integer(prompts):
    with pytest.raises(LabkitInputError, match="prompts must be a positive integer"):
        run_bench(BenchConfig(prompts=prompts), progress=False)
