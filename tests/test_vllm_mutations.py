"""audit-vllm on the kit's mutation corpus (tests/vllm_mutations.py): fixed releases broken on purpose.

Three fixed releases, read from the package index at test time (the first fixed, one in the middle,
the newest the kit names), each copied and edited in every way the corpus knows, under the test's
temporary folder (never committed). A broken tree must never be "not affected" (exit 0); the fix
written another way must never be "affected" (exit 1); "could not audit" (exit 2) is allowed for
both. Every mutation applies to every release, and the corpus covers each part with both kinds.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

if importlib.util.find_spec("triton") is None:
    pytest.skip("vLLM's sampling kernel is a Triton kernel and Triton is not installed here", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vllm_mutations as corpus  # noqa: E402

from labkit.upstream import releases  # noqa: E402
from labkit.upstream.fetch import FetchError, cached, fetch_release  # noqa: E402

# The first fixed release, one in the middle of the fixed ones, and the newest the kit names.
FIXED = (releases.FIRST_FIXED, "0.29.0", releases.IMPORTS_HELPER)


def _tree(version: str) -> Path:
    try:
        return cached(version) or fetch_release(version, timeout_s=60)
    except FetchError as err:
        pytest.skip(f"vllm=={version} cannot be read from the package index here: {err}")


def test_the_corpus_breaks_every_part_in_at_least_40_ways_and_rewrites_each():
    mutations = corpus.corpus()
    assert len({m.name for m in mutations}) == len(mutations)
    assert sum(m.kind == corpus.BROKEN for m in mutations) >= 40
    kinds = Counter((m.part, m.kind) for m in mutations)
    for part in ("kernel", "host fill", "dflash"):
        assert kinds[(part, corpus.BROKEN)] >= 8 and kinds[(part, corpus.CORRECT)] >= 3, (part, kinds)
    whats = {m.what for m in mutations if m.kind == corpus.BROKEN}
    for what in ("bound", "buffer", "condition", "later overwrite", "host write after", "wrapper", "renamed pointer",
                 "mask on loads only", "helper function", "other file"):
        assert what in whats, what


PARTS = ("kernel", "host fill", "dflash")


# One test per release and part, so that the stage's workers share the corpus evenly.
@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("version", FIXED)
def test_no_broken_tree_is_not_affected_and_no_rewrite_is_affected(version, part, tmp_path):
    from labkit import backends
    from labkit.upstream.report import audit_tree

    if not backends.KERNELS_INTERPRETED:
        pytest.skip("the corpus runs the kernels in Triton's interpreter (LABKIT_BACKEND unset or 'interpreter')")
    release = _tree(version)
    assert audit_tree(release).exit_status == 0, f"{version} itself must be not affected"
    mutations = [m for m in corpus.corpus() if m.part == part]
    made = corpus.generate(release, tmp_path, mutations)
    skipped = {name: why for name, why in made.items() if isinstance(why, str)}
    assert not skipped, skipped  # every edit finds its place in every release of the three
    wrong, seen = [], Counter()
    for m in mutations:
        audit = audit_tree(made[m.name])
        rc = audit.exit_status
        seen[(m.kind, rc)] += 1
        if (m.kind == corpus.BROKEN and rc == 0) or (m.kind == corpus.CORRECT and rc == 1):
            wrong.append(f"{m.name} ({m.kind}, {m.part}): exit {rc}: {audit.verdict()[1][:300]}")
    assert not wrong, "\n".join(wrong)
    # The corpus shows the audit judging, not only refusing: most broken trees are found affected, and
    # most rewrites are shown not affected.
    assert seen[(corpus.BROKEN, 1)] > seen[(corpus.BROKEN, 2)], seen
    assert seen[(corpus.CORRECT, 0)] > seen[(corpus.CORRECT, 2)], seen
