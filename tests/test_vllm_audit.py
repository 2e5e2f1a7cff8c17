"""`python -m labkit audit-vllm` and the release matrix on real vLLM releases, read from the registry at test time.

The releases the tests use are named once, in labkit.upstream.releases, each for what it shows. Their
few files are read from the index into build/vllm-trees/ (cached: a second run reads nothing) and
never committed. What each release's verdict must be is not written here: the command runs the kit's
own unmasked and masked kernels in the same scenario (its calibration), each release's kernel must
behave as one of them, and the verdict must follow from the parts by the rule the report states.
Broken trees are built from a real release's files, damaged one way each.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if importlib.util.find_spec("triton") is None:
    pytest.skip("vLLM's sampling kernel is a Triton kernel and Triton is not installed here", allow_module_level=True)

from labkit.bench.scenario import MECHANICS_SCHEDULE, TIMELINE  # noqa: E402
from labkit.upstream import releases  # noqa: E402
from labkit.upstream.fetch import (  # noqa: E402
    FIRST,
    KEPT,
    TREES,
    FetchError,
    cached,
    fetch_release,
    index_releases,
)
from labkit.upstream.loader import KERNEL_FILE  # noqa: E402
from labkit.upstream.report import AFFECTED, EXIT_STATUS, NOT_AFFECTED, NOT_APPLICABLE, UNKNOWN  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPECULATOR = "vllm/v1/worker/gpu/spec_decode/speculator.py"
DFLASH = "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py"


def _tree(version: str) -> Path:
    if cached(version):
        return cached(version)
    try:
        return fetch_release(version, timeout_s=60)
    except FetchError as err:
        if "the index has no" in str(err):
            raise
        pytest.skip(f"vllm=={version} cannot be read from the package index here: {err}")


@pytest.fixture(scope="module")
def trees() -> dict[str, Path]:
    return {v: _tree(v) for v in releases.RELEASES}


def _audit(*args: str, env_backend: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    if env_backend:
        env["LABKIT_BACKEND"] = env_backend
    return subprocess.run([sys.executable, "-m", "labkit", "audit-vllm", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def _main(capfd, *args: str) -> tuple[int, str, str]:
    """The command in this process (a fresh one only where it must switch to the interpreter)."""
    from labkit.__main__ import main

    capfd.readouterr()
    rc = main(["audit-vllm", *args])
    out, err = capfd.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def audits(trees) -> dict[str, dict]:
    out = {}
    for version, tree in trees.items():
        done = _audit("--vllm", str(tree), "--json", "--backend", "interpreter")
        record = json.loads(done.stdout)
        assert done.returncode == record["exit_status"], done.stderr
        out[version] = record
    return out


def _shape(kernel: dict) -> dict:
    """What must match between a release and the kit's kernel of the same kind: the verdicts, which
    live records the stale row changed, and each access outside a buffer (kind, buffer, index)."""
    return {"masks": kernel["kernel_masks_padded_rows"], "corrupt": kernel["stale_slots_still_corrupt"],
            "stale_changed": sorted(kernel["stale"]["live_records_changed"]),
            "filled_changed": sorted(kernel["filled"]["live_records_changed"]),
            "outside": sorted((a["kind"], a["buffer"], a["index"]) for a in kernel["filled"]["out_of_bounds"])}


def _expected_verdict(parts: dict) -> str:
    """The rule the report states (labkit.upstream.report), applied to the parts the audit found."""
    kernel, host, dflash = (parts[k]["state"] for k in ("kernel", "host_fill", "dflash_pad"))
    if kernel == "no slot store":
        return NOT_APPLICABLE
    stores = kernel in ("masked", "unmasked")
    dflash_names_a_slot = dflash.startswith(("pads slot", "keeps stale slot"))
    if kernel == "skips live rows":
        return AFFECTED
    if stores and (host == "no fill" or (kernel == "unmasked" and host == "fills") or dflash_names_a_slot):
        return AFFECTED
    if "unknown" in (kernel, host, dflash):
        return UNKNOWN
    return NOT_AFFECTED


# -- fetching ---------------------------------------------------------------------------------------------

def test_the_fetched_files_are_the_few_the_audit_reads(trees):
    for version, tree in trees.items():
        record = json.loads((tree / "FETCHED_FROM.json").read_text())
        assert record["version"] == version and record["wheel"].startswith(f"vllm-{version}")
        assert len(record["wheel_sha256_listed"]) == 64 and record["uploaded"][:2] == "20"
        files = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()}
        assert files == set(record["files"]) | {"FETCHED_FROM.json"} and KERNEL_FILE in files
        assert sum((tree / f).stat().st_size for f in files) < 3_000_000  # a few hundred kB of a 200-500 MB wheel
        assert not list(TREES.glob(f".{version}-*")) and not list(tree.rglob("*.whl"))


def test_a_tree_fetched_when_the_kit_kept_other_files_is_fetched_again(trees, tmp_path):
    """The files the audit reads grow with it (DFlash's run takes PAD_SLOT_ID from attention's utils):
    a cached tree counts only if it was fetched with today's list."""
    tree = trees[releases.FIRST_FIXED]
    assert cached(releases.FIRST_FIXED) == tree and (tree / "vllm/v1/attention/backends/utils.py").is_file()
    old = tmp_path / releases.FIRST_FIXED
    shutil.copytree(tree, old)
    marker = json.loads((old / "FETCHED_FROM.json").read_text())
    assert marker["kept"] == list(KEPT)
    (old / "FETCHED_FROM.json").write_text(json.dumps({**marker, "kept": list(KEPT[:-1])}))
    assert cached(releases.FIRST_FIXED, tmp_path) is None
    (old / "FETCHED_FROM.json").write_text(json.dumps(marker))
    assert cached(releases.FIRST_FIXED, tmp_path) == old


def test_a_second_fetch_reads_nothing(trees, monkeypatch):
    import urllib.request

    def offline(*a, **k):
        raise AssertionError("the index was asked for a cached release")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    for version, tree in trees.items():
        assert fetch_release(version) == tree


def test_the_first_release_with_the_sampling_kernel_is_the_one_the_matrix_starts_at(tmp_path):
    """The words "from 0.12.0 on" are checked against the index: the release before it has no
    sampling kernel, it has one, and the index's upload dates say when."""
    try:
        known = {r.version: r for r in index_releases()}
    except FetchError as err:  # a machine that cannot reach the package index (a GPU box): said, not hidden
        pytest.skip(f"the package index cannot be reached from here: {err}")
    first = ".".join(map(str, FIRST))
    before = max((r for r in known.values() if r.key < FIRST), key=lambda r: r.key).version
    for version, has_kernel in ((before, False), (first, True)):
        tree = fetch_release(version, tmp_path, releases=list(known.values()))
        assert json.loads((tree / "FETCHED_FROM.json").read_text())["has_sampling_kernel"] is has_kernel, version
    assert known[before].uploaded < known[first].uploaded


def test_a_release_the_index_lacks_is_one_line_and_exit_2(capfd):
    rc, out, err = _main(capfd, "--release", "0.0.999", "--backend", "interpreter")
    lines = err.strip().splitlines()
    if rc == 2 and "the index has no" not in err:
        pytest.skip(f"the package index cannot be reached here: {err.strip()}")
    assert rc == 2 and len(lines) == 1 and "the index has no x86-64 wheel of vllm==0.0.999" in lines[0], err


# -- the verdict on real releases ---------------------------------------------------------------------------

def test_the_calibration_tells_the_kits_two_kernels_apart(audits):
    for record in audits.values():
        cal = record["calibration"]
        if not cal:
            continue  # a kernel that stores nothing by slot is not run, so nothing is compared
        assert _shape(cal["unmasked"]) != _shape(cal["masked"])
        assert cal["unmasked"]["kernel_masks_padded_rows"] is False
        assert cal["masked"]["kernel_masks_padded_rows"] is True


def test_each_release_that_stores_by_slot_behaves_as_one_of_the_kits_kernels(audits):
    kinds = {}
    for version, record in audits.items():
        if record["kernel"] is None:
            continue
        cal = record["calibration"]
        matches = [name for name in ("masked", "unmasked") if _shape(record["kernel"]) == _shape(cal[name])]
        assert len(matches) == 1, (version, _shape(record["kernel"]))
        kinds[version] = matches[0]
        # both kinds are corrupted by a stale live slot: only the host fill removes it
        assert record["kernel"]["stale_slots_still_corrupt"] is True
    assert set(kinds.values()) == {"masked", "unmasked"}, kinds  # the small set holds both kinds


def test_the_verdict_is_the_first_line_the_exit_status_and_follows_from_the_parts(trees, audits):
    verdicts = {}
    for version, record in audits.items():
        assert record["verdict"] == _expected_verdict(record["parts"]), (version, record["parts"])
        assert record["exit_status"] == EXIT_STATUS[record["verdict"]]
        verdicts[version] = record["verdict"]
    # The small set shows every verdict a release has had: none stored by slot, then affected, then fixed.
    assert {verdicts[releases.NO_SLOT_STORE], verdicts[releases.UNMASKED], verdicts[releases.FIRST_FIXED]} == \
        {NOT_APPLICABLE, AFFECTED, NOT_AFFECTED}
    done = _audit("--vllm", str(trees[releases.UNMASKED]), "--backend", "interpreter")
    first = done.stdout.splitlines()[0]
    assert done.returncode == 1 and first.startswith(f"vLLM PR #47066: {AFFECTED}: ")
    assert audits[releases.UNMASKED]["why"] in first


def test_every_parts_evidence_names_a_file_and_a_line_that_say_it(trees, audits):
    for version, record in audits.items():
        for name, part in record["parts"].items():
            for item in part["evidence"]:
                if "file" not in item or "line" not in item:
                    continue
                lines = (trees[version] / item["file"]).read_text().splitlines()
                assert 0 < item["line"] <= len(lines), (version, name, item)
                said = lines[item["line"] - 1]
                assert any(word in said for word in ("store", "fill_", "copy_", "=", "def ")), (version, name, said)
    fixed = audits[releases.FIRST_FIXED]["parts"]
    assert fixed["kernel"]["evidence"] and all(e["file"] == KERNEL_FILE for e in fixed["kernel"]["evidence"])
    assert ">= 0" in " ".join(str(e["mask"]) + e["code"] for e in fixed["kernel"]["evidence"]) or \
        fixed["kernel"]["state"] == "masked"


def test_the_report_in_words_from_a_torch_process_says_what_the_json_says(trees, audits):
    # LABKIT_BACKEND=torch compiles nothing and interprets nothing: vLLM's kernel is Triton, so the
    # command runs it compiled where there is a GPU and otherwise re-runs itself in an interpreter
    # process. Compiled, the colliding rows race: which blocks each row stored, and so the
    # sentences naming them, change from run to run; the verdicts do not (the H200's record).
    import torch

    compiled = torch.cuda.is_available()
    done = _audit("--vllm", str(trees[releases.UNMASKED]), env_backend="torch")
    record = audits[releases.UNMASKED]
    assert done.returncode == record["exit_status"], done.stderr
    text = done.stdout
    assert f"version {releases.UNMASKED}, commit {record['tree']['commit']}" in text
    yes = {True: "yes", False: "no"}
    assert f"kernel masks padded rows: {yes[record['kernel']['kernel_masks_padded_rows']]}" in text
    stale = yes[record['kernel']['stale_slots_still_corrupt']]
    assert f"the kernel alone, given a stale slot, overwrites a live q: {stale}" in text
    assert f"verdict: {record['verdict']} (exit status {record['exit_status']})" in text
    sentences = record["kernel"]["stale"]["sentences"] + record["kernel"]["filled"]["sentences"]
    for sentence in [] if compiled else sentences:
        assert sentence in text


def test_loading_builds_only_what_the_kernel_imports_and_imports_nothing_of_vllm(trees):
    from labkit.upstream.kernel_api import NoSlotStore, plan
    from labkit.upstream.loader import kernel_imports, load_vllm_sampling

    before = {n for n in sys.modules if n == "vllm" or n.startswith("vllm.")}
    apis = []
    for version, tree in trees.items():
        module = load_vllm_sampling(tree)
        assert module.__file__.startswith(str(tree)), module.__file__
        try:
            apis.append(plan(module).q_param)
        except NoSlotStore:
            assert version == releases.NO_SLOT_STORE
    assert len(set(apis)) >= 2, apis  # the small set calls more than one signature
    helper = kernel_imports(trees[releases.IMPORTS_HELPER] / KERNEL_FILE)
    assert any(name.startswith("vllm.v1.worker.gpu.") for name in helper), helper  # a helper of another file
    assert {n for n in sys.modules if n == "vllm" or n.startswith("vllm.")} == before


def test_no_vllm_code_is_committed():
    done = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        pytest.skip("not a git checkout (a release tarball): nothing is committed here to check")
    assert [f for f in done.stdout.splitlines() if "vllm/" in f] == []
    assert "build/" in (ROOT / ".gitignore").read_text()


# -- broken trees: a line each, exit 2 where a part cannot be judged, never a traceback ---------------------

def _copy(tree: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(tree, target)
    return target


def test_a_damaged_tree_is_judged_where_it_can_be_and_says_what_it_could_not(trees, tmp_path, capfd):
    fixed = trees[releases.FIRST_FIXED]
    cases = {}
    latin = _copy(fixed, tmp_path, "latin-kernel")
    (latin / KERNEL_FILE).write_bytes((latin / KERNEL_FILE).read_bytes() + b"\n# \xff\n")
    cases["latin-kernel"] = (latin, UNKNOWN, "is not UTF-8 text")
    spec = _copy(fixed, tmp_path, "latin-speculator")
    (spec / SPECULATOR).write_bytes(b"\xfe\xff" + (spec / SPECULATOR).read_bytes())
    cases["latin-speculator"] = (spec, UNKNOWN, "is not UTF-8 text")
    syntax = _copy(fixed, tmp_path, "syntax-elsewhere")
    (syntax / "vllm/v1/worker/gpu/spec_decode/broken_drafter.py").write_text("def f(:\n")
    # a speculator file the kit cannot read might call the host step or write its buffers: not presumed
    cases["syntax-elsewhere"] = (syntax, UNKNOWN, "could not read")
    gone = _copy(fixed, tmp_path, "no-speculators")
    shutil.rmtree(gone / "vllm/v1/worker/gpu/spec_decode")
    cases["no-speculators"] = (gone, UNKNOWN, "no vllm/v1/worker/gpu/spec_decode/ in this tree")
    for name, (tree, verdict, says) in cases.items():
        rc, out, err = _main(capfd, "--vllm", str(tree), "--backend", "interpreter")
        assert "Traceback" not in out + err, name
        assert out.splitlines()[0].startswith(f"vLLM PR #47066: {verdict}"), (name, out.splitlines()[0])
        assert rc == EXIT_STATUS[verdict] and says in out, (name, out[:600])
    folder = _copy(fixed, tmp_path, "folder-kernel")
    (folder / KERNEL_FILE).unlink()
    (folder / KERNEL_FILE).mkdir()
    rc, out, err = _main(capfd, "--vllm", str(folder), "--backend", "interpreter")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "gumbel.py" in err and "Traceback" not in err


def test_a_dflash_pad_of_0_makes_a_fixed_tree_affected(trees, tmp_path, capfd):
    tree = _copy(trees[releases.FIRST_FIXED], tmp_path, "pad-0")
    path = tree / DFLASH
    source = path.read_text()
    assert source.count("out_sample_idx_mapping_ptr + block, -1") == 1
    path.write_text(source.replace("out_sample_idx_mapping_ptr + block, -1", "out_sample_idx_mapping_ptr + block, 0"))
    rc, out, _ = _main(capfd, "--vllm", str(tree), "--backend", "interpreter")
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1)
                if "sample_idx_mapping_ptr + block, 0" in text)
    assert rc == 1 and out.startswith(f"vLLM PR #47066: {AFFECTED}: ")
    assert f"DFlash pads sample_idx_mapping with 0 ({DFLASH}:{line})" in out.splitlines()[0]


def test_dflash_is_run_and_its_run_agrees_with_its_source_on_every_release_that_has_it(audits):
    """Run and reading are two ways to the same answer on real releases: the run decides, the
    reading's stores are the evidence. A release without DFlash has neither."""
    with_dflash = 0
    for version, record in audits.items():
        run, part = record["dflash"]["run"], record["parts"]["dflash_pad"]
        if record["dflash"]["reading"]["part"]["state"] == "absent":
            assert run is None and part["state"] == "absent", version
            continue
        with_dflash += 1
        assert run["ran"] and run["problem"] is None, (version, run)
        assert run["live_rows"] == [slot for slot in MECHANICS_SCHEDULE[1] for _ in range(TIMELINE.k)], version
        assert run["stale_slot_before"] == MECHANICS_SCHEDULE[0][-1]  # the first step's row 7 held slot 7
        assert part["state"] == run["state"] == record["dflash"]["reading"]["part"]["state"], version
        assert "run in the kit's scenario under Triton's interpreter" in part["how"], version
    assert with_dflash >= 3  # UNMASKED pads 0, FIRST_FIXED and IMPORTS_HELPER -1 (the last in a helper kernel)
    assert audits[releases.UNMASKED]["dflash"]["run"]["padded_rows"] == [0, 0]
    assert audits[releases.IMPORTS_HELPER]["dflash"]["run"]["padded_rows"] == [-1, -1]


def test_a_dflash_pad_that_is_gone_leaves_stale_slots_and_only_the_run_sees_them(trees, tmp_path, capfd):
    """Delete the store that pads the sample mapping: the source then holds no pad to read, and the
    run shows the padded rows keep the slot the step before left there (slot 7, a live request's)."""
    tree = _copy(trees[releases.FIRST_FIXED], tmp_path, "no-pad")
    path = tree / DFLASH
    lines = path.read_text().splitlines(keepends=True)
    (at,) = [i for i, text in enumerate(lines) if "out_sample_idx_mapping_ptr + block, -1" in text]
    lines[at] = lines[at][:len(lines[at]) - len(lines[at].lstrip())] + "pass\n"
    path.write_text("".join(lines))
    rc, out, _ = _main(capfd, "--vllm", str(tree), "--backend", "interpreter", "--json")
    record = json.loads(out)
    assert record["dflash"]["reading"]["part"]["state"] == "unknown"  # reading alone could not judge
    assert record["dflash"]["run"]["padded_rows"] == [7, 7] and record["parts"]["dflash_pad"]["state"] == \
        "keeps stale slot 7"
    assert rc == 1 and record["verdict"] == AFFECTED and "over slot 7's" in record["why"]


def test_a_dflash_pad_of_0_in_a_helper_kernel_is_run_through_the_helper(trees, tmp_path, capfd):
    tree = _copy(trees[releases.IMPORTS_HELPER], tmp_path, "helper-pad-0")
    path = tree / DFLASH
    source = path.read_text()
    helper = source.index("def _pad_dflash_inputs(")
    assert source.count("out_sample_idx_mapping_ptr + block, -1") == 1 and \
        source.index("out_sample_idx_mapping_ptr + block, -1") > helper  # the pad lives in the helper
    path.write_text(source.replace("out_sample_idx_mapping_ptr + block, -1", "out_sample_idx_mapping_ptr + block, 0"))
    rc, out, _ = _main(capfd, "--vllm", str(tree), "--backend", "interpreter", "--json")
    record = json.loads(out)
    assert record["dflash"]["run"]["padded_rows"] == [0, 0] and rc == 1 and record["verdict"] == AFFECTED


def test_a_dflash_preparation_the_kit_cannot_run_is_not_judged_by_its_minus_1_store(trees, tmp_path, capfd):
    """A -1 store read in the source does not show which rows it reaches: without the run the part is
    not judged (exit 2), and the report says why the run was not made."""
    tree = _copy(trees[releases.IMPORTS_HELPER], tmp_path, "dflash-future")
    path = tree / DFLASH
    source = path.read_text()
    assert source.count("def prepare_dflash_inputs(\n") == 1
    path.write_text(source.replace("def prepare_dflash_inputs(\n", "def prepare_dflash_inputs(\n    future_buffer,\n"))
    rc, out, _ = _main(capfd, "--vllm", str(tree), "--backend", "interpreter", "--json")
    record = json.loads(out)
    run, part = record["dflash"]["run"], record["parts"]["dflash_pad"]
    assert not run["ran"] and "takes future_buffer, which the kit does not know yet" in run["problem"]
    assert record["dflash"]["reading"]["part"]["state"] == "pads -1"  # what the source says, not trusted alone
    assert part["state"] == "unknown" and "read with Python's ast (not run: " in part["how"]
    assert rc == 2 and record["verdict"] == UNKNOWN and "future_buffer" in record["why"]


def test_a_fill_moved_into_a_helper_of_the_same_file_still_counts(trees, tmp_path, capfd):
    tree = _copy(trees[releases.FIRST_FIXED], tmp_path, "helper")
    path = tree / SPECULATOR
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, text in enumerate(lines) if "idx_mapping[num_reqs:].fill_(-1)" in text)
    indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
    lines[at] = f"{indent}self._pad_rows(num_reqs)\n"
    lines.append("\n    def _pad_rows(self, num_reqs):\n        self.idx_mapping[num_reqs:].fill_(-1)\n")
    path.write_text("".join(lines))
    rc, out, _ = _main(capfd, "--vllm", str(tree), "--backend", "interpreter", "--json")
    record = json.loads(out)
    assert rc == 0 and record["verdict"] == NOT_AFFECTED
    assert "in DraftModelSpeculator._pad_rows, called on line" in json.dumps(record["parts"]["host_fill"])


def test_a_signature_the_kit_does_not_know_is_could_not_audit_with_the_signature(trees, tmp_path, capfd):
    tree = _copy(trees[releases.IMPORTS_HELPER], tmp_path, "future")
    path = tree / KERNEL_FILE
    source = path.read_text()
    assert source.count("def gumbel_sample(\n") == 1
    path.write_text(source.replace("def gumbel_sample(\n", "def gumbel_sample(\n    future_buffer: torch.Tensor,\n"))
    rc, out, _ = _main(capfd, "--vllm", str(tree), "--backend", "interpreter")
    assert rc == 2 and out.startswith(f"vLLM PR #47066: {UNKNOWN}: kernel: gumbel_sample(future_buffer: torch.Tensor, "
                                      "logits")
    assert "the kit does not know what to pass as future_buffer" in out.splitlines()[0]


def test_bad_paths_and_no_vllm_give_one_line_errors(tmp_path, capfd):
    for args in (("--vllm", str(tmp_path / "nowhere")), ("--vllm", str(tmp_path))):
        rc, _, err = _main(capfd, *args, "--backend", "interpreter")
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "error:" in err
    if importlib.util.find_spec("vllm") is None:
        rc, _, err = _main(capfd, "--backend", "interpreter")
        assert rc == 2 and "--vllm PATH" in err


def test_a_kernel_file_that_fails_in_the_scenario_says_so_without_a_traceback(tmp_path, capfd):
    failing = tmp_path / KERNEL_FILE
    failing.parent.mkdir(parents=True)
    failing.write_text(textwrap.dedent("""
        import torch
        from vllm.triton_utils import tl, triton

        def gumbel_sample(logits, expanded_idx_mapping, temperature, seed, pos, apply_temperature,
                          output_processed_logits=None, output_processed_logits_col=None, use_fp64=False):
            raise RuntimeError("no kernel here")
    """))
    rc, out, err = _main(capfd, "--vllm", str(tmp_path), "--backend", "interpreter")
    assert rc == 2 and "Traceback" not in out + err
    assert "failed in the scenario: RuntimeError: no kernel here" in out.splitlines()[0]


# -- the release matrix -------------------------------------------------------------------------------------

def test_the_committed_matrix_covers_every_release_and_agrees_with_a_fresh_audit(audits):
    from labkit.upstream.record import load_cpu_record

    section = load_cpu_record()["upstream_audit"]
    recorded = list(section["releases"])
    assert recorded == section["index"]["releases_from_first_kernel"], "a release of the index is missing"
    assert recorded[0] == ".".join(map(str, FIRST)) and recorded[-1] == section["index"]["newest"]
    for version, fresh in audits.items():
        kept = section["releases"][version]
        assert kept["verdict"] == fresh["verdict"], version
        assert {k: p["state"] for k, p in kept["parts"].items()} == {k: p["state"] for k, p in fresh["parts"].items()}
        assert kept["commit"] == fresh["tree"]["commit"]
        assert kept["uploaded"] == fresh["tree"]["fetched_from"]["uploaded"]  # the dates the words use


def test_the_gpu_section_reads_the_carried_trees_and_says_when_they_are_missing(tmp_path, monkeypatch):
    from labkit.gpu.sections import SECTIONS
    from labkit.upstream.record import TREES_ENV, audit_releases, matrix_table
    from labkit.viz.gpu_records import upstream_audit

    assert "upstream_audit" in SECTIONS
    monkeypatch.setenv(TREES_ENV, str(tmp_path))
    assert audit_releases() == {"trees": str(tmp_path), "releases": {}}  # nothing carried: nothing to audit
    missing = audit_releases(versions=list(releases.RELEASES))
    for version in releases.RELEASES:
        assert "python -m labkit upstream fetch" in missing["releases"][version]["error"]
    record = {"provenance": {"device": "NVIDIA H200", "date": "2026-12-02T00:00:00Z"}, "upstream_audit": missing}
    assert upstream_audit(record)["releases"] == missing["releases"]
    assert upstream_audit({"provenance": {}}) is None
    assert all(f"{version}" in matrix_table(missing) and "could not audit" in matrix_table(missing)
               for version in releases.RELEASES)


def test_the_matrix_in_vllm_map_is_rendered_from_the_records():
    from labkit.docgen import blocks
    from labkit.upstream.record import DOC, renderers

    text = DOC.read_text()
    assert "upstream:matrix" in blocks.keys_in(text)
    assert blocks.rendered_in(text, "upstream:matrix") == renderers()["upstream:matrix"](), "run: make refresh"


def test_notebook_06_prints_the_matrix_of_the_record_verdict_first():
    from labkit.upstream.record import load_cpu_record, matrix_table, summary

    nb = json.loads((ROOT / "notebooks" / "06_audit_and_distribution.ipynb").read_text())

    def text(x):
        return "".join(x) if isinstance(x, list) else x

    printed = {text(c["source"]): "".join(text(o.get("text", "")) for o in c.get("outputs", []))
               for c in nb["cells"] if c["cell_type"] == "code"}
    section = load_cpu_record()["upstream_audit"]
    shown = [out for src, out in printed.items() if "upstream.matrix_table(section)" in src]
    assert shown == [matrix_table(section) + "\n" + summary(section) + "\n"], "re-execute notebook 06 (make refresh)"
    assert shown[0].splitlines()[0].split()[:3] == ["vLLM", "uploaded", "verdict"]


def test_what_a_gpu_sees_by_effect_agrees_with_the_interpreters_exact_log(trees, monkeypatch):
    # Compiled, no hook sees a load: the audit reads the guard rows and the padded row's token under
    # two guard contents instead. That branch runs here on the interpreted kernels, on the CPU.
    from labkit import backends
    from labkit.upstream import audit
    from labkit.upstream.kernel_api import NoSlotStore, plan
    from labkit.upstream.loader import load_vllm_sampling

    if not backends.KERNELS_INTERPRETED:
        pytest.skip("needs this process's kernels defined for the interpreter (LABKIT_BACKEND unset or "
                    "'interpreter', on a CPU)")
    for tree in trees.values():
        module = load_vllm_sampling(tree)
        try:
            sampler = audit.vllm_sampler(module, plan(module))
        except NoSlotStore:
            continue
        exact = audit.audit_sampler(sampler, device="cpu")
        with monkeypatch.context() as m:
            m.setattr(backends, "KERNELS_INTERPRETED", False)
            seen = audit.audit_sampler(sampler, device="cpu")
        assert seen.filled.reads_seen == "by effect" and exact.filled.reads_seen == "exact"
        assert (seen.masks_padded_rows, seen.stale_slots_corrupt) == (exact.masks_padded_rows,
                                                                       exact.stale_slots_corrupt)
        stores = {(a["buffer"], a["index"]) for a in exact.filled.out_of_bounds if a["kind"] == "store"}
        assert {(a["buffer"], a["index"]) for a in seen.filled.out_of_bounds if a["kind"] == "store"} == stores
        assert any(a["kind"] == "load" for a in seen.filled.out_of_bounds) == \
            any(a["kind"] == "load" for a in exact.filled.out_of_bounds)


# -- the command's smaller promises ------------------------------------------------------------------------

def test_a_version_file_that_is_not_python_leaves_the_version_unknown_and_audits_the_rest(trees, tmp_path, capfd):
    tree = _copy(trees[releases.FIRST_FIXED], tmp_path, "bad-version")
    (tree / "vllm/_version.py").write_text("__version__ = (\n")
    rc, out, err = _main(capfd, "--vllm", str(tree), "--backend", "interpreter")
    assert "Traceback" not in out + err and rc == 0 and out.startswith(f"vLLM PR #47066: {NOT_AFFECTED}: ")
    assert "version unknown (" in out and "SyntaxError" in out


def test_a_tree_without_model_runner_v2_is_not_applicable_and_one_without_its_kernel_is_not_judged(trees, tmp_path,
                                                                                                   capfd):
    old = _copy(trees[releases.FIRST_FIXED], tmp_path, "no-mrv2")
    shutil.rmtree(old / "vllm/v1/worker/gpu")
    rc, out, _ = _main(capfd, "--vllm", str(old), "--backend", "interpreter")
    assert rc == 0 and out.startswith(f"vLLM PR #47066: {NOT_APPLICABLE}: no Model Runner V2 sampler ("), out
    rc, out, _ = _main(capfd, "--vllm", str(old), "--backend", "interpreter", "--json")
    assert rc == 0 and json.loads(out)["verdict"] == NOT_APPLICABLE
    moved = _copy(trees[releases.FIRST_FIXED], tmp_path, "kernel-moved")
    (moved / KERNEL_FILE).rename(moved / KERNEL_FILE.replace("gumbel.py", "gumbel_v2.py"))
    rc, out, err = _main(capfd, "--vllm", str(moved), "--backend", "interpreter")
    assert rc == 2 and "holds no vllm/v1/worker/gpu/sample/gumbel.py" in err


def test_a_refusal_under_json_is_json_on_stdout_and_one_line_on_stderr(tmp_path, capfd):
    rc, out, err = _main(capfd, "--vllm", str(tmp_path / "nowhere"), "--backend", "interpreter", "--json")
    record = json.loads(out)
    assert rc == 2 and record["verdict"] == UNKNOWN and record["exit_status"] == 2 and "no such file" in record["why"]
    assert len(err.strip().splitlines()) == 1 and "error:" in err


def test_the_verdict_names_the_out_of_bounds_accesses_the_run_saw(trees, tmp_path):
    """A fill without the mask: the words say reads, writes or both, as the run saw them."""
    sys.path.insert(0, str(ROOT / "tests"))
    import vllm_mutations as corpus

    from labkit import backends
    from labkit.upstream.report import audit_tree

    if not backends.KERNELS_INTERPRETED:  # compiled, loads are seen by their effect (the test above)
        pytest.skip("the words name each access the interpreter logged (LABKIT_BACKEND unset or 'interpreter')")

    by_name = {m.name: m for m in corpus.corpus()}
    said = {}
    for name in ("temperature-load-unmasked", "store-unmasked"):
        made = corpus.generate(trees[releases.FIRST_FIXED], tmp_path, [by_name[name]])
        said[name] = audit_tree(made[name]).verdict()
    assert said["temperature-load-unmasked"][0] == AFFECTED
    assert "reads out of bounds (temperature)" in said["temperature-load-unmasked"][1]
    assert "writes out of bounds" not in said["temperature-load-unmasked"][1]
    assert "writes out of bounds (draft_logits)" in said["store-unmasked"][1]
    assert "reads out of bounds" not in said["store-unmasked"][1]


def test_a_backend_the_command_refuses_suggests_only_backends_it_accepts(trees, capfd):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine compiles for its GPU: --backend triton is not refused here")
    rc, _, err = _main(capfd, "--vllm", str(trees[releases.FIRST_FIXED]), "--backend", "triton")
    assert rc == 2 and "--backend interpreter" in err and "torch" not in err.split("--backend triton:", 1)[1], err


def test_upstream_fetch_keeps_trees_where_labkit_vllm_trees_says_and_needs_no_torch(trees, tmp_path):
    """A folder carried to a machine without a network: fetch finds it there, asks the index nothing, and
    imports no torch (a stand-in torch that cannot be imported is first on the path)."""
    folder = tmp_path / "carried"
    shutil.copytree(trees[releases.FIRST_FIXED], folder / releases.FIRST_FIXED)
    stub = tmp_path / "stub" / "torch"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('torch is not on this machine')\n")
    env = {k: v for k, v in os.environ.items() if k != "LABKIT_BACKEND"}
    env.update(LABKIT_VLLM_TREES=str(folder), PYTHONPATH=str(tmp_path / "stub"),
               LABKIT_INDEX_URL="http://127.0.0.1:9/unreachable")
    for command in (["-m", "labkit", "upstream", "fetch"], ["-m", "labkit.upstream.fetch"]):
        done = subprocess.run([sys.executable, *command, releases.FIRST_FIXED], capture_output=True, text=True,
                              cwd=ROOT, env=env if command[1] == "labkit" else {**env, "PYTHONPATH": ""}, timeout=120)
        assert done.returncode == 0, (command, done.stderr)
        assert done.stdout.strip() == str(folder / releases.FIRST_FIXED)
    helped = subprocess.run([sys.executable, "-m", "labkit", "upstream", "fetch", "--help"], capture_output=True,
                            text=True, cwd=ROOT, env=env, timeout=120)
    assert helped.returncode == 0 and "--trees" in helped.stdout and "--all" not in helped.stdout
