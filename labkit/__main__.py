"""Command line of the kit: ``python -m labkit COMMAND ...``; ``python -m labkit --help`` lists the commands.

A dispatcher: :data:`COMMANDS` gives each command its line in ``--help`` and names the module that
parses and runs it, imported only when that command runs. So ``--help`` imports none of them, ``lab``
and ``setup`` run on a Python with nothing but the standard library (the Makefile asks them before
the venv exists), and a command that runs kernels imports the backends first, before anything
imports Triton. The commands defined here are those whose work is a call or two into the kit.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from typing import Callable

from labkit import paths
from labkit.errors import LabkitInputError

PROG = "python -m labkit"
BACKEND_CHOICES = ("auto", "torch", "interpreter", "triton")
BACKEND_HELP = (
    "which code runs the kernels: 'torch' (the kernels' pure-torch references, same semantics and store "
    "order; fast on a CPU), 'interpreter' (the Triton source in Triton's CPU interpreter; slow), 'triton' "
    "(the Triton source compiled for a CUDA GPU). 'auto' (default): LABKIT_BACKEND if set, else 'triton' "
    "with a CUDA GPU, else 'torch'"
)
# Optional packages that an extra brings in without naming them (JupyterLab needs nbformat).
_BROUGHT_BY_EXTRA = {"nbformat": "lab"}


@dataclass(frozen=True)
class Command:
    """One command of ``python -m labkit``.

    Its module defines either ``run(args)``, with ``add_arguments(parser)`` where it takes arguments
    (this dispatcher parses them), or ``main(argv)`` (the module parses them itself, as ``python -m
    labkit NAME``); a command defined here gives its functions instead of a module. A bad value raises
    LabkitInputError: one line, ``python -m labkit NAME: error: ...``, exit status 2. A parser whose
    arguments default to a ``passed_on`` list gets there, in order, the arguments it does not know
    (JupyterLab's options for ``lab``; a verb that hands them to a module's own ``main``).
    """

    summary: str  # its line in `python -m labkit --help`
    module: str = ""
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    run: Callable[[argparse.Namespace], int] | None = None
    # Runs the kit's kernels or models: labkit.backends (and torch) is imported before anything else of
    # the command, so that a bad LABKIT_BACKEND is the command's one-line error.
    kernels: bool = True
    # For a command whose module is another distribution's (the room's): how to install it, said in
    # one line where it is not installed.
    install: str = ""


def _integer(option: str, text: str, *, positive: bool) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or (positive and value < 1):
        kind = "a positive integer" if positive else "an integer"
        raise LabkitInputError(f"{option} must be {kind}, got {text!r}")
    return value


# -- backends -----------------------------------------------------------------------------------

def _auto_backend() -> str:
    from labkit import backends

    if os.environ.get("LABKIT_BACKEND", "").strip():
        return backends.backend()  # the user chose it for this process
    compiled = backends.HAS_TRITON and backends.HAS_CUDA and not backends.KERNELS_INTERPRETED
    return "triton" if compiled else "torch"


def _backend_for(requested: str, offer=None) -> str | None:
    """The backend to run under; None if this process cannot switch to it (the kernels were compiled
    at import and the interpreter is asked for: the caller re-runs the command in a fresh process)."""
    from labkit import backends

    name = _auto_backend() if requested == "auto" else requested
    # A fresh process can define the kernels for the interpreter: only that one rule is this
    # command's own; whether a backend runs here at all is backends.why_unavailable's.
    fresh = None if os.environ.get("LABKIT_BACKEND", "").strip() != "interpreter" else backends.KERNELS_INTERPRETED
    reason = backends.why_unavailable(name, kernels_interpreted=fresh, offer=offer or backends.BACKENDS)
    if reason:
        raise LabkitInputError(f"--backend {name}: " + reason.replace("'interpreter'", "--backend interpreter")
                               .replace("'torch'", "--backend torch"))
    if name == "interpreter" and not backends.KERNELS_INTERPRETED:
        return None  # the kernels were compiled at import: run the command again in a fresh process
    return name


def _in_interpreter_process(argv: list[str]) -> int:
    # Triton fixes compiled-or-interpreted when the kernels are defined (at import), so the
    # interpreter needs a process that chose it before importing labkit.
    env = {**os.environ, "LABKIT_BACKEND": "interpreter"}
    return subprocess.call([sys.executable, "-m", "labkit", *argv], env=env)


def _run_under_backend(name: str, run: Callable, args: argparse.Namespace, argv: list[str]) -> int:
    """Run the command under the backend its --backend asks for (a command without --backend as it is)."""
    if getattr(args, "backend", None) is None:
        return run(args)
    from labkit import backends

    if name == "audit-vllm" and args.backend == "auto":  # vLLM's kernel is Triton: never 'torch'
        compiled = backends.HAS_TRITON and backends.HAS_CUDA and not backends.KERNELS_INTERPRETED
        args.backend = "triton" if compiled else "interpreter"
    # audit-vllm's --backend has no 'torch' (vLLM's kernel is Triton): never suggested to it
    backend = _backend_for(args.backend, ("interpreter", "triton") if name == "audit-vllm" else None)
    if backend is None:
        return _in_interpreter_process([name, *argv])
    with backends.using_backend(backend):
        return run(args)


# -- the commands defined here --------------------------------------------------------------------

def _repro_epilog() -> str:
    from labkit.bench.modes import ALL_MODES, MODES
    from labkit.bench.repro import LEGEND

    words = "\n".join(textwrap.fill(f"{word:<10} {meaning}", 96, initial_indent="  ", subsequent_indent=" " * 13)
                      for word, meaning in LEGEND.items())
    modes = "\n".join(f"  {m:<20} {MODES[m].summary}" for m in ALL_MODES)
    return f"the table's words:\n{words}\n\nmodes:\n{modes}"


def _repro_arguments(parser: argparse.ArgumentParser) -> None:
    from labkit.bench.modes import DEFAULT_MODES

    parser.description = ("Run the same prompts through eager, buggy and fixed modes and count the responses that "
                          "differ from eager.")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _repro_epilog()
    parser.add_argument("--prompts", default="50", help="number of prompts, a positive integer (default 50)")
    parser.add_argument("--seed", default="0", help="workload and sampling seed, an integer (default 0)")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES),
                        help="comma-separated modes, or 'all' (default: %(default)s); each mode's "
                             "eager reference is added")
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="auto", help=BACKEND_HELP)
    parser.add_argument("--json", action="store_true", help="print a JSON record instead of the table")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


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


def _figures_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="figures", help="output folder (default: figures)")
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="auto", help=BACKEND_HELP)


def _figures(args) -> int:
    from labkit import backends
    from labkit.viz.figures import write_all

    for path in write_all(args.out):
        print(path)
    print(f"(computed with backend {backends.backend()})", file=sys.stderr)
    return 0


def _student_edition_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--src", default="notebooks", help="instructor notebooks (default: notebooks)")
    parser.add_argument("--out", default="student", help="output folder (default: student)")
    parser.add_argument("--fresh", action="store_true", help="write every notebook anew, a learner's copies too")


def _student_edition(args) -> int:
    from labkit.workshop.editions.secrecy import STUDENT_PATH
    from labkit.workshop.editions.student import build_learner_folder

    folder = build_learner_folder(args.out, args.src, fresh=args.fresh)
    for path in folder.notebooks:
        print(path, "(kept: already there; --fresh replaces it)" if path in folder.kept else "")
    order = ", ".join(name.split("_")[0] for name in STUDENT_PATH)
    print(f"learners open them in this order (the exercises of 07 before the fix in 03): {order}")
    return 0


def _agenda_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", default=None, help="a notebook_times.json (default: the one the kit ships)")
    parser.add_argument("--write", nargs="?", const="docs/INSTRUCTOR_GUIDE.md", default=None,
                        help="render them into this document between its markers (default: %(const)s)")


def _agenda(args) -> int:
    from labkit.docgen import blocks
    from labkit.workshop.editions.agenda import AGENDAS, BLOCKS, load_times, render, renderers, slack_min

    record = load_times(args.record)
    if args.write:
        written = [key.split(":", 1)[1] for key in blocks.write_into(args.write, renderers(record))]
        if not written:
            raise LabkitInputError(f"{args.write} has no <!-- agenda:NAME --> markers (names: {', '.join(BLOCKS)})")
        print(f"wrote the {', '.join(written)} agenda(s) into {args.write}")
        return 0
    for name in AGENDAS:
        print(f"== {name} ({slack_min(name, record)} min of slack)\n{render(name, record)}\n")
    return 0


def _docs_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("The docs and the notebooks' markdown hold measured numbers, and sentences that restate "
                          "constants, between <!-- KIND:NAME --> markers, rendered from the kit's records "
                          "(labkit.docgen). Without --write: list the blocks that differ from their rendering (exit "
                          "status 1 if any). `make refresh` also draws the figures and runs the notebooks that read "
                          "records.")
    parser.add_argument("--write", action="store_true", help="render every block again, in place")


def _docs(args) -> int:
    from labkit.docgen.refresh import render_blocks

    changed = render_blocks(write=args.write)
    if args.write:
        print("rendered: " + (", ".join(changed) or "every block was already as rendered"))
        return 0
    if changed:
        print("blocks that differ from their records (python -m labkit docs --write):\n  " + "\n  ".join(changed))
        return 1
    print("every block of the docs and notebooks matches its record")
    return 0


def _audit_vllm_arguments(parser: argparse.ArgumentParser) -> None:
    from labkit.upstream.report import add_arguments

    add_arguments(parser)


def _audit_vllm(args) -> int:
    from labkit.upstream.report import run_command

    return run_command(args)


# In the order `--help` lists them: a learner's and an instructor's first, then the maintainers'.
COMMANDS = {
    "lab": Command("open JupyterLab on an edition's notebooks (make lab)", "labkit.tools.lab", kernels=False),
    "repro": Command("run the bench: eager, buggy and fixed modes, same prompts",
                     add_arguments=_repro_arguments, run=_repro),
    "info": Command("backend, versions and device", run=_info),
    "figures": Command("write the figures that explain the bug to a folder",
                       add_arguments=_figures_arguments, run=_figures),
    "student-edition": Command("the notebooks' student edition (solutions removed)",
                               add_arguments=_student_edition_arguments, run=_student_edition),
    "agenda": Command("the workshop agendas, from the notebooks' run times",
                      add_arguments=_agenda_arguments, run=_agenda),
    "audit-vllm": Command("is a vLLM tree affected by PR #47066? (exit 1: yes)",
                          add_arguments=_audit_vllm_arguments, run=_audit_vllm),
    "hub": Command("a JupyterHub for a room on one server (as root)", "labkit_room.cli",
                   install="pip install -e 'room/[hub]' in the kit's checkout (make hub does)"),
    "setup": Command("the set-up: pip's source, a wheelhouse, lab defaults", "labkit.tools.setup", kernels=False),
    "docs": Command("the docs' blocks against their records; --write renders",
                    add_arguments=_docs_arguments, run=_docs),
    "refresh": Command("render the docs, figures and notebooks from the records",
                       "labkit.docgen.refresh"),
    "family": Command("the case book's four cases: what each corrupts, the audit", "labkit.tools.family"),
    "gpu": Command("GPU measurements of the sampling path, into a record", "labkit.gpu.cli"),
    "record": Command("merge a run's sections into one of the kit's records", "labkit.records", kernels=False),
    "upstream": Command("vLLM's releases: fetch their files, record the audit", "labkit.upstream.cli",
                        kernels=False),
    "bench-cpu": Command("time the kit on a CPU against its targets (make bench-cpu)", "labkit.tools.bench_cpu",
                         kernels=False),
    "mutants": Command("break each part of the fix; a test must fail (make mutants)", "labkit.tools.mutants",
                       kernels=False),
    "run-notebooks": Command("run notebooks, report the cells that raised (GPU boxes)", "labkit.tools.run_notebooks",
                             kernels=False),
    "train-models": Command("regenerate the toy corpus and train the toy models", "labkit.tools.train_models"),
}


# -- dispatch -------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    """The commands and their one line each (``--help``); each command's own options are its module's."""
    width = max(map(len, COMMANDS))
    listing = "\n".join(f"{name:<{width}}  {command.summary}" for name, command in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog=PROG, usage=f"{PROG} [-h] COMMAND ...", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The lab kit's commands; `python -m labkit COMMAND --help` says more about one.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help=argparse.SUPPRESS,
                                title="commands", description=listing)
    for name in COMMANDS:
        sub.add_parser(name, add_help=False)
    return parser


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


def _parse(name: str, command, target, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"{PROG} {name}", description=command.summary)
    if getattr(target, "add_arguments", None):
        target.add_arguments(parser)
    args, unknown = parser.parse_known_args(argv)
    if hasattr(args, "passed_on"):
        args.passed_on = unknown
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _run(name: str, argv: list[str]) -> int:
    command = COMMANDS[name]
    try:
        if command.kernels:
            importlib.import_module("labkit.backends")
        target = importlib.import_module(command.module) if command.module else command
        if hasattr(target, "main"):
            return target.main(argv)
        return _run_under_backend(name, target.run, _parse(name, command, target, argv), argv)
    except LabkitInputError as err:  # a bad LABKIT_BACKEND too (EnvironmentValueError)
        message = str(err)
    except OSError as err:
        where = f": {err.filename}" if err.filename else ""
        message = f"{err.strerror or err}{where}"
    except ImportError as err:
        missing = (err.name or "").split(".")[0]
        if command.install and missing == command.module.split(".")[0]:
            message = f"the room is its own distribution, labkit-room, not installed here: {command.install}"
        elif command.install and missing and missing != "labkit":  # what the room's hub extra brings
            message = f"the package {missing!r} is not installed: {command.install}"
        else:
            message = missing_dependency_message(name, err)
            if message is None:
                raise
    print(f"{PROG} {name}: error: {message}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        parser = build_parser()
        parser.parse_args(argv)  # --help lists the commands; anything else is a usage error
        parser.error("the command comes first")
    return _run(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main())
