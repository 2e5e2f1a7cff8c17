"""The bench's claims, computed by running it: buggy graphs corrupt, the fix restores eager exactly.

These run the toy engine end to end in Triton's interpreter (about a minute each on 2 cores).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from labkit.checks import LabkitInputError
from labkit.modes import ALL_MODES, resolve_modes
from labkit.repro import BenchConfig, run_bench

CHECKED = ["graph-buggy", "graph-fixed", "graph-fill-only", "graph-mask-only", "greedy-graph-buggy",
           "dflash-buggy", "dflash-fixed"]


def _assert_claims(modes: dict, responses: int) -> None:
    assert modes["graph-fixed"]["identical_to_eager"] == responses
    assert modes["graph-buggy"]["corrupted"] >= max(1, responses // 10)
    assert modes["graph-buggy"]["mean_target_nll"] > modes["eager"]["mean_target_nll"]
    if "graph-mask-only" in modes:
        assert modes["graph-mask-only"]["corrupted"] >= 1
        assert modes["greedy-graph-buggy"]["corrupted"] == 0
        assert modes["dflash-buggy"]["corrupted"] >= 1
        assert modes["dflash-fixed"]["corrupted"] == 0
        assert modes["graph-fill-only"]["error"] and "mask" in modes["graph-fill-only"]["error"]


@pytest.mark.slow
def test_cli_defaults_reproduce_the_bug_and_the_fix():
    out = subprocess.run([sys.executable, "-m", "labkit", "repro", "--json", "--quiet"],
                         capture_output=True, text=True, check=True)
    record = json.loads(out.stdout)
    assert set(record["modes"]) == {"eager", "graph-buggy", "graph-fixed"}
    for mode in record["modes"].values():
        assert {"responses", "identical_to_eager", "corrupted", "acceptance_rate", "mean_target_nll"} <= set(mode)
        assert mode["responses"] == 50
    assert record["config"]["prompts"] == 50 and record["config"]["seed"] == 0
    _assert_claims(record["modes"], 50)


@pytest.mark.slow
@pytest.mark.parametrize("seed,prompts", [(5, 16), (11, 24)])
def test_claims_hold_for_other_seeds_and_prompt_counts(seed, prompts):
    result = run_bench(BenchConfig(prompts=prompts, seed=seed), CHECKED, progress=False)
    _assert_claims(result.to_json()["modes"], prompts)


def test_mode_resolution_adds_references_and_refuses_unknown_modes():
    assert resolve_modes("dflash-buggy") == ["dflash-eager", "dflash-buggy"]
    assert resolve_modes("graph-buggy,greedy-graph-buggy")[:2] == ["eager", "greedy-eager"]
    assert set(resolve_modes("all")) == set(ALL_MODES)
    with pytest.raises(LabkitInputError, match="unknown mode"):
        resolve_modes("graph-bugy")


@pytest.mark.parametrize("args,message", [
    (["--modes", "nope"], "unknown mode"),
    (["--prompts", "0"], "positive integer"),
    (["--seed", "x"], "invalid int"),
])
def test_cli_rejects_bad_arguments_clearly(args, message):
    out = subprocess.run([sys.executable, "-m", "labkit", "repro", *args], capture_output=True, text=True)
    assert out.returncode == 2 and message in out.stderr
