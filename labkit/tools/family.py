"""``python -m labkit family``: run the case book's four cases and say what each corrupts and what the audit finds.

    python -m labkit family             # each case: its symptom against eager, buggy and fixed, and its audit
    python -m labkit family --record    # the same, written to labkit/data/cpu/family.json (then make refresh)

On this machine's CPU (graphs and their memory pool emulated) the run is deterministic: the record
is what notebook 09's sentences are rendered from, and a test runs the cases again and compares.
On a GPU, ``python -m labkit gpu --sections family`` measures the cases under real CUDA graphs.
"""

from __future__ import annotations

from labkit import records
from labkit.family.measure import measure
from labkit.family.record import CASES

COMMAND = "python -m labkit family --record"


def add_arguments(cmd) -> None:
    cmd.description = __doc__.split("\n\n")[0]
    cmd.add_argument("--record", action="store_true",
                     help=f"write the results to {records.CPU_FAMILY.relative_to(records.paths.REPO)}")


def lines(results: dict) -> list[str]:
    """Each case in a few lines: its symptom per form, and its audit's verdict per form."""
    out = []
    for case in CASES:
        result = results[case.key]
        out.append(f"case {case.number} · {case.title} ({case.reported_in})")
        symptoms = result["symptom"]
        for label, entry in _symptom_entries(symptoms):
            out.append(f"  {label}: {entry['count']} of {entry['total']} {entry['unit']} differ from eager")
        audits = result["audit"]
        for form, audited in audits.items():
            out.append(f"  audit, {form}: {audited['summary']}")
            out += [f"    {s}" for s in audited["sentences"][:2]]
    return out


def _symptom_entries(symptoms: dict):
    for key, value in symptoms.items():
        if "count" in value:
            yield key, value
        else:  # per schedule, then per form
            for form, entry in value.items():
                yield f"{key}, {form}", entry


def run(args) -> int:
    import torch

    from labkit.tools.bench_cpu import provenance

    results = measure("cpu")
    print("\n".join(lines(results)))
    if args.record:
        record = {"provenance": {**provenance(COMMAND), "device": "cpu", "torch_threads": torch.get_num_threads()},
                  "cases": results}
        records.write(records.CPU_FAMILY, record)
        print(f"wrote {records.CPU_FAMILY.relative_to(records.paths.REPO)}; now render what reads it: make refresh")
    return 0
