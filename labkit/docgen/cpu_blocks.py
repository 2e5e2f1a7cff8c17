"""The CPU's blocks: the repro's table and time, a first ``make lab``, what the set-up downloads, and
each stage of ``make test`` in a fresh clone; from the records ``make bench-cpu`` and ``make wheelhouse
RECORD=1`` write."""

from __future__ import annotations

from labkit import records
from labkit.docgen.prose import span, wrap
from labkit.docgen.sources import shown

DEFAULT_REPRO = "python -m labkit repro"
INTERPRETER_REPRO = "python -m labkit repro --backend interpreter"


def render_repro(record: dict) -> str:
    """README: the default repro's table, and its whole-command time against the target."""
    commands = record["commands"]
    default = commands[DEFAULT_REPRO]
    prov = default["provenance"]
    text = ["The default run printed, on the CPU (seed 0; three corrupted samples side by side follow the table "
            "in the real output):", "", *("    " + line for line in default["output"].splitlines()), ""]
    timing = (f"The whole command took {span(default['seconds'], '{:.1f}', ' s')} over {len(default['seconds'])} "
              f"run(s) (target: under {default['target_s']:.0f} s on 2 cores)")
    interp = commands.get(INTERPRETER_REPRO)
    if interp:
        timing += (f"; with `--backend interpreter`, {span(interp['seconds'], '{:.0f}', ' s')} "
                   f"({interp['provenance']['date']})")
    text.append(timing + f". Measured {prov['date']} on {prov['machine']}; torch {prov['torch']}: "
                f"`{shown(records.CPU_COMMANDS)}`, written by `make bench-cpu`.")
    return "\n".join(text)


def render_first_lab(record: dict) -> str:
    """README: a first `make lab`'s set-up, now and before the set-up changed, from one bench session."""
    from labkit.tools.bench_cpu import FIRST_LAB

    runs = sorted(((what, entry) for what, entry in record["commands"].items() if what.startswith(FIRST_LAB)),
                  key=lambda item: item[1]["provenance"]["date"])
    if not runs:
        return ("No first `make lab` is recorded yet: `make bench-cpu ARGS=\"--only first-lab\"` times its set-up in a "
                "fresh clone with empty download caches.")

    def how(what: str) -> str:
        return what[len(FIRST_LAB):].strip(" ()").split(";")[0]

    def commit(entry: dict) -> str:
        return (entry["provenance"].get("commit") or "?")[:7]

    now_what, now = runs[-1]
    text = (f"A first `make lab` on a fresh machine spends {span(now['seconds'], '{:.0f}', ' s')} on its set-up "
            f"(a fresh clone of commit {commit(now)}, no venv, empty download caches; {how(now_what)})")
    before = [(what, entry) for what, entry in runs[:-1] if how(what) != how(now_what)]
    if before:
        then_what, then = before[-1]
        ratio = min(then["seconds"]) / min(now["seconds"])
        text += (f", where commit {commit(then)}'s set-up ({how(then_what)}) spent "
                 f"{span(then['seconds'], '{:.0f}', ' s')}: {ratio:.1f}x faster")
    prov = now["provenance"]
    return (text + f". Measured {prov['date']} on {prov['machine']}, the two runs one after the other; the "
            f"network's speed and the machine's other work change both. `{shown(records.CPU_COMMANDS)}`, "
            "written by `make bench-cpu ARGS=\"--only first-lab [--commit REV]\"`.")


def render_refresh(record: dict) -> str:
    """docs/MAINTAINING.md: how long `make refresh` takes when no notebook's inputs changed, and what it needs."""
    from labkit.tools.bench_cpu import REFRESH

    entry = record["commands"].get(REFRESH)
    if entry is None:
        return "`make refresh` is not timed yet: `make bench-cpu ARGS=\"--only refresh\"` times it in a fresh clone."
    prov = entry["provenance"]
    return (f"In a fresh clone of commit {(prov.get('commit') or '?')[:7]}, with no GPU and nothing under `build/`, "
            f"`make refresh` took {span(entry['seconds'], '{:.0f}', ' s')} and "
            f"{'changed nothing' if entry['ok'] else 'FAILED or changed files: ' + entry['note']}: the blocks "
            "twice, the figures, no notebook (none's inputs had changed). Each notebook it executes adds about its own "
            f"time under nbval (`{shown(records.CPU_NOTEBOOKS)}`). Measured {prov['date']} on "
            f"{prov['machine']}; `{shown(records.CPU_COMMANDS)}`, written by `make bench-cpu ARGS=\"--only "
            "refresh\"`.")


PLATFORM_NAMES = {"linux-x86_64": "Linux x86-64", "linux-x86_64-cuda": "Linux x86-64, `TORCH=cuda`",
                  "darwin-arm64": "macOS arm64", "win32-amd64": "Windows x86-64"}


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def render_downloads(record: dict) -> str:
    """docs/MAINTAINING.md: what a fresh `make lab` downloads on each platform, and how each number was measured."""
    platforms = record["platforms"]
    rows = ["| platform | download | largest wheels | measured |", "| --- | --- | --- | --- |"]
    for key, name in PLATFORM_NAMES.items():
        entry = platforms.get(key)
        if entry is None:
            continue
        if "torch_and_cuda_bytes" in entry:  # PyPI's torch and its CUDA packages in place of the CPU build
            cpu = platforms["linux-x86_64"]
            cpu_torch = dict(cpu["largest"])["torch"]
            total = cpu["bytes"] - cpu_torch + entry["torch_and_cuda_bytes"]
            size = f"about {total / 1e9:.1f} GB"
            largest = (f"torch {_mb(entry['torch_bytes'])} and {entry['cuda_packages']} CUDA packages: "
                       f"{_mb(entry['torch_and_cuda_bytes'])} together, in place of the CPU build")
        else:
            size = f"{_mb(entry['bytes'])}, {entry['wheels']} wheels"
            largest = ", ".join(f"{name} {_mb(n)}" for name, n in entry["largest"])
        prov = entry["provenance"]
        how = "`make wheelhouse RECORD=1`" if prov["command"].startswith("make wheelhouse") else "by hand (see record)"
        rows.append(f"| {name} | {size} | {largest} | {prov['date'][:10]}, {how} |")
    linux = platforms["linux-x86_64"]
    return "\n".join(rows) + "\n\n" + wrap(  # the table's rows stay whole: only the note is wrapped
        f"MB = 10^6 bytes, Python {linux['provenance']['python']}. On Linux, {_mb(linux['from_disk_bytes'])} of "
        "the measured download came from the measuring machine's own disk. The room stage of `make test` "
        "downloads the Linux wheelhouse again and checks its size against this record. "
        f"`{shown(records.CPU_DOWNLOADS)}` says how each entry was measured.")


FRESH_CLONE = "make test (fresh clone)"


def render_make_test(record: dict) -> str:
    """docs/MAINTAINING.md: the wall time of each stage of `make test` in a fresh clone, and of the whole command, and
    the commit that clone held (tests/test_taught_numbers.py checks it is an ancestor of HEAD)."""
    commands = record["commands"]
    whole = commands.get(FRESH_CLONE)
    if whole is None:
        return "No fresh-clone run of `make test` is recorded yet: `make bench-cpu ARGS=\"--only fresh-clone\"`."
    prefix = FRESH_CLONE + " stage "
    stages = {what.removeprefix(prefix): entry for what, entry in commands.items() if what.startswith(prefix)}
    rows = ["| stage | seconds |", "| --- | --- |"]
    # A stage that ran in the background (scripts/timed logs it "passed beside") overlapped the ones
    # after it: the stages then add up to more than the whole command's wall time.
    beside = [name for name, entry in stages.items() if entry.get("note", "").endswith(" beside")]
    rows += [f"| {name}{' (beside other stages)' * (name in beside)} | {span(entry['seconds'], '{:.0f}')} |"
             for name, entry in stages.items()]
    prov = whole["provenance"]
    verdict = "passed" if whole["ok"] else "FAILED"
    rows.append(f"| **whole command** ({verdict}) | **{span(whole['seconds'], '{:.0f}')}** |")
    excluded = [name for name in whole.get("target_excludes", []) if name in stages]
    target = f"under {whole['target_s'] / 60:.0f} minutes"
    if excluded:
        counted = [w - sum(stages[n]["seconds"][i] for n in excluded) for i, w in enumerate(whole["seconds"])]
        rows.append(f"| **without the {', '.join(excluded)}** | **{span(counted, '{:.0f}')}** |")
        target += f" without the {', '.join(excluded)}"
    commit = prov.get("commit")
    measured = f"commit {commit[:7]}" if commit else "a commit the record does not name"
    note = f" Commit {commit[:7]}: {prov['commit_note']}." if commit and prov.get("commit_note") else ""
    overlap = (f" {' and '.join(beside)} ran in the background, beside other stages, so the stages add up to more "
               "than the whole command, which is the wall clock." if beside else "")
    # Whether Chromium was there is read from the run: scripts/timed logs a browser stage without it
    # as "skipped" (the fresh-clone bench makes it fail instead, as CI does).
    browser = stages.get("browser", {}).get("note", "")
    chromium = ("Chromium already installed" if browser.startswith("passed")
                else "the browser stage skipped: no Chromium" if browser.startswith("skipped")
                else "no browser stage recorded")
    return "\n".join(rows) + (
        f"\n\nMeasured in a fresh clone of {measured} (set-up included; {chromium}) "
        f"{prov['date']} on {prov['machine']}; target: {target}.{overlap}{note} "
        f"`{shown(records.CPU_COMMANDS)}`, written by `make bench-cpu ARGS=\"--only fresh-clone\"`.")
