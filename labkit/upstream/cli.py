"""``python -m labkit upstream fetch | matrix``: vLLM's releases, fetched and audited.

Each verb is its module's own command, which parses its own arguments (``upstream matrix --help``):

    fetch     :mod:`labkit.upstream.fetch`: releases' audited files, from the index into build/vllm-trees/
    matrix    :mod:`labkit.upstream.record`: every release audited, printed, and (--record) its record
"""

from __future__ import annotations

import importlib

# verb -> (its module, with its own main(argv); what it does)
VERBS = {
    "fetch": ("labkit.upstream.fetch", "read releases' audited files from the index (a few hundred kB each)"),
    "matrix": ("labkit.upstream.record", "audit every release with the sampling kernel; --record writes it"),
}


def add_arguments(parser) -> None:
    verbs = parser.add_subparsers(dest="verb", required=True)
    for name, (_, summary) in VERBS.items():
        verbs.add_parser(name, help=summary, add_help=False).set_defaults(passed_on=[])


def run(args) -> int:
    module, _ = VERBS[args.verb]
    return importlib.import_module(module).main(args.passed_on)
