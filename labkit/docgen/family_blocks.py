"""The case book's blocks: each case's sources and fix from its record, its numbers from the runs' records.

    const:family-sources-N   notebook 09: where case N was reported and read (before its prediction)
    const:family-fix-N       notebook 09: the fix upstream, where it was read (after the run)
    const:family-map         docs/VLLM_MAP.md: the four cases, their sources and their fixes
    const:family-order       notebook 09, docs/VLLM_MAP.md: the cases in the order reported, and their engines
    cpu:family-N             notebook 09: case N's symptom and audit on the CPU, from labkit/data/cpu/family.json
    gpu:family               notebook 09: cases 3 and 4 under real CUDA graphs, from the GPU record's `family`

The CPU record is written by ``python -m labkit family --record``; the GPU section by ``python -m
labkit gpu --out DIR --sections family``, merged with ``python -m labkit record merge``.
"""

from __future__ import annotations

import json
from typing import Callable

from labkit import records
from labkit.family import record as case_record
from labkit.family.record import CASES

GPU_SECTION = "family"


def cpu_record() -> dict:
    return json.loads(records.CPU_FAMILY.read_text())


def _ranges(values) -> str:
    """1, 2, 3, 5, 7, 8 -> "1-3, 5, 7-8"."""
    values = sorted(values)
    parts, start = [], None
    for i, v in enumerate(values):
        start = v if start is None else start
        if i + 1 == len(values) or values[i + 1] != v + 1:
            parts.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ", ".join(parts)


def _of(entry: dict) -> str:
    return f"{entry['count']} of {entry['total']}"


def _stamp(record: dict) -> str:
    return f"`labkit/data/cpu/family.json`, {record['provenance']['date'][:10]}"


def _verdicts(audits: dict) -> str:
    return ", ".join(f"{form} {'passes' if a['passed'] else 'fails'}" for form, a in audits.items())


def render_stale_slot(record: dict) -> str:
    r = record["cases"]["stale-slot"]
    s3, s7 = r["symptom"]["slot 3 finished"], r["symptom"]["slot 7 finished"]
    slots = sorted({slot for _, slot, _ in s3["buggy"]["corrupted"]})
    return (f"On the CPU: slot 3 finished, {_of(s3['buggy'])} live q records differ from eager (slot "
            f"{', '.join(map(str, slots))}); slot 7 finished, {_of(s7['buggy'])}; fixed, {_of(s3['fixed'])} and "
            f"{_of(s7['fixed'])}. The audit of the buggy drafter: {_verdicts(r['audit_by_schedule'])}; of the fixed "
            f"one: {'passes' if r['audit']['fixed']['passed'] else 'fails'}. ({_stamp(record)})")


def render_hidden_state_cache(record: dict) -> str:
    r = record["cases"]["hidden-state-cache"]
    bug, fixed = r["symptom"]["buggy"], r["symptom"]["null block"]
    return (f"On the CPU: {_of(bug)} cache slots differ from eager (slot {', '.join(map(str, bug['corrupted']))}, "
            f"token row {', '.join(map(str, r['owner_rows']))}'s); with the null block, {_of(fixed)}. Audit: "
            f"{_verdicts(r['audit'])}. ({_stamp(record)})")


def render_shared_pool(record: dict) -> str:
    r = record["cases"]["shared-pool"]
    bug = r["symptom"]["buggy"]
    graphed = [n for n in r["prompt_lengths"] if n <= r["largest_graph_tokens"]]
    eager = [n for n in r["prompt_lengths"] if n > r["largest_graph_tokens"]]
    fixes = ", ".join(f"{form} {_of(entry)}" for form, entry in r["symptom"].items() if form != "buggy")
    return (f"On the CPU: {_of(bug)} prompts' logprobs differ from eager: "
            f"{sum(n in bug['corrupted'] for n in graphed)} of the {len(graphed)} that ran under a graph "
            f"({_list(graphed)} tokens), {sum(n in bug['corrupted'] for n in eager)} of the {len(eager)} that ran "
            f"eagerly ({_list(eager)}); next tokens that differ: {r['next_tokens_differ']['buggy']}; fixed: "
            f"{fixes}. Padding audit of the buggy form: {'passes' if r['padding_audit']['passed'] else 'fails'}; "
            f"lifetime audit: {_verdicts(r['audit'])}. ({_stamp(record)})")


def _list(values) -> str:
    return ", ".join(str(v) for v in values)


def render_static_buffer(record: dict) -> str:
    r = record["cases"]["static-buffer"]
    bug, fixed = r["symptom"]["buggy"], r["symptom"]["fixed"]
    right = r["right_batch_sizes"]["buggy"]
    wrong = [n for n in range(1, r["max_rows"] + 1) if n not in right]
    return (f"On the CPU: batches of {_ranges(right)} save every state where the radix cache looks, of "
            f"{_ranges(wrong)} none: {_of(bug)} tracked states differ from eager; fixed, {_of(fixed)}. Audit: "
            f"{_verdicts(r['audit'])}. ({_stamp(record)})")


CPU_RENDERERS = {"stale-slot": render_stale_slot, "hidden-state-cache": render_hidden_state_cache,
                 "shared-pool": render_shared_pool, "static-buffer": render_static_buffer}


GPU_COMMAND = ("`python -m labkit gpu --out DIR --sections family`, then `python -m labkit record merge "
               "DIR/gpu_benchmarks.json --sections family`")


def measures_current_case_4(entry: dict | None) -> bool:
    """Whether a record's case-4 entry measured the miniature the kit has now (its ``miniature`` field)."""
    from labkit.family import static_buffer

    return isinstance(entry, dict) and entry.get("miniature") == static_buffer.MINIATURE


def render_gpu(record: dict | None) -> str:
    """Notebook 09: cases 3 and 4 under real CUDA graphs, or what to run while the record has no section,
    or none for the case-4 miniature the kit has now."""
    section = (record or {}).get(GPU_SECTION)
    if not isinstance(section, dict) or "error" in section:
        return (f"The GPU record holds no `family` section yet: on a machine with an NVIDIA GPU, {GPU_COMMAND} "
                "run cases 3 and 4 under real CUDA graphs and bring the run here.")
    from labkit.viz.gpu_records import section_provenance

    stamp = section_provenance(record, GPU_SECTION)
    pool, tail = section["shared-pool"], section.get("static-buffer")
    offsets = pool.get("output_offset_bytes", {})
    text = (f"Under real CUDA graphs on {stamp.get('device', 'the GPU')} (`family`, {str(stamp.get('date', ''))[:10]}, "
            f"torch {stamp.get('torch')}; real graphs: {pool['real_graphs']}): PyTorch's "
            f"caching allocator put the drafter graph's output {_placed(offsets.get('buggy'))} of the target "
            f"graph's, and, with the outputs owned, {_placed(offsets.get('owned'))}. "
            f"{_of(pool['symptom']['buggy'])} prompts' logprobs differed from eager "
            f"({', '.join(map(str, pool['symptom']['buggy']['corrupted'])) or 'none'}); "
            + ", ".join(f"{form}, {_of(entry)}" for form, entry in pool["symptom"].items() if form != "buggy") + ".")
    if not measures_current_case_4(tail):
        return text + " Case 4: that run measured an earlier miniature; this one awaits the same command."
    right, bug, fixed = tail["right_batch_sizes"]["buggy"], tail["symptom"]["buggy"], tail["symptom"]["fixed"]
    return text + (f" Case 4 (real graphs: {tail['real_graphs']}): batches of {_ranges(right)} right, {_of(bug)} "
                   f"tracked states wrong; fixed, {_of(fixed)}.")


def _placed(offset) -> str:
    if offset is None:
        return "where the record does not say"
    return "at the address" if offset == 0 else f"{abs(offset)} bytes {'after' if offset < 0 else 'before'} the address"


def renderers(wrap: Callable[[str], str], gpu: dict | None = None, cpu: dict | None = None,
              gpu_loader: Callable[[], dict | None] | None = None) -> dict[str, Callable[[], str]]:
    """``{"KIND:NAME": render}`` for every block above, from the given records or the shipped ones."""
    def cpu_block(key):
        return lambda: wrap(CPU_RENDERERS[key](cpu if cpu is not None else cpu_record()))

    def gpu_block():
        return wrap(render_gpu(gpu if gpu is not None else (gpu_loader() if gpu_loader else None)))

    out = {}
    for case in CASES:
        out[f"const:family-sources-{case.number}"] = (lambda c=case: wrap(" ".join(c.sources)))
        out[f"const:family-fix-{case.number}"] = (lambda c=case: wrap(" ".join(c.fix)))
        out[f"cpu:family-{case.number}"] = cpu_block(case.key)
    out["const:family-map"] = lambda: render_map(wrap)
    out["const:family-order"] = lambda: wrap(render_order())
    out["gpu:family"] = gpu_block
    return out


def render_order() -> str:
    """The cases in the order their threads were opened, and the engines they come from."""
    cases = case_record.in_order_reported()
    listed = ", ".join(f"{c.reported_in} ({_month(c.report.date)})" for c in cases)
    numbers = ", ".join(str(c.number) for c in cases[:-1]) + f" and {cases[-1].number}"
    names = case_record.engines()
    return (f"Reported in this order: {listed}: cases {numbers}, from "
            f"{', '.join(names[:-1]) + ' and ' + names[-1] if len(names) > 1 else names[0]}.")


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def _month(date: str) -> str:
    """"2026-05-27" -> "2026-05-27"; "2026-08" (a month only) -> "August 2026"."""
    parts = date.split("-")
    return date if len(parts) == 3 else f"{_MONTHS[int(parts[1]) - 1]} {parts[0]}"


def render_map(wrap: Callable[[str], str]) -> str:
    """docs/VLLM_MAP.md: each case, where it was read, and its fix."""
    parts = []
    for case in CASES:
        parts.append(wrap(f"- **Case {case.number}, {case.reported_in}** ({case.title.lower()}; "
                          f"`{case.module.replace('.', '/')}.py`): " + " ".join(case.sources) + " *Fix:* "
                          + " ".join(case.fix)))
    return "\n".join(parts)
