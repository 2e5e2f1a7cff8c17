"""Every measured number the kit teaches comes from a record, and a test fails when one drifts.

Three kinds of check, each with its tolerance stated beside it:

* blocks: the docs and the notebooks' markdown hold their measured numbers, and every sentence that
  restates a constant of the code, between ``<!-- KIND:NAME -->`` markers, rendered from the records,
  the code or a deterministic run (labkit.docgen.blocks, labkit.docgen.numbers). Tolerance: none on
  the text; the numbers are the record's, rounded as printed (a range "a-b" is the record's minimum
  and maximum over the stated shapes). Any hand edit inside a block, or a record re-measured without
  ``python -m labkit docs --write`` (``make refresh``), fails;
* prose: the words around a block that judge its numbers ("saves little") are checked against the
  record, each with its own tolerance below;
* no stray claims: outside the blocks, the docs and the GPU notebooks' prose hold no speed-up,
  bandwidth or mask-cost number at all.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import pytest

from labkit.docgen import blocks, numbers
from labkit.viz.gpu_records import load_record, race_block_entries

ROOT = Path(__file__).resolve().parents[1]
DOCS = {name: ROOT / name for name in blocks.documents()}
GPU_NOTEBOOKS = ("notebooks/04_timing.ipynb", "notebooks/08_appendix_kernel_engineering.ipynb")


def _room_installed() -> bool:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("labkit-room")
    except PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="module")
def renderers():
    return numbers.all_renderers()


@pytest.fixture(scope="module")
def gpu():
    return load_record()


def _blocks():
    return [(name, key) for name, path in DOCS.items() for key in blocks.keys_in(blocks.text_of(path))]


# -- blocks: exact -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("doc", "key"), _blocks())
def test_each_block_is_its_records_rendering(renderers, doc, key):
    # Tolerance: none. The text between the markers must be exactly what the record renders to.
    if key not in renderers and not _room_installed():
        pytest.skip("the room's blocks are rendered by the room's distribution (room/), not installed here")
    assert key in renderers, f"{doc} has a block {key} that nothing renders"
    shown = blocks.rendered_in(blocks.text_of(DOCS[doc]), key)
    assert shown == renderers[key](), (
        f"{doc}'s block {key} differs from its record: a number was edited by hand, or the record was "
        f"re-measured; run python -m labkit docs --write")


def test_every_rendered_block_is_taught_somewhere(renderers):
    shown = {key for _, key in _blocks()}
    assert set(renderers) <= shown, f"blocks rendered but in no document: {sorted(set(renderers) - shown)}"


def test_a_number_changed_in_a_document_is_caught(tmp_path, renderers):
    doc = tmp_path / "README.md"
    doc.write_text(DOCS["README.md"].read_text())
    assert blocks.stale_blocks(doc, renderers) == []
    text = doc.read_text()
    block = blocks.rendered_in(text, "gpu:kernel")
    planted = re.sub(r"(\d+)-(\d+)% of the", lambda m: f"{m[1]}-{int(m[2]) + 3}% of the", block, count=1)
    assert planted != block
    doc.write_text(text.replace(block, planted))
    assert blocks.stale_blocks(doc, renderers) == ["gpu:kernel"]


def test_a_record_that_drifts_no_longer_matches_the_docs(gpu):
    drifted = copy.deepcopy(gpu)
    for entry in drifted["kernel"]["sizes"]:
        entry["ms"]["masked"] *= 1.10  # the kernel 10% slower: its share of copy bandwidth falls
    shown = blocks.rendered_in(DOCS["README.md"].read_text(), "gpu:kernel")
    assert numbers.renderers(gpu=gpu)["gpu:kernel"]() == shown
    assert numbers.renderers(gpu=drifted)["gpu:kernel"]() != shown


def test_the_figures_and_the_text_quote_the_same_race_shares(gpu):
    # The race_blocks figure labels each run with the share the text prints (both from race_runs).
    from labkit.viz.gpu_records import race_runs

    text = blocks.rendered_in(DOCS["README.md"].read_text(), "gpu:race")
    for run in race_runs(gpu):
        if run["vocab"] == numbers.REAL_VOCAB:
            assert f"{run['padded_share']:.0%} in run {run['run']}" in text


# -- records: what they must hold ---------------------------------------------------------------------

def test_every_gpu_section_has_its_own_provenance(gpu):
    for name in ("kernel", "graphs", "torch_natural", "race", "race_blocks", "sanitizer", "e2e", "sweep",
                 "staircase_kernel", "staircase_toy", "peak_copy"):
        stamp = gpu["section_provenance"][name]
        assert {"date", "device", "driver", "cuda", "torch", "triton", "git_commit"} <= set(stamp), name
        assert "machine" not in stamp, name  # hardware and versions name where it ran, not the host we borrowed
    assert "notes" not in gpu and "note" not in gpu["provenance"]  # a record's history is the repository's


def test_the_record_keeps_the_earlier_runs_its_readers_cite_and_no_other(gpu):
    """Where every run is data (the race, the graphs' speed-up over eager launches) the record keeps
    each run; elsewhere only an earlier run a doc cites stays (labkit.records), so the record holds
    what the docs quote and the repository's history the rest."""
    from labkit.records import EVERY_RUN

    for name, old in gpu["superseded"].items():
        assert old and all(o["data"] for o in old), name
        if name not in EVERY_RUN:
            assert all(o.get("cited_by") for o in old), f"{name}: an earlier run no doc cites"
    assert set(EVERY_RUN) <= set(gpu["superseded"])
    cited = {o["cited_by"].split(":")[0] for runs in gpu["superseded"].values() for o in runs if o.get("cited_by")}
    for where in cited:  # each citing file reads the run it cites
        assert "cited_run(" in (ROOT / where).read_text() or "gpu:early-exit" in (ROOT / where).read_text(), where


def test_the_sanitizer_run_of_the_stale_slot_kernel_is_recorded(gpu):
    stale = gpu["sanitizer"]["stale_slot"]
    # memcheck sees nothing while the padded row overwrites a live q: exactly 0 errors, >= 1 overwrite
    assert stale["errors"] == 0 and stale["invalid_reads"] == 0 and stale["invalid_writes"] == 0
    audit = stale["probe"]["audit"]
    assert audit["padded_values_in_live_q"] >= 1 and audit["live_q_differs_from_unpadded"] >= 1


# -- prose outside blocks, each with its tolerance --------------------------------------------------------

def _markdown(path: str) -> str:
    cells = json.loads((ROOT / path).read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _code(path: str) -> str:
    cells = json.loads((ROOT / path).read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_notebook_04s_race_block_names_the_block_the_code_launches(gpu):
    # Tolerance: none. The rendered race prose names the block the compiled kernel launches for the
    # race's 8 rows at the real vocabulary.
    from labkit.kernels.gumbel_tuning import launch_config

    shown = blocks.rendered_in(blocks.text_of(ROOT / "notebooks/04_timing.ipynb"), "gpu:race-notebook")
    real = next(e for e in race_block_entries(gpu) if e["vocab"] == numbers.REAL_VOCAB)
    assert real["block_v"] == launch_config(8, numbers.REAL_VOCAB, interpreted=False)["block_v"]
    assert f"a row is {real['num_blocks']} blocks of {real['block_v']}" in " ".join(shown.split())


def test_the_readmes_ablation_sentence_is_a_fresh_runs():
    # Tolerance: none. The CPU bench is deterministic (seeded, torch backend); the block renders from it.
    from labkit.workshop.editions.secrecy import spoilers

    spoiler = spoilers(DOCS["README.md"].read_text())[0]
    result = numbers.ablation_run()
    assert blocks.rendered_in(spoiler, "run:ablations") == numbers.wrap(numbers.render_ablations(result))
    assert result.modes["dflash-buggy"].corrupted > 0 and result.modes["graph-host-only"].refused


def test_the_repro_record_holds_what_the_bench_gives_now():
    # Tolerance: none on the counts (deterministic on the torch backend); the times are the record's.
    from labkit.backends import using_backend
    from labkit.bench.modes import DEFAULT_MODES
    from labkit.bench.repro import BenchConfig, run_bench

    table = numbers.cpu_record()["commands"][numbers.DEFAULT_REPRO]["output"].splitlines()
    recorded = {line.split()[0]: int(line.split()[4]) for line in table[1:]}
    with using_backend("torch"):
        result = run_bench(BenchConfig(prompts=50, seed=0), DEFAULT_MODES, progress=False)
    assert recorded == {mode: result.modes[mode].corrupted for mode in recorded}


# -- no stray claims ---------------------------------------------------------------------------------------

STRAY = (r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x (?:faster|slower)", r"\d+% of (?:the )?[\w -]*copy",
         r"\d+ GB/s", r"\b0\.9\d\s*(?:-|and)\s*1\.0\d\b", r"\babout a third\b")


def _outside_blocks(text: str) -> str:
    for key in blocks.keys_in(text):
        begin, end = blocks.markers(key)
        text = text.replace(f"{begin}\n{blocks.rendered_in(text, key)}\n{end}", "")
    return text


@pytest.mark.parametrize("path", [*blocks.DOCUMENTS, *GPU_NOTEBOOKS])
def test_no_measured_gpu_claim_is_typed_by_hand(path):
    text = _markdown(path) if path.endswith(".ipynb") else _outside_blocks((ROOT / path).read_text())
    found = [m.group(0) for pattern in STRAY for m in re.finditer(pattern, " ".join(text.split()))]
    assert not found, f"{path} types measured numbers by hand (render them from the record instead): {found}"


def test_the_make_test_block_lists_each_recorded_stage_and_the_whole():
    prov = {"date": "2026-12-01 15:00 UTC", "machine": "2 cores", "torch": "2.13.0+cpu", "command": "bench"}
    record = {"commands": {
        "make test (fresh clone) stage unit": {"seconds": [120.4], "target_s": None, "ok": True, "provenance": prov},
        "make test (fresh clone) stage room": {"seconds": [71.0], "target_s": None, "ok": True, "provenance": prov},
        "make test (fresh clone)": {"seconds": [512.2], "target_s": 600.0, "ok": True, "provenance": prov}}}
    text = numbers.render_make_test(record)
    assert "| unit | 120 |" in text and "| room | 71 |" in text and "**512**" in text
    assert "(passed)" in text and "under 10 minutes" in text and "2026-12-01 15:00 UTC" in text
    record["commands"]["make test (fresh clone)"]["ok"] = False
    assert "(FAILED)" in numbers.render_make_test(record)
    assert "No fresh-clone run" in numbers.render_make_test({"commands": {}})
    assert "beside" not in numbers.render_make_test(record)
    # A stage that ran in the background is marked, and the block says why the stages outsum the whole.
    record["commands"]["make test (fresh clone) stage room"]["note"] = "passed beside"
    text = " ".join(numbers.render_make_test(record).split())
    assert "| room (beside other stages) | 71 |" in text and "| unit | 120 |" in text
    assert "room ran in the background, beside other stages" in text and "the wall clock" in text


def test_the_make_test_block_names_its_commit_and_the_target_without_the_set_up():
    prov = {"date": "2026-12-01 15:00 UTC", "machine": "2 cores", "command": "bench", "commit": "0123456789abcdef"}
    record = {"commands": {
        "make test (fresh clone) stage set-up": {"seconds": [30.2], "target_s": None, "ok": True, "provenance": prov},
        "make test (fresh clone) stage unit": {"seconds": [120.4], "target_s": None, "ok": True, "provenance": prov},
        "make test (fresh clone)": {"seconds": [300.6], "target_s": 360.0, "ok": True, "provenance": prov,
                                    "target_excludes": ["set-up"]}}}
    text = " ".join(numbers.render_make_test(record).split())
    assert "fresh clone of commit 0123456" in text and "| **without the set-up** | **270** |" in text
    assert "target: under 6 minutes without the set-up" in text
    del prov["commit"]
    assert "a commit the record does not name" in numbers.render_make_test(record)


def test_the_make_test_block_says_chromium_was_there_only_where_the_browser_stage_ran():
    prov = {"date": "2026-12-01 15:00 UTC", "machine": "2 cores", "command": "bench", "commit": "0123456789abcdef"}
    browser = {"seconds": [90.0], "target_s": None, "ok": True, "provenance": prov, "note": "passed"}
    record = {"commands": {
        "make test (fresh clone) stage browser": browser,
        "make test (fresh clone)": {"seconds": [300.6], "target_s": 360.0, "ok": True, "provenance": prov}}}
    assert "Chromium already installed" in " ".join(numbers.render_make_test(record).split())
    browser["note"] = "skipped"
    text = " ".join(numbers.render_make_test(record).split())
    assert "Chromium already installed" not in text and "the browser stage skipped: no Chromium" in text
    del record["commands"]["make test (fresh clone) stage browser"]
    assert "no browser stage recorded" in " ".join(numbers.render_make_test(record).split())


def test_bench_cpu_times_a_fresh_clone_with_the_browser_stage_required(monkeypatch):
    # As CI: a clone without Chromium fails its browser stage rather than recording a faster skip.
    bench = _bench_cpu()
    seen = {}

    def fake_run(cmd, *, cwd=None, env=None):
        seen.update(cmd=cmd, env=env)
        return 1.0, subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(bench, "_run", fake_run)
    # No real clone or git call: this checks only the environment make test is given.
    monkeypatch.setattr(bench.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, "", ""))
    monkeypatch.delenv("LABKIT_REQUIRE_BROWSER", raising=False)
    bench.time_fresh_clone()
    assert seen["cmd"] == ["make", "test"] and seen["env"]["LABKIT_REQUIRE_BROWSER"] == "1"
    bench.time_make_test(ROOT, "make test")  # the tree's own run keeps the caller's environment
    assert "LABKIT_REQUIRE_BROWSER" not in seen["env"]


def _bench_cpu():
    from labkit.tools import bench_cpu

    return bench_cpu


def test_bench_cpu_records_the_commit_a_fresh_clone_measured(tmp_path):
    bench = _bench_cpu()
    measured = {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False}
    stage = bench.Timing("make test (fresh clone) stage set-up", 30.0, None, True, commit=measured)
    whole = bench.Timing(numbers.FRESH_CLONE, 330.0, 360.0, True, commit=measured, excluded_s=30.0)
    assert whole.verdict() == "within target"  # 300 s counted: the set-up is left out
    path = bench.write_command_record([stage, whole], "bench", path=tmp_path / "times.json")
    record = json.loads(path.read_text())
    assert record["commands"][numbers.FRESH_CLONE]["provenance"]["commit"] == measured["commit"]
    assert record["commands"][numbers.FRESH_CLONE]["target_excludes"] == ["set-up"]
    # Measured again with other stages: the old stages go, the new ones keep their running order.
    later = [bench.Timing(f"{numbers.FRESH_CLONE} stage {name}", 10.0, None, True, commit=measured)
             for name in ("unit", "lint")]
    bench.write_command_record([*later, whole], "bench", path=path)
    stages = [w for w in json.loads(path.read_text())["commands"] if w.startswith(numbers.FRESH_CLONE + " stage ")]
    assert stages == [f"{numbers.FRESH_CLONE} stage unit", f"{numbers.FRESH_CLONE} stage lint"]
    here = bench.commit_of(ROOT)  # this tree's own, where no clone was measured
    assert here["commit"] is None or len(here["commit"]) == 40


def test_readme_renders_a_make_test_record_of_a_commit_that_is_an_ancestor_of_head():
    # The rendered `make test` times must be of code this tree descends from. The record
    # is committed after the run, so the commit it names is HEAD's ancestor (or HEAD, when measured by hand).
    from checkout import git, no_git_reason

    prov = numbers.cpu_record()["commands"][numbers.FRESH_CLONE]["provenance"]
    commit = prov.get("commit")
    assert commit, ("labkit/data/cpu/command_times.json's fresh-clone run names no commit: measure again on "
                    "the commit to ship, make bench-cpu ARGS=\"--only fresh-clone\", and commit the record")
    block = blocks.rendered_in(DOCS["docs/MAINTAINING.md"].read_text(), "cpu:make-test") or ""
    shown = re.search(r"fresh clone of commit ([0-9a-f]{7,40})", block)
    assert shown and commit.startswith(shown.group(1)), "MAINTAINING.md's make-test block does not name the commit"
    if git("rev-parse", "HEAD") is None:
        pytest.skip(no_git_reason() + f": the record's commit {commit[:7]} is named, its ancestry not checked")
    known = git("cat-file", "-e", f"{commit}^{{commit}}")
    if known.returncode != 0 and git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip(f"a shallow clone: the record's commit {commit[:7]} is older than the history it holds")
    assert known.returncode == 0, f"the record's commit {commit} is not in this repository's history"
    ancestor = git("merge-base", "--is-ancestor", commit, "HEAD")
    assert ancestor.returncode == 0, (f"README.md renders make test's times measured at {commit[:7]}, which is not "
                                      "an ancestor of HEAD: measure again (make bench-cpu ARGS=\"--only fresh-clone\")")


def test_notebook_08_sets_the_compiled_default_beside_the_sweeps_fastest_whole_call(gpu):
    """Notebook 08 prints, per swept shape, the default configuration's whole call (in the default pass
    mode) beside the fastest whole call of any configuration, and names the default in prose."""
    from labkit.kernels.gumbel_tuning import GPU_BLOCK_V, GPU_NUM_WARPS, SINGLE_PASS
    from labkit.viz.gpu_records import sweep_default_against_fastest

    default_call = "call_single_pass" if SINGLE_PASS else "call_two_pass"
    default = (GPU_BLOCK_V, GPU_NUM_WARPS)
    rows = {(e["rows"], e["vocab"]): e for e in sweep_default_against_fastest(gpu, default, SINGLE_PASS)}
    assert rows and all("default" in e for e in rows.values()), "the sweep measures the default everywhere"
    for c in gpu["sweep"]["configs"]:
        e = rows[(c["rows"], c["vocab"])]
        calls = {k: c["copy_ms"] / v for k, v in c["ms"].items() if k.startswith("call_")}
        assert max(calls.values()) <= e["fastest"]  # no configuration is faster than "the fastest"
        if (c["block_v"], c["num_warps"], max(calls, key=calls.get)) == e["fastest_config"]:
            assert max(calls.values()) == e["fastest"]
        if (c["block_v"], c["num_warps"]) == default:
            assert e["default"] == calls[default_call] and e["default_config"] == default
    # The sweep measures the default from 64 to 512 rows, which "at every row count" stands on.
    assert {r for r, _ in rows} >= {64, 128, 256, 512}
    # The sentence naming the default is rendered from the code's constants.
    notebook = blocks.text_of(ROOT / "notebooks/08_appendix_kernel_engineering.ipynb")
    assert "const:gpu-default" in blocks.keys_in(notebook)
    said = numbers.render_gpu_default()
    assert f"{GPU_NUM_WARPS} warps" in said and f"blocks of {GPU_BLOCK_V} entries" in said


def test_vllm_maps_sentence_on_the_kits_block_names_the_codes_constants():
    """docs/VLLM_MAP.md says which block the kit launches, and from how many rows it launches in parts:
    rendered from the code's constants, whichever way they change."""
    from labkit.kernels import gumbel_tuning as tuning

    assert "const:block-map" in blocks.keys_in(DOCS["docs/VLLM_MAP.md"].read_text())
    said = numbers.render_block_map()
    assert f"On both backends the block is {tuning.GPU_BLOCK_V}" in said and str(tuning.MAX_GRID_ROWS) in said
    try:
        tuning.GPU_BLOCK_V = 2 * tuning.DEFAULT_BLOCK_V
        said = numbers.render_block_map()
        assert f"The interpreter's block is {tuning.DEFAULT_BLOCK_V} and the compiled kit's" in said
    finally:
        tuning.GPU_BLOCK_V = tuning.DEFAULT_BLOCK_V


def test_notebook_04s_early_exit_prose_matches_the_record(gpu):
    """Notebook 04: in plain row order "early exit saved little" (the run before last), and taking rows
    from both ends brings it "close to the cost of the live rows alone" (this record)."""
    from labkit.viz.gpu_records import cited_run, early_exit_shares

    text = " ".join(_markdown("notebooks/04_timing.ipynb").split())
    assert "early exit saves little" in text and "comes close to the cost of the live rows alone" in text
    assert 'cited_run(record, "kernel", "early exit")' in _code("notebooks/04_timing.ipynb")
    row_order = early_exit_shares(cited_run(gpu, "kernel", "early exit")["data"])
    now = early_exit_shares(gpu["kernel"])
    # "Saved little": at least nine tenths of the masked launch at every size from 64 rows.
    assert row_order["early_exit"][0] >= 0.9
    # "Close to the cost of the live rows alone": within a tenth of the masked launch of it, at worst.
    assert now["early_exit"][1] - now["live_rows_only"][1] < 0.1 and now["early_exit"][1] < 0.9


# -- the words beside a notebook's printed numbers --------------------------------------------------
# Where a notebook's prose restates what a cell prints, the test computes the number the cell computes
# and reads it back out of the prose (and out of the stored output), so neither can drift alone.

def _notebook(name: str):
    import nbformat

    return nbformat.read(ROOT / "notebooks" / name, as_version=4)


def test_exercise_d_says_the_overflow_starts_where_its_checker_says_it_does(monkeypatch):
    import torch

    from labkit import backends
    from labkit.workshop import checkers as ex
    from labkit.workshop.exercises.store_offset import BIG_K, BIG_V, first_overflowing_slot

    first = first_overflowing_slot()
    # The slot itself: the product no longer fits from `first` on, and still did one slot before.
    assert first * BIG_K * BIG_V > 2**31 - 1 >= (first - 1) * BIG_K * BIG_V
    task = next(c.source for c in _notebook("07_exercises.ipynb").cells if c.get("id") == "d-task")
    assert f"stride_slot = {BIG_K * BIG_V:,}" in task
    assert re.findall(r"from slot (\d+)", task) == [str(first)], task

    def q_offset(slot, step, stride_slot, stride_step):
        return slot.to(torch.int64) * stride_slot + step * stride_step

    monkeypatch.setattr(backends, "HAS_TRITON", False)  # the torch version: the same verdict, no interpreter
    verdict = str(ex.check_offset({"q_offset": q_offset}))
    assert "solved" in verdict and re.findall(r"from slot (\d+)", verdict) == [str(first)], verdict


def test_notebook_04s_summary_prints_its_sizes_and_an_early_exit_inside_the_range_its_text_gives(gpu):
    from labkit.viz.gpu_records import early_exit_shares, headline

    h, shares = headline(gpu), early_exit_shares(gpu["kernel"])
    low, high = shares["early_exit"]
    # The summary's worst case is over the largest batches, a subset of the 64-512 rows the text's range covers.
    assert all(rows >= 64 for rows, _ in h["sizes"])
    assert round(low, 2) <= round(h["max_early_exit_over_masked"], 3) <= round(high, 2)
    nb = _notebook("04_timing.ipynb")
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## Summary"))
    printed = "".join(o.get("text", "") for o in nb.cells[at + 1].outputs)
    assert f"early exit / masked, half the rows padded: at most {h['max_early_exit_over_masked']:.3f}" in printed
    assert ", ".join(f"{r} x {v}" for r, v in h["sizes"]) in printed
    assert f"costs {low:.2f}-{high:.2f}" in "".join(c.source for c in nb.cells[:at]).replace("\n", " ")


def test_notebook_00_names_every_notebook_in_the_order_a_learner_opens_them():
    from labkit.workshop.editions.secrecy import STUDENT_PATH

    cell = next(c.source for c in _notebook("00_setup_and_tour.ipynb").cells if "## What comes next" in c.source)
    named = re.findall(r"^\* \*\*(\d\d) ·", cell, re.MULTILINE)
    assert named == [name[:2] for name in STUDENT_PATH[1:]], named
