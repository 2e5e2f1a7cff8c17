"""`python -m labkit audit-vllm` on real vLLM releases, fetched from the registry at test time.

The releases are named once, in labkit.upstream.releases. Their files are fetched with pip into
build/vllm-trees/ (cached: a second run downloads nothing) and never committed. What each
release's verdicts must be is not written here: the command runs the kit's own unmasked and masked
kernels in the same scenario (its calibration), and each release must match one of them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest

if importlib.util.find_spec("triton") is None:
    pytest.skip("vLLM's sampling kernel is a Triton kernel and Triton is not installed here", allow_module_level=True)

from labkit.upstream import releases  # noqa: E402
from labkit.upstream.fetch import TREES, FetchError, cached, fetch_release  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KERNEL_FILE = "vllm/v1/worker/gpu/sample/gumbel.py"


def _index_url() -> str:
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"].split()[0]
    done = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "https://pypi.org/simple/"


def _registry_unreachable() -> str | None:
    url = _index_url().rstrip("/") + "/vllm/"
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=15).close()
    except urllib.error.HTTPError:
        return None  # it answered
    except (urllib.error.URLError, OSError) as err:
        return f"the package registry ({url}) is not reachable from here: {err}"
    return None


def _tree(version: str) -> Path:
    if cached(version):
        return cached(version)
    try:
        return fetch_release(version, timeout_s=60)
    except FetchError as err:
        reason = _registry_unreachable()
        if reason:
            pytest.skip(f"vllm=={version} cannot be fetched: {reason}")
        raise AssertionError(f"{err}\n{err.pip_output}") from err


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
        assert done.returncode == 0, done.stderr
        out[version] = json.loads(done.stdout)
    return out


def _shape(kernel: dict) -> dict:
    """What must match between a release and the kit's kernel of the same kind: the verdicts, which
    live records the stale row changed, and each access outside a buffer (kind, buffer, index)."""
    return {"masks": kernel["kernel_masks_padded_rows"], "corrupt": kernel["stale_slots_still_corrupt"],
            "stale_changed": sorted(kernel["stale"]["live_records_changed"]),
            "filled_changed": sorted(kernel["filled"]["live_records_changed"]),
            "outside": sorted((a["kind"], a["buffer"], a["index"]) for a in kernel["filled"]["out_of_bounds"])}


def test_the_fetched_files_are_the_few_the_audit_reads(trees):
    for version, tree in trees.items():
        record = json.loads((tree / "FETCHED_FROM.json").read_text())
        assert record["version"] == version and len(record["wheel_sha256"]) == 64
        files = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()}
        assert files == set(record["files"]) | {"FETCHED_FROM.json"}
        assert KERNEL_FILE in files and len(files) < 80
        assert not list(TREES.glob(f".wheel-{version}-*")) and not list(tree.rglob("*.whl"))


def test_a_second_fetch_downloads_nothing(trees, monkeypatch):
    def no_pip(*a, **k):
        raise AssertionError("pip was called for a cached release")

    monkeypatch.setattr(subprocess, "run", no_pip)
    for version, tree in trees.items():
        assert fetch_release(version) == tree


def test_the_calibration_tells_the_kits_two_kernels_apart(audits):
    for record in audits.values():
        cal = record["calibration"]
        assert _shape(cal["unmasked"]) != _shape(cal["masked"])
        assert cal["unmasked"]["kernel_masks_padded_rows"] is False
        assert cal["masked"]["kernel_masks_padded_rows"] is True


def test_each_release_behaves_as_one_of_the_kits_kernels(audits):
    fixed, unmasked = audits[releases.FIXED], audits[releases.UNMASKED]
    cal = fixed["calibration"]
    assert _shape(fixed["kernel"]) == _shape(cal["masked"])
    assert _shape(unmasked["kernel"]) == _shape(unmasked["calibration"]["unmasked"])
    # both kinds of kernel are corrupted by a stale live slot: only the host fill removes it
    for record in (fixed, unmasked):
        assert record["verdicts"]["stale_slots_still_corrupt"] == cal["masked"]["stale_slots_still_corrupt"]


def test_the_unmasked_releases_q_store_is_the_one_named_in_releases(trees):
    source = (trees[releases.UNMASKED] / KERNEL_FILE).read_text()
    store = source[source.index("tl.store(\n            processed_logits_ptr"):][:300]
    assert "+ req_state_idx * processed_logits_stride" in store and "mask=mask," in store
    assert "is_valid" not in source
    doc = " ".join((releases.__doc__ or "").split())
    assert releases.UNMASKED in doc and "req_state_idx * processed_logits_stride" in doc


def test_the_speculator_reading_agrees_with_the_kernel(audits):
    for record in audits.values():
        spec = record["speculator"]
        assert spec["copies"], "no function copying idx_mapping[:num_reqs] was found"
        assert any(c["function"].endswith("_copy_request_inputs") for c in spec["copies"])
        # PR #47066 changed both halves together: a release that masks also fills, and one that does not, not
        assert record["verdicts"]["speculator_fills_padded_rows_with_minus_1"] == \
            record["verdicts"]["kernel_masks_padded_rows"]


def test_the_report_in_words_from_a_torch_process_says_what_the_json_says(trees, audits):
    # LABKIT_BACKEND=torch compiles nothing and interprets nothing: vLLM's kernel is Triton, so the
    # command runs it compiled where there is a GPU and otherwise re-runs itself in an interpreter
    # process. Compiled, the colliding rows race: which blocks each row stored, and so the
    # sentences naming them, change from run to run; the verdicts do not (the H200's record).
    import torch

    compiled = torch.cuda.is_available()
    done = _audit("--vllm", str(trees[releases.UNMASKED]), env_backend="torch")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    record = audits[releases.UNMASKED]
    assert f"version {releases.UNMASKED}, commit {record['tree']['commit']}" in text
    yes = {True: "yes", False: "no"}
    assert f"kernel masks padded rows: {yes[record['verdicts']['kernel_masks_padded_rows']]}" in text
    assert f"stale slots still corrupt: {yes[record['verdicts']['stale_slots_still_corrupt']]}" in text
    assert f"speculator fills padded rows with -1: " \
           f"{yes[record['verdicts']['speculator_fills_padded_rows_with_minus_1']]}" in text
    sentences = record["kernel"]["stale"]["sentences"] + record["kernel"]["filled"]["sentences"]
    for sentence in [] if compiled else sentences:
        assert sentence in text


def test_loading_imports_nothing_of_vllm(trees):
    from labkit.upstream.kernel_api import identify
    from labkit.upstream.loader import load_vllm_sampling

    before = {n for n in sys.modules if n == "vllm" or n.startswith("vllm.")}
    names = []
    for tree in trees.values():
        module = load_vllm_sampling(tree)
        assert module.__file__.startswith(str(tree)), module.__file__
        names.append(identify(module).name)
    assert len(set(names)) == len(names), names
    assert {n for n in sys.modules if n == "vllm" or n.startswith("vllm.")} == before


def _fake_tree(tmp_path: Path, body: str) -> Path:
    path = tmp_path / KERNEL_FILE
    path.parent.mkdir(parents=True)
    path.write_text(body)
    return tmp_path


def test_an_unknown_kernel_api_says_which_versions_the_kit_expects(tmp_path, capfd):
    tree = _fake_tree(tmp_path, "import torch\nfrom vllm.triton_utils import tl, triton\n\n"
                                "def gumbel_sample(logits, temperature, generators):\n    return logits.argmax(-1)\n")
    rc, out, _ = _main(capfd, "--vllm", str(tree), "--backend", "interpreter")
    assert rc == 1
    assert "kernel: not run" in out
    for version in releases.RELEASES:
        assert f"as in vLLM {version}" in out


def test_a_kernel_file_that_needs_more_of_vllm_is_refused_in_one_line(tmp_path, capfd):
    tree = _fake_tree(tmp_path, "import vllm.envs as envs\n")
    rc, _, err = _main(capfd, "--vllm", str(tree), "--backend", "interpreter")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "vllm.envs" in err


def test_bad_paths_and_no_vllm_give_one_line_errors(tmp_path, capfd):
    for args in (("--vllm", str(tmp_path / "nowhere")), ("--vllm", str(tmp_path))):
        rc, _, err = _main(capfd, *args, "--backend", "interpreter")
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "error:" in err
    if importlib.util.find_spec("vllm") is None:
        rc, _, err = _main(capfd, "--backend", "interpreter")
        assert rc == 2 and "--vllm PATH" in err


def test_no_vllm_code_is_committed():
    done = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        pytest.skip("not a git checkout (a release tarball): nothing is committed here to check")
    assert [f for f in done.stdout.splitlines() if "vllm/" in f] == []
    assert "build/" in (ROOT / ".gitignore").read_text()


def test_the_committed_cpu_record_says_what_a_fresh_run_says(audits):
    from labkit.upstream.record import load_cpu_record

    section = load_cpu_record()["upstream_audit"]
    assert set(section["releases"]) == set(releases.RELEASES)
    for version, fresh in audits.items():
        kept = section["releases"][version]
        assert kept["verdicts"] == fresh["verdicts"]
        assert kept["tree"]["kernel_sha256"] == fresh["tree"]["kernel_sha256"]
        assert kept["tree"]["commit"] == fresh["tree"]["commit"]
        assert _shape(kept["kernel"]) == _shape(fresh["kernel"])


def test_the_gpu_section_reads_the_carried_trees_and_says_when_they_are_missing(tmp_path, monkeypatch):
    from labkit.gpu.sections import SECTIONS
    from labkit.upstream.record import TREES_ENV, audit_releases, verdict_table
    from labkit.viz.gpu_records import upstream_audit

    assert "upstream_audit" in SECTIONS
    monkeypatch.setenv(TREES_ENV, str(tmp_path))
    missing = audit_releases()
    assert missing["trees"] == str(tmp_path)
    for version in releases.RELEASES:
        assert "python -m labkit upstream fetch" in missing["releases"][version]["error"]
    record = {"provenance": {"device": "NVIDIA H200", "date": "2026-12-02T00:00:00Z"}, "upstream_audit": missing}
    assert upstream_audit(record)["releases"] == missing["releases"]
    assert upstream_audit({"provenance": {}}) is None
    assert all(version in verdict_table(missing) for version in releases.RELEASES)


def test_the_verdicts_in_vllm_map_are_rendered_from_the_records():
    from labkit.docgen import blocks
    from labkit.upstream.record import DOC, renderers

    text = DOC.read_text()
    assert "upstream:verdicts" in blocks.keys_in(text)
    assert blocks.rendered_in(text, "upstream:verdicts") == renderers()["upstream:verdicts"](), "run: make refresh"


def test_notebook_06_prints_the_verdicts_of_the_records():
    from labkit.upstream.record import case_lines, load_cpu_record, render_verdicts

    nb = json.loads((ROOT / "notebooks" / "06_audit_and_distribution.ipynb").read_text())
    def text(x):
        return "".join(x) if isinstance(x, list) else x

    printed = {text(c["source"]): "".join(text(o.get("text", "")) for o in c.get("outputs", []))
               for c in nb["cells"] if c["cell_type"] == "code"}
    verdicts = [out for src, out in printed.items() if "upstream.render_verdicts()" in src]
    cases = [out for src, out in printed.items() if "upstream.case_lines(" in src]
    assert verdicts == [render_verdicts() + "\n"], "re-execute notebook 06"
    assert cases == ["\n".join(case_lines(load_cpu_record()["upstream_audit"])) + "\n"], "re-execute notebook 06"


def test_a_kernel_file_that_fails_says_so_without_a_traceback(tmp_path, capfd):
    broken = _fake_tree(tmp_path / "broken", "import torch\nfrom vllm.triton_utils import tl, triton\nx = 1 /\n")
    rc, _, err = _main(capfd, "--vllm", str(broken), "--backend", "interpreter")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "SyntaxError" in err
    failing = _fake_tree(tmp_path / "failing", textwrap.dedent("""
        import torch
        from vllm.triton_utils import tl, triton

        def gumbel_sample(logits, expanded_idx_mapping, temperature, seed, pos, apply_temperature,
                          output_processed_logits=None, output_processed_logits_col=None, use_fp64=False):
            raise RuntimeError("no kernel here")
    """))
    rc, out, err = _main(capfd, "--vllm", str(failing), "--backend", "interpreter")
    assert rc == 1, err
    assert "failed in the scenario: RuntimeError: no kernel here" in out


def test_what_a_gpu_sees_by_effect_agrees_with_the_interpreters_exact_log(trees, monkeypatch):
    # Compiled, no hook sees a load: the audit reads the guard rows and the padded row's token under
    # two guard contents instead. That branch runs here on the interpreted kernels, on the CPU.
    from labkit import backends
    from labkit.upstream import audit
    from labkit.upstream.kernel_api import identify
    from labkit.upstream.loader import load_vllm_sampling

    if not backends.KERNELS_INTERPRETED:
        pytest.skip("needs this process's kernels defined for the interpreter (LABKIT_BACKEND unset or "
                    "'interpreter', on a CPU)")
    for tree in trees.values():
        module = load_vllm_sampling(tree)
        sampler = audit.vllm_sampler(module, identify(module))
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
