"""``python -m labkit gpu``: run GPU sections and write their record.

    python -m labkit gpu --out DIR [--sections kernel,race_blocks,...] [--quick] [--append]
    python -m labkit gpu --list

prints a table per section and writes ``DIR/gpu_benchmarks.json``: provenance (device, driver,
CUDA, torch and Triton versions, date, command, git commit), then one key per section. The record
is rewritten after every section, so a section that fails (its error is recorded under its name)
does not lose the others. Needs a CUDA device and the compiled Triton backend; without them it
says so in one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import time
import traceback
from pathlib import Path

from labkit.errors import LabkitInputError
from labkit.gpu.records import PROGRAM, RECORD_NAME, command_line, provenance
from labkit.gpu.sections import SECTIONS, Section
from labkit.records import add_command, section_stamp
from labkit.records import read as read_record
from labkit.records import write as write_record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description="GPU measurements of the lab kit's sampling path; "
                                     "writes DIR/" + RECORD_NAME)
    parser.add_argument("--out", help="folder for " + RECORD_NAME + " (created if missing)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help="comma-separated subset of: " + ", ".join(SECTIONS) + " (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and launches (a smoke run)")
    parser.add_argument("--append", action="store_true",
                        help="add the sections to the record already in --out (one process per section "
                             "keeps a CUDA error in one from losing the others)")
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    return parser


def parse_sections(text: str) -> tuple[list[str], list[str]]:
    """(known section names in the order given, unknown names)."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    return [n for n in names if n in SECTIONS], [n for n in names if n not in SECTIONS]


def gpu_problem() -> str | None:
    """Why this machine cannot run the sections, or None."""
    import torch

    from labkit import backends

    if not torch.cuda.is_available():
        return ("needs a CUDA device, and none is visible here. On the CPU, `python -m labkit figures` "
                "plots the records kept in labkit/data/gpu/")
    if backends.backend() != "triton":
        return (f"needs the compiled Triton backend, but this process uses '{backends.backend()}' "
                "(LABKIT_BACKEND): unset LABKIT_BACKEND or set it to 'triton'")
    return None


def _say(message: str) -> None:
    print(message, flush=True)


def run_sections(names: list[str], record: dict, path: Path, *, quick: bool = False,
                 registry: dict[str, Section] = SECTIONS, log=_say, invocation: dict | None = None) -> dict:
    """Run each section, store its data (or its error) in `record`, rewrite the file after each.

    With `invocation` (this run's provenance), each section also gets its own stamp (date, device,
    versions, command) in ``record["section_provenance"]``."""
    for name in names:
        log(f"[{name}]")
        if invocation is not None:
            record.setdefault("section_provenance", {})[name] = section_stamp(invocation)
        t0 = time.perf_counter()
        try:
            record[name] = registry[name].run(quick)
        except Exception as err:  # keep the other sections' data
            traceback.print_exc()
            record[name] = {"error": f"{type(err).__name__}: {err}"[:1000]}
        record.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 1)
        write_record(path, record)
    return record


def _start_record(path: Path, append: bool, command: str) -> dict:
    if append and path.exists():
        return add_command(read_record(path), command)
    from labkit.gpu.kernel import peak_copy_bandwidth

    return {"provenance": provenance(command), "peak_copy": peak_copy_bandwidth()}


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        for s in SECTIONS.values():
            print(f"{s.name:<17} {s.summary}")
        return 0
    if not args.out:
        parser.error("--out DIR is required (the folder for " + RECORD_NAME + ")")
    names, unknown = parse_sections(args.sections)
    if unknown or not names:
        parser.error(f"unknown sections {unknown}; choose from: {', '.join(SECTIONS)}" if unknown
                     else "--sections names no section")
    problem = gpu_problem()
    if problem:
        raise LabkitInputError(problem)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise LabkitInputError(f"cannot create --out folder {out}: {err.strerror}") from None
    path = out / RECORD_NAME
    record = _start_record(path, args.append, command_line(argv))
    invocation = provenance(command_line(argv)) if args.append else record["provenance"]
    print(_describe(record), flush=True)
    run_sections(names, record, path, quick=args.quick, invocation=invocation)
    from labkit.gpu.summary import print_summary

    print_summary(record)
    print(f"wrote {path}")
    return 0


def _describe(record: dict) -> str:
    p = record["provenance"]
    line = f"{p['device']}, driver {p['driver']}, CUDA {p['cuda']}, torch {p['torch']}, triton {p['triton']}"
    if record.get("peak_copy"):
        line += f"; copy {record['peak_copy']['gb_per_s']:.0f} GB/s"
    return line
