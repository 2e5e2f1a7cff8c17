"""How long the kit makes a CPU user wait: printed against the targets, never asserted.

    python -m labkit bench-cpu                      # the default repro and every notebook under nbval
    python -m labkit bench-cpu --only repro         # one part (repro, notebooks, make-test, fresh-clone)
    python -m labkit bench-cpu --notebooks 01,03    # some notebooks only
    python -m labkit bench-cpu --only fresh-clone   # `make test` in a fresh clone of HEAD, set-up included,
                                                    # the browser stage required (no Chromium: it fails)
    python -m labkit bench-cpu --only repro --repeat 3    # the default repro three times
    python -m labkit bench-cpu --only first-lab [--commit REV]   # a first `make lab`'s set-up: a fresh
                                                    # clone of REV, empty download caches
    python -m labkit bench-cpu --only refresh       # `make refresh` in a fresh clone of HEAD, no GPU

Every run writes what it measured to the records in labkit/data/cpu/ (``--no-record``: print
only): the notebooks' times to notebook_times.json (only when every notebook ran and passed; the
instructor guide's agendas are rendered from it), every other command's times, with the repro's
table, to command_times.json (README.md's repro block is rendered from it: python -m labkit docs
--write). Each entry keeps where, when and with what it was measured, and the commit it measured
(a fresh clone's HEAD, or this tree's HEAD with ``dirty`` when it had uncommitted changes):
tests/test_taught_numbers.py fails when README renders a record of a commit that is not an
ancestor of HEAD, so commit the record after the commit it measured.

Targets on a 2-core machine: the default ``python -m labkit repro`` under 10 s, every notebook
under 60 s under nbval, ``make test`` from a fresh clone under 6 min, its set-up excluded. Timings are wall times of
whole commands, as a user meets them, so other work on the machine slows them: the header prints
the load average to judge that by. The exit status is 1 only if a command failed, never for time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from labkit import paths, records

PROG = "python -m labkit bench-cpu"
NOTEBOOK_RECORD = records.CPU_NOTEBOOKS
COMMAND_RECORD = records.CPU_COMMANDS
TARGET_S = {"repro": 10.0, "notebook": 60.0, "make test": 360.0}
# The stages `make test`'s target leaves out (a fresh clone's first run installs the venv first).
MAKE_TEST_EXCLUDES = ("set-up",)
PARTS = ("repro", "notebooks", "make-test", "fresh-clone", "first-lab", "refresh")
DEFAULT_PARTS = ("repro", "notebooks")


@dataclass
class Timing:
    what: str
    seconds: float
    target_s: float | None
    ok: bool  # the command succeeded (not: within the target)
    note: str = ""
    output: str = ""  # what the command printed that a record keeps (the repro's table)
    commit: dict | None = None  # what was measured, where it was not this tree as it is (a fresh clone)
    excluded_s: float = 0.0  # seconds of stages the target leaves out (make test's set-up)

    def verdict(self) -> str:
        if not self.ok:
            return "FAILED"
        if self.target_s is None:
            return ""
        counted = self.seconds - self.excluded_s
        if counted <= self.target_s:
            return "within target"
        return f"over by {counted - self.target_s:.0f} s"


def _run(cmd: list[str], *, cwd: Path = paths.REPO,
         env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, done


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:100] if lines else ""


def _repro_note(text: str) -> str:
    """The repro table's footer: workload, its own timing, and the backend that ran."""
    lines = [line.strip() for line in text.splitlines()]
    shape = next((line for line in lines if "prompts, seed" in line), "")
    backend = next((line.split(":")[0] for line in lines if line.startswith("backend ")), "")
    return "; ".join(x for x in (shape, backend) if x) or _last_line(text)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    backend = os.environ.get("LABKIT_BACKEND", "auto")
    return (f"{os.cpu_count()} cores ({cpu}), load average {load}, Python {platform.python_version()}, "
            f"LABKIT_BACKEND={backend}")


def repro_table(text: str) -> str:
    """The repro's result table: its header line and one line per mode."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("mode ")), None)
    if start is None:
        return ""
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(line.rstrip() for line in lines[start:end])


def time_repro(extra: list[str]) -> Timing:
    cmd = [sys.executable, "-m", "labkit", "repro", *extra]
    took, done = _run(cmd)
    return Timing(" ".join(["python -m labkit repro", *extra]), took, TARGET_S["repro"], done.returncode == 0,
                  _repro_note(done.stdout) if done.returncode == 0 else _last_line(done.stderr),
                  repro_table(done.stdout))


def time_notebooks(prefixes: list[str] | None) -> list[Timing]:
    notebooks = sorted(paths.NOTEBOOKS.glob("*.ipynb"))
    if prefixes:
        notebooks = [p for p in notebooks if any(p.name.startswith(x) for x in prefixes)]
    timings = []
    for path in notebooks:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
               "--nbval-current-env", "--nbval-sanitize-with", "notebooks/sanitize.cfg",
               str(path.relative_to(paths.REPO))]
        took, done = _run(cmd)
        t = Timing(f"nbval {path.name}", took, TARGET_S["notebook"], done.returncode == 0, _last_line(done.stdout))
        print(f"  {t.what:<48} {t.seconds:7.1f} s  {t.verdict()}", flush=True)
        timings.append(t)
    return timings


def _stage_timings(log: Path, label: str) -> list[Timing]:
    rows = []
    if log.exists():
        for line in log.read_text().splitlines():
            name, seconds, status = line.split(maxsplit=2)
            rows.append(Timing(f"{label} stage {name}", float(seconds), None, not status.startswith("FAILED"), status))
    return rows


def commit_of(tree: Path) -> dict:
    """The commit `tree` holds: ``{"commit": full hash, "dirty": uncommitted changes to tracked files}``,
    or ``{"commit": None, "why": ...}`` where git cannot say (no git, or no .git: a tarball)
    (:func:`labkit.records.kit_commit`, as every record)."""
    found = records.kit_commit(tree, full=True)
    if not found["git_commit"]:
        return {"commit": None, "why": f"{tree} is not a git checkout of the kit"}
    return {"commit": found["git_commit"], "dirty": bool(found["git_dirty"])}


def time_make_test(cwd: Path, label: str, **extra_env: str) -> list[Timing]:
    log = Path(tempfile.mkdtemp(prefix="labkit-stages-")) / "stage-times.txt"
    env = dict(os.environ, LABKIT_STAGE_TIMES=str(log), **extra_env)
    measured = commit_of(cwd)
    took, done = _run(["make", "test"], cwd=cwd, env=env)
    stages = _stage_timings(log, label)
    for stage in stages:
        stage.commit = measured
    excluded = sum(t.seconds for t in stages if t.what.removeprefix(f"{label} stage ") in MAKE_TEST_EXCLUDES)
    whole = Timing(label, took, TARGET_S["make test"], done.returncode == 0, _last_line(done.stdout),
                   commit=measured, excluded_s=excluded)
    return stages + [whole]


def time_fresh_clone() -> list[Timing]:
    """`make test` in a fresh clone of HEAD, as CI runs it: the browser stage must run (without Chromium
    it fails instead of skipping), so the README's figure always includes it."""
    with tempfile.TemporaryDirectory(prefix="labkit-clone-") as tmp:
        clone = Path(tmp) / "labkit"
        subprocess.run(["git", "clone", "-q", str(paths.REPO), str(clone)], check=True)
        return time_make_test(clone, "make test (fresh clone)", LABKIT_REQUIRE_BROWSER="1")


REFRESH = "make refresh (fresh clone)"


def time_refresh() -> Timing:
    """`make refresh` in a fresh clone of HEAD, with this interpreter (its packages) and the GPU hidden:
    what a maintainer waits for when nothing a notebook shows changed (the notebooks it would execute
    add their own times, notebook_times.json). A run that changes a file of the clone fails."""
    with tempfile.TemporaryDirectory(prefix="labkit-refresh-") as tmp:
        clone = Path(tmp) / "labkit"
        subprocess.run(["git", "clone", "-q", str(paths.REPO), str(clone)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
        env.update(PYTHONPATH=str(clone), CUDA_VISIBLE_DEVICES="")
        took, done = _run([sys.executable, "-m", "labkit", "refresh"], cwd=clone, env=env)
        changed = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
        note = "no GPU, nothing under build/; " + ("changed nothing" if not changed.strip() else
                                                  f"changed {len(changed.splitlines())} files")
        return Timing(REFRESH, took, None, done.returncode == 0 and not changed.strip(), note, commit=commit_of(clone))


FIRST_LAB = "make lab set-up"


def time_first_lab(commit: str = "HEAD") -> Timing:
    """A first `make lab`'s set-up as a new learner meets it: a fresh clone of `commit`, no venv, and
    empty download caches (pip's and uv's), up to the moment the server would start. The make target
    is the one that commit's `make lab` depends on; the label says how that commit installs."""
    with tempfile.TemporaryDirectory(prefix="labkit-first-lab-") as tmp:
        clone = Path(tmp) / "labkit"
        subprocess.run(["git", "clone", "-q", str(paths.REPO), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
        makefile = (clone / "Makefile").read_text()
        lab_alone = "LAB_STAMP" in makefile
        target, how = ((".venv/.installed-lab", "the lab extra, uv where it installs") if lab_alone else
                       (".venv/.installed", "every extra, pip"))
        caches = Path(tmp) / "caches"
        env = dict(os.environ, PIP_CACHE_DIR=str(caches / "pip"), UV_CACHE_DIR=str(caches / "uv"),
                   XDG_CACHE_HOME=str(caches))
        print(f"  {FIRST_LAB} of {commit} ({how}) in a fresh clone, empty caches ...", flush=True)
        took, done = _run(["make", target], cwd=clone, env=env)
        return Timing(f"{FIRST_LAB} ({how}; fresh clone, empty caches)", took, None, done.returncode == 0,
                      _last_line(done.stderr if done.returncode else done.stdout), commit=commit_of(clone))


def provenance(command: str, measured: dict | None = None) -> dict:
    """Where, when and with what a measurement was made, and which commit (default: this tree's)."""
    import torch

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
            "python": platform.python_version(), "torch": torch.__version__, "triton": triton_version,
            "command": command, **(measured if measured is not None else commit_of(paths.REPO))}


def write_command_record(timings: list[Timing], command: str, path: Path = COMMAND_RECORD) -> Path:
    """Add the measured commands (all but the notebooks) to `path`, one entry per command: its runs'
    seconds, target and provenance, and for the repro its table. A command measured again replaces
    its entry; the others stay. A command measured with its stages ("LABEL stage NAME") replaces all
    of its old stages too, so that a stage since renamed or removed leaves no stale row, and the
    stages keep the order they ran in."""
    record = json.loads(path.read_text()) if path.exists() else {}
    commands = record.setdefault("commands", {})
    for label in {t.what for t in timings}:
        for old in [what for what in commands if what.startswith(f"{label} stage ")]:
            del commands[old]
    for what in dict.fromkeys(t.what for t in timings):
        runs = [t for t in timings if t.what == what]
        entry = {"seconds": [round(t.seconds, 2) for t in runs], "target_s": runs[0].target_s,
                 "ok": all(t.ok for t in runs), "note": runs[0].note, "provenance": provenance(command, runs[0].commit)}
        if runs[0].excluded_s:
            entry["target_excludes"] = list(MAKE_TEST_EXCLUDES)
        if runs[0].output:
            entry["output"] = runs[-1].output
        commands[what] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def write_notebook_record(timings: list[Timing], command: str, path: Path = NOTEBOOK_RECORD) -> Path:
    """Each notebook's run time under nbval, with where, when and with what it was measured (the
    instructor guide's agendas and time table are rendered from it: labkit.workshop.editions.agenda)."""
    record = {
        "provenance": provenance(command),
        "notebooks": {t.what.removeprefix("nbval "): {"seconds": round(t.seconds, 1)} for t in timings},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def report(timings: list[Timing]) -> str:
    lines = [f"{'what':<52} {'seconds':>8}  {'target':>7}  verdict"]
    for t in timings:
        target = f"{t.target_s:.0f} s" if t.target_s is not None else ""
        lines.append(f"{t.what:<52} {t.seconds:8.1f}  {target:>7}  {t.verdict()}  {t.note}".rstrip())
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(DEFAULT_PARTS),
                        help=f"comma-separated parts among {', '.join(PARTS)} (default: {','.join(DEFAULT_PARTS)})")
    parser.add_argument("--notebooks", default="", help="comma-separated notebook prefixes, e.g. 01,03 (default: all)")
    parser.add_argument("--repro-args", default="", help="extra arguments for the repro run, e.g. '--backend torch'")
    parser.add_argument("--json", default="", help="also write the timings to this JSON file")
    parser.add_argument("--repeat", type=int, default=1, help="run the repro this many times (default 1)")
    parser.add_argument("--commit", default="HEAD", help="first-lab: the commit whose set-up to time (default HEAD)")
    parser.add_argument("--record", action="store_true", default=True,
                        help="write what was measured to the records in labkit/data/cpu/ (the default): the "
                             f"notebooks' times to {NOTEBOOK_RECORD.name} (all notebooks, every one passing), "
                             f"the other commands' to {COMMAND_RECORD.name}")
    parser.add_argument("--no-record", dest="record", action="store_false", help="print only, write no record")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose among {', '.join(PARTS)}")

    print(f"== bench-cpu on {machine()}", flush=True)
    timings: list[Timing] = []
    for _ in range(max(1, args.repeat) if "repro" in parts else 0):
        timings.append(time_repro(args.repro_args.split()))
        print(f"  {timings[-1].what:<48} {timings[-1].seconds:7.1f} s  {timings[-1].verdict()}", flush=True)
    if "notebooks" in parts:
        timings += time_notebooks([x.strip() for x in args.notebooks.split(",") if x.strip()] or None)
    if "make-test" in parts:
        timings += time_make_test(paths.REPO, "make test")
    if "fresh-clone" in parts:
        timings += time_fresh_clone()
    if "first-lab" in parts:
        timings.append(time_first_lab(args.commit))
    if "refresh" in parts:
        timings.append(time_refresh())
    print("\n" + report(timings))
    if args.record:
        command = " ".join([PROG, *argv])
        runs = [t for t in timings if t.what.startswith("nbval ")]
        others = [t for t in timings if not t.what.startswith("nbval ")]
        if others:
            path = write_command_record(others, command)
            print(f"wrote {path.relative_to(paths.REPO)}; render the docs' blocks: python -m labkit docs --write")
        if runs and (args.notebooks or not all(t.ok for t in runs)):
            print(f"not recording the notebooks: {NOTEBOOK_RECORD.name} needs every notebook run, and every one "
                  "passing", file=sys.stderr)
            return 1
        if runs:
            path = write_notebook_record(runs, command)
            print(f"wrote {path.relative_to(paths.REPO)}; render the guide's agendas: python -m labkit docs --write")
    if args.json:
        record = {"machine": machine(), "timings": [asdict(t) for t in timings]}
        Path(args.json).write_text(json.dumps(record, indent=1))
    return 0 if all(t.ok for t in timings) else 1

