"""Command line: `python -m labkit repro | info | figures | student-edition`."""

from __future__ import annotations

import argparse
import json
import sys

from labkit.checks import LabkitInputError


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from labkit.modes import ALL_MODES, DEFAULT_MODES, MODES

    parser = argparse.ArgumentParser(prog="python -m labkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    repro = sub.add_parser(
        "repro", help="run the bench: the same prompts through eager, buggy and fixed modes",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="modes:\n" + "\n".join(f"  {m:<20} {MODES[m].summary}" for m in ALL_MODES),
    )
    repro.add_argument("--prompts", type=_positive, default=50, help="number of prompts (default 50)")
    repro.add_argument("--seed", type=int, default=0, help="workload and sampling seed (default 0)")
    repro.add_argument("--modes", default=",".join(DEFAULT_MODES),
                       help="comma-separated modes, or 'all' (default: %(default)s); each mode's "
                            "eager reference is added")
    repro.add_argument("--json", action="store_true", help="print a JSON record instead of the table")
    repro.add_argument("--quiet", action="store_true", help="no progress on stderr")

    sub.add_parser("info", help="backend, versions and device")

    figs = sub.add_parser("figures", help="write the figures that explain the bug (and the timing plots) to a folder")
    figs.add_argument("--out", default="figures", help="output folder (default: figures)")

    student = sub.add_parser("student-edition", help="build the student edition of the notebooks (solutions removed)")
    student.add_argument("--src", default="notebooks", help="instructor notebooks (default: notebooks)")
    student.add_argument("--out", default="student", help="output folder (default: student)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "info":
        from labkit import describe

        for key, value in describe().items():
            print(f"{key:>15}: {value}")
        return 0

    if args.command == "figures":
        from labkit.viz.figures import write_all

        for path in write_all(args.out):
            print(path)
        return 0
    if args.command == "student-edition":
        from labkit.workshop.editions import build_student_edition

        for path in build_student_edition(args.src, args.out):
            print(path)
        return 0

    from labkit.modes import resolve_modes
    from labkit.repro import BenchConfig, report, run_bench

    try:
        modes = resolve_modes(args.modes)
    except LabkitInputError as err:
        print(f"python -m labkit repro: error: {err}", file=sys.stderr)
        return 2
    result = run_bench(BenchConfig(prompts=args.prompts, seed=args.seed), modes, progress=not args.quiet)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
