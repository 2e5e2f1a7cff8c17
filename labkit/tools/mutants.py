"""Mutation check: break each part of the fix on purpose and make sure a behavioural test notices.

    python -m labkit mutants            # every mutant (make mutants)
    python -m labkit mutants --list     # what each mutant changes
    python -m labkit mutants no-fill slot-gt-0

Each mutant is one textual edit of the kit's source (a part of PR #47066's fix undone or bent),
applied to a fresh copy of the tracked files in a temporary folder; the repository itself is never
touched. The copy's tests then run on the CPU. A mutant is *killed* when a test fails with an
assertion (pytest exit code 1); an import or collection error (exit 2-4) would only prove the edit
broke the syntax, so it counts as a harness error, and so does an edit whose text is no longer
found (the source moved on: update the mutant; tests/test_mutants.py fails first, in the unit
stage, when a mutant's text is gone or found twice). The tests that kill mutants check behaviour -- the
live tokens, the q of live slots, guarded memory, emitted tokens -- never the source text.

Exit code 0 when every mutant is killed and the unmutated copy passes the same tests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from labkit import paths

# The guarded-memory tests first: a stray store lands in guard memory there and fails an assertion,
# where the plain kernel tests would let it corrupt the heap (and abort the process).
KERNEL_TESTS = ("tests/test_guarded_memory.py", "tests/test_kernels.py")
HOST_TESTS = ("tests/test_speculator.py", "tests/test_engine.py")


@dataclass(frozen=True)
class Mutant:
    name: str
    part: str  # which part of the fix it undoes
    path: str
    # The code of the fix and its undoing: out of the repr, which `?` on MUTANTS shows before the exercises.
    old: str = field(repr=False)  # exact text, must occur exactly once
    new: str = field(repr=False)
    tests: tuple[str, ...]
    backend: str = "interpreter"  # the Triton source runs in the interpreter; torch for host-side code


MUTANTS = (
    Mutant("no-fill", "1. host fill", "labkit/speculator.py",
           "self.idx_mapping[num_reqs:].fill_(-1)", "pass",
           HOST_TESTS, backend="torch"),
    Mutant("partial-fill", "1. host fill", "labkit/speculator.py",
           "self.idx_mapping[num_reqs:].fill_(-1)", "self.idx_mapping[num_reqs:num_reqs + 1].fill_(-1)",
           HOST_TESTS, backend="torch"),
    Mutant("no-store-mask", "2. kernel store mask", "labkit/kernels/gumbel.py",
           "return in_vocab & ((offs * 0 + slot) >= 0)", "return in_vocab",
           KERNEL_TESTS),
    Mutant("unmasked-temperature", "2. kernel load masks", "labkit/kernels/gumbel.py",
           "temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)",
           "temp = tl.load(temperature_ptr + slot)",
           KERNEL_TESTS),
    Mutant("unmasked-seed", "2. kernel load masks", "labkit/kernels/gumbel.py",
           "seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)",
           "seed = tl.load(seeds_ptr + slot)",
           KERNEL_TESTS),
    Mutant("slot-gt-0", "2. kernel mask condition", "labkit/kernels/gumbel.py",
           "is_valid = slot >= 0", "is_valid = slot > 0",
           KERNEL_TESTS),
    Mutant("early-exit-inverted", "4. early exit", "labkit/kernels/gumbel.py",
           "if EARLY_EXIT and slot < 0:", "if EARLY_EXIT and slot >= 0:",
           KERNEL_TESTS),
    Mutant("dflash-pad-0", "3. DFlash pad", "labkit/kernels/dflash_prep.py",
           "tl.where(live, slot, pad_value)", "tl.where(live, slot, 0)",
           KERNEL_TESTS + ("tests/test_speculator.py",)),
    Mutant("rejection-rule", "verification", "labkit/kernels/rejection.py",
           "accept = u * q_x < p_x", "accept = u * p_x < q_x",
           KERNEL_TESTS),
    Mutant("no-refusal-of-minus-1", "guard: unmasked kernel meets a padded slot", "labkit/kernels/gumbel_inputs.py",
           'raise padded_slot_error("gumbel_sample"', '(lambda *_: None)("gumbel_sample"',
           # the refusal tests first: past the refusal the unmasked kernel really reads at -1
           tuple(reversed(KERNEL_TESTS))),
    Mutant("no-host-refusal", "guard: fill without mask", "labkit/speculator.py",
           "if rows > num_reqs and self._padding_is_negative() and not self.fix.kernel",
           "if False and rows > num_reqs and self._padding_is_negative() and not self.fix.kernel",
           HOST_TESTS, backend="torch"),
)


def copy_tree(dest: Path) -> None:
    """Copy the tracked files (the clean state of the working tree) into `dest`."""
    files = subprocess.run(["git", "-C", str(paths.REPO), "ls-files", "-z"], capture_output=True, check=True,
                           text=True).stdout.split("\0")
    for rel in filter(None, files):
        src = paths.REPO / rel
        if src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def mutated(mutant: Mutant, text: str) -> str:
    """`text` (the source of `mutant.path`) with the mutant's edit; refused unless its text is there once."""
    count = text.count(mutant.old)
    if count != 1:
        raise RuntimeError(f"mutant {mutant.name}: {mutant.old!r} occurs {count} times in {mutant.path}, "
                           "not once; update the mutant to the current source")
    return text.replace(mutant.old, mutant.new)


def apply(mutant: Mutant, tree: Path) -> None:
    path = tree / mutant.path
    path.write_text(mutated(mutant, path.read_text()))


def run_tests(tree: Path, tests, backend: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "LABKIT_BACKEND": backend, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("TRITON_INTERPRET", None)
    present = [t for t in tests if (tree / t).exists()]
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "-p", "no:cacheprovider", *present]
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    return out.returncode, out.stdout + out.stderr


def first_failure(output: str) -> str:
    match = re.search(r"^FAILED (\S+)", output, re.MULTILINE)
    return match.group(1) if match else "?"


def check_copy_is_imported(tree: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "LABKIT_BACKEND": "torch"}
    where = subprocess.run([sys.executable, "-c", "import labkit; print(labkit.__file__)"], cwd=tree, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not where.startswith(str(tree)):
        raise RuntimeError(f"the copy's tests would import labkit from {where}, not from the copy")


def run_mutants(mutants, log=print) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="labkit-mutants-") as tmp:
        clean = Path(tmp) / "clean"
        copy_tree(clean)
        check_copy_is_imported(clean)
        for backend in sorted({m.backend for m in mutants}):
            tests = sorted({t for m in mutants if m.backend == backend for t in m.tests})
            code, output = run_tests(clean, tests, backend)
            if code != 0:
                raise RuntimeError(f"the unmutated tests fail ({backend} backend):\n{output[-3000:]}")
        for mutant in mutants:
            tree = Path(tmp) / mutant.name
            shutil.copytree(clean, tree)
            apply(mutant, tree)
            start = time.perf_counter()
            code, output = run_tests(tree, mutant.tests, mutant.backend)
            verdict = {0: "SURVIVED", 1: "killed"}.get(code, f"ERROR (pytest exit {code})")
            row = {"mutant": mutant.name, "part": mutant.part, "verdict": verdict,
                   "killed_by": first_failure(output) if code == 1 else "",
                   "seconds": round(time.perf_counter() - start, 1)}
            rows.append(row)
            log(f"{row['mutant']:<24} {row['verdict']:<10} {row['killed_by']}  ({row['seconds']} s)")
            if code not in (0, 1):
                log(output[-2000:])
            shutil.rmtree(tree)
    return rows


def table(rows) -> str:
    lines = ["| mutant | part of the fix | verdict | first test that failed |", "| --- | --- | --- | --- |"]
    lines += [f"| {r['mutant']} | {r['part']} | {r['verdict']} | `{r['killed_by']}` |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit mutants", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    known = {m.name: m for m in MUTANTS}
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:<24} {m.part:<32} {m.path}: {m.old!r} -> {m.new!r}")
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown mutant(s) {', '.join(unknown)}; known: {', '.join(known)}")
    chosen = [known[n] for n in args.names] if args.names else list(MUTANTS)
    rows = run_mutants(chosen)
    print()
    print(table(rows))
    survivors = [r["mutant"] for r in rows if r["verdict"] != "killed"]
    if survivors:
        print(f"\nnot killed: {', '.join(survivors)}", file=sys.stderr)
        return 1
    return 0

