"""Command line: `python -m labkit repro | info | figures | student-edition | agenda | docs | audit-vllm | hub`."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import tomllib

from labkit import backends, paths
from labkit.errors import LabkitInputError

BACKEND_CHOICES = ("auto", "torch", "interpreter", "triton")
BACKEND_HELP = (
    "which code runs the kernels: 'torch' (the kernels' pure-torch references, same semantics and store "
    "order; fast on a CPU), 'interpreter' (the Triton source in Triton's CPU interpreter; slow), 'triton' "
    "(the Triton source compiled for a CUDA GPU). 'auto' (default): LABKIT_BACKEND if set, else 'triton' "
    "with a CUDA GPU, else 'torch'"
)
# Optional packages that an extra brings in without naming them (JupyterLab needs nbformat).
_BROUGHT_BY_EXTRA = {"nbformat": "lab"}


class UsageError(Exception):
    """A command cannot run as asked; main prints the message on one line and exits with 2."""


def _repro_epilog() -> str:
    from labkit.bench.modes import ALL_MODES, MODES
    from labkit.bench.repro import LEGEND

    words = "\n".join(textwrap.fill(f"{word:<10} {meaning}", 96, initial_indent="  ", subsequent_indent=" " * 13)
                      for word, meaning in LEGEND.items())
    modes = "\n".join(f"  {m:<20} {MODES[m].summary}" for m in ALL_MODES)
    return f"the table's words:\n{words}\n\nmodes:\n{modes}"


def build_parser() -> argparse.ArgumentParser:
    from labkit.bench.modes import DEFAULT_MODES

    parser = argparse.ArgumentParser(prog="python -m labkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    repro = sub.add_parser(
        "repro", help="run the bench: the same prompts through eager, buggy and fixed modes",
        description="Run the same prompts through eager, buggy and fixed modes and count the responses that "
                    "differ from eager.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_repro_epilog(),
    )
    repro.add_argument("--prompts", default="50", help="number of prompts, a positive integer (default 50)")
    repro.add_argument("--seed", default="0", help="workload and sampling seed, an integer (default 0)")
    repro.add_argument("--modes", default=",".join(DEFAULT_MODES),
                       help="comma-separated modes, or 'all' (default: %(default)s); each mode's "
                            "eager reference is added")
    repro.add_argument("--backend", choices=BACKEND_CHOICES, default="auto", help=BACKEND_HELP)
    repro.add_argument("--json", action="store_true", help="print a JSON record instead of the table")
    repro.add_argument("--quiet", action="store_true", help="no progress on stderr")

    sub.add_parser("info", help="backend, versions and device")

    figs = sub.add_parser("figures", help="write the figures that explain the bug (and the timing plots) to a folder")
    figs.add_argument("--out", default="figures", help="output folder (default: figures)")
    figs.add_argument("--backend", choices=BACKEND_CHOICES, default="auto", help=BACKEND_HELP)

    docs = sub.add_parser("docs", help="the docs' blocks rendered from records: check them, or --write them",
                          description="README.md, docs/INSTRUCTOR_GUIDE.md and docs/MECHANICS.md teach measured "
                                      "numbers between <!-- KIND:NAME --> markers, rendered from the kit's records "
                                      "(labkit.docgen.blocks). Without --write: list the blocks that differ from "
                                      "their rendering (exit status 1 if any).")
    docs.add_argument("--write", action="store_true", help="render every block again, in place")
    agenda = sub.add_parser("agenda", help="the workshop agendas, from the recorded notebook run times")
    agenda.add_argument("--record", default=None, help="a notebook_times.json (default: the one the kit ships)")
    agenda.add_argument("--write", nargs="?", const="docs/INSTRUCTOR_GUIDE.md", default=None,
                        help="render them into this document between its markers (default: %(const)s)")
    audit = sub.add_parser(
        "audit-vllm", help="run a vLLM tree's own Gumbel sampling kernel in the stale-padding scenario",
        description="Load vllm/v1/worker/gpu/sample/gumbel.py from a vLLM installation or source tree (without "
                    "importing the rest of vLLM), run it with a padded row holding a live slot and one holding -1, "
                    "with guard memory around every slot-indexed buffer, and say whether the kernel masks padded "
                    "rows and whether stale slots still corrupt live requests' q; also read whether the tree's "
                    "speculator fills the padded rows of idx_mapping with -1.")
    audit.add_argument("--vllm", default=None, metavar="PATH",
                       help="a vLLM source tree, installation (site-packages or its vllm/ folder) or the folder "
                            "of extracted release files (default: the installed vllm)")
    audit.add_argument("--json", action="store_true", help="print a JSON record instead of the report")
    audit.add_argument("--backend", choices=("auto", "interpreter", "triton"), default="auto",
                       help="'interpreter' (Triton's CPU interpreter: every access seen), 'triton' (compiled for a "
                            "CUDA GPU); 'auto' (default): 'triton' with a CUDA GPU, else 'interpreter'")
    student = sub.add_parser("student-edition", help="build the student edition of the notebooks (solutions removed)")
    student.add_argument("--src", default="notebooks", help="instructor notebooks (default: notebooks)")
    student.add_argument("--out", default="student", help="output folder (default: student)")
    student.add_argument("--fresh", action="store_true", help="write every notebook anew, a learner's copies too")
    from labkit.classroom.cli import add_parser as add_hub_parser  # a room on one server (labkit.classroom)
    add_hub_parser(sub)
    return parser


def _integer(option: str, text: str, *, positive: bool) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or (positive and value < 1):
        kind = "a positive integer" if positive else "an integer"
        raise UsageError(f"{option} must be {kind}, got {text!r}")
    return value


# -- backends -----------------------------------------------------------------------------------

def _auto_backend() -> str:
    if os.environ.get("LABKIT_BACKEND", "").strip():
        return backends.backend()  # the user chose it for this process
    compiled = backends.HAS_TRITON and backends.HAS_CUDA and not backends.KERNELS_INTERPRETED
    return "triton" if compiled else "torch"


def _backend_for(requested: str) -> str | None:
    """The backend to run under; None if this process cannot switch to it (the kernels were compiled
    at import and the interpreter is asked for: the caller re-runs the command in a fresh process)."""
    name = _auto_backend() if requested == "auto" else requested
    # A fresh process can define the kernels for the interpreter: only that one rule is this
    # command's own; whether a backend runs here at all is backends.why_unavailable's.
    fresh = None if os.environ.get("LABKIT_BACKEND", "").strip() != "interpreter" else backends.KERNELS_INTERPRETED
    reason = backends.why_unavailable(name, kernels_interpreted=fresh)
    if reason:
        raise UsageError(f"--backend {name}: " + reason.replace("'interpreter'", "--backend interpreter")
                         .replace("'torch'", "--backend torch"))
    if name == "interpreter" and not backends.KERNELS_INTERPRETED:
        return None  # the kernels were compiled at import: run the command again in a fresh process
    return name


def _in_interpreter_process(argv: list[str]) -> int:
    # Triton fixes compiled-or-interpreted when the kernels are defined (at import), so the
    # interpreter needs a process that chose it before importing labkit.
    env = {**os.environ, "LABKIT_BACKEND": "interpreter"}
    return subprocess.call([sys.executable, "-m", "labkit", *argv], env=env)


# -- commands -----------------------------------------------------------------------------------

def _repro(args) -> int:
    from labkit.bench.modes import resolve_modes
    from labkit.bench.repro import BenchConfig, report, run_bench

    prompts = _integer("--prompts", args.prompts, positive=True)
    seed = _integer("--seed", args.seed, positive=False)
    modes = resolve_modes(args.modes)
    result = run_bench(BenchConfig(prompts=prompts, seed=seed), modes, progress=not args.quiet)
    print(json.dumps(result.to_json(), indent=2) if args.json else report(result))
    return 0


def _info(args) -> int:
    from labkit import describe

    for key, value in describe().items():
        print(f"{key:>15}: {value}")
    print(f"{'repro --backend':>15}: auto uses {_auto_backend()}")
    return 0


def _figures(args) -> int:
    from labkit.viz.figures import write_all

    for path in write_all(args.out):
        print(path)
    print(f"(computed with backend {backends.backend()})", file=sys.stderr)
    return 0


def _student_edition(args) -> int:
    from labkit.workshop.editions.secrecy import STUDENT_PATH
    from labkit.workshop.editions.student import build_learner_folder

    folder = build_learner_folder(args.out, args.src, fresh=args.fresh)
    for path in folder.notebooks:
        print(path, "(kept: already there; --fresh replaces it)" if path in folder.kept else "")
    order = ", ".join(name.split("_")[0] for name in STUDENT_PATH)
    print(f"learners open them in this order (the exercises of 07 before the fix in 03): {order}")
    return 0


def _agenda(args) -> int:
    from labkit.docgen import blocks
    from labkit.workshop.editions.agenda import AGENDAS, BLOCKS, load_times, render, renderers, slack_min

    record = load_times(args.record)
    if args.write:
        written = [key.split(":", 1)[1] for key in blocks.write_into(args.write, renderers(record))]
        if not written:
            raise UsageError(f"{args.write} has no <!-- agenda:NAME --> markers (names: {', '.join(BLOCKS)})")
        print(f"wrote the {', '.join(written)} agenda(s) into {args.write}")
        return 0
    for name in AGENDAS:
        print(f"== {name} ({slack_min(name, record)} min of slack)\n{render(name, record)}\n")
    return 0


def _docs(args) -> int:
    from labkit.docgen import blocks, numbers

    stale = []
    for name in blocks.documents():
        path = blocks.ROOT / name
        if args.write:
            written = blocks.write_into(path, numbers.all_renderers())
            print(f"{name}: rendered {', '.join(written) or 'no blocks'}")
        else:
            stale += [f"{name}: {key}" for key in blocks.stale_blocks(path, numbers.all_renderers())]
    if stale:
        print("blocks that differ from their records (python -m labkit docs --write):\n  " + "\n  ".join(stale))
        return 1
    if not args.write:
        print("every block of the docs and notebooks matches its record")
    return 0


def _audit_vllm(args) -> int:
    from labkit.upstream.report import audit_tree

    result = audit_tree(args.vllm)
    print(json.dumps(result.to_json(), indent=1) if args.json else "\n".join(result.lines()))
    return 0 if result.complete else 1


def _hub(args) -> int:
    from labkit.classroom.cli import run

    return run(args)


COMMANDS = {"audit-vllm": _audit_vllm, "repro": _repro, "info": _info, "figures": _figures,
            "student-edition": _student_edition, "agenda": _agenda, "docs": _docs, "hub": _hub}


def _optional_requirements() -> dict[str, list[str]]:
    """extra -> its requirements: from the installed metadata, or from pyproject.toml when the kit
    runs from a source tree that was never installed (a GPU box that only has the checkout)."""
    try:
        requires = importlib.metadata.requires("labkit") or []
    except importlib.metadata.PackageNotFoundError:
        pyproject = paths.REPO / "pyproject.toml"
        if not pyproject.is_file():
            return {}
        with pyproject.open("rb") as fh:
            return tomllib.load(fh).get("project", {}).get("optional-dependencies", {})
    extras: dict[str, list[str]] = {}
    for req in requires:
        if "extra ==" in req:
            extras.setdefault(req.split("extra ==")[1].strip(" '\""), []).append(req.split(";")[0])
    return extras


def missing_dependency_message(command: str, err: ImportError) -> str | None:
    """What to install for a missing optional package, or None if `err` is not one (a kit bug)."""
    package = (err.name or "").split(".")[0]
    if not package or package == "labkit":
        return None
    extras = {extra for extra, reqs in _optional_requirements().items()
              if any(req.strip().lower().startswith(package.lower()) for req in reqs)}
    extras |= {_BROUGHT_BY_EXTRA[package]} if package in _BROUGHT_BY_EXTRA else set()
    if not extras:
        return f"{command} needs the package {package!r}, which is not installed: pip install {package}"
    first, *others = sorted(extras)
    alternatives = "".join(f" (or 'labkit[{e}]')" for e in others)
    return (f"{command} needs the optional package {package!r}, which a plain install of labkit leaves out: "
            f"pip install 'labkit[{first}]'{alternatives}")


def _run(command: str, args) -> int:
    try:
        return COMMANDS[command](args)
    except (UsageError, LabkitInputError) as err:
        message = str(err)
    except OSError as err:
        where = f": {err.filename}" if err.filename else ""
        message = f"{err.strerror or err}{where}"
    except ImportError as err:
        message = missing_dependency_message(command, err)
        if message is None:
            raise
    print(f"python -m labkit {command}: error: {message}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if getattr(args, "backend", None) is None:  # a command that runs no kernels
        return _run(args.command, args)
    if args.command == "audit-vllm" and args.backend == "auto":  # vLLM's kernel is Triton: never 'torch'
        compiled = backends.HAS_TRITON and backends.HAS_CUDA and not backends.KERNELS_INTERPRETED
        args.backend = "triton" if compiled else "interpreter"
    try:
        name = _backend_for(args.backend)
    except UsageError as err:
        print(f"python -m labkit {args.command}: error: {err}", file=sys.stderr)
        return 2
    if name is None:
        return _in_interpreter_process(argv)
    with backends.using_backend(name):
        return _run(args.command, args)


if __name__ == "__main__":
    sys.exit(main())
