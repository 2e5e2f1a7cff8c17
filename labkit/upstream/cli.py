"""``python -m labkit upstream fetch | record``: vLLM's pinned releases, fetched and audited.

Each verb is its module's own command, which parses its own arguments (``upstream record --help``):

    fetch     :mod:`labkit.upstream.fetch`: the releases' audited files, into build/vllm-trees/
    record    :mod:`labkit.upstream.record`: the audit of those files as a record, and the docs' verdicts
"""

from __future__ import annotations

import importlib

# verb -> (its module, with its own main(argv); what it does)
VERBS = {
    "fetch": ("labkit.upstream.fetch", "fetch the pinned releases' audited files (pip, from the index)"),
    "record": ("labkit.upstream.record", "audit the fetched releases into their record, or merge a GPU run's"),
}


def add_arguments(parser) -> None:
    verbs = parser.add_subparsers(dest="verb", required=True)
    for name, (_, summary) in VERBS.items():
        verbs.add_parser(name, help=summary, add_help=False).set_defaults(passed_on=[])


def run(args) -> int:
    module, _ = VERBS[args.verb]
    return importlib.import_module(module).main(args.passed_on)
