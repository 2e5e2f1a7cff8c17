"""The case book's graph-memory cases under real CUDA graphs: section ``family`` of the GPU record.

On a CPU the kit emulates graphs and their shared memory pool, and so decides by design which
memory a later capture is given. Here the cases that turn on memory, case 3 (two graphs sharing one
pool, :mod:`labkit.family.shared_pool`) and case 4 (a static buffer refreshed at one end and read at
the other, :mod:`labkit.family.static_buffer`), run with real ``torch.cuda.CUDAGraph`` s, captured into
a ``torch.cuda.graph_pool_handle()``, so that PyTorch's caching allocator decides. The section holds
what the CPU record holds for them (each form's symptom against eager, each audit's verdict), and
what only a GPU shows: where the allocator put the target graph's output against the drafter's.
"""

from __future__ import annotations

KEYS = ("shared-pool", "static-buffer")


def output_offsets(device="cuda") -> dict:
    """Per form of case 3, after the first prompt: the target graph's output's address minus the
    drafter graph's output's, in bytes (0: the allocator gave both graphs the same memory)."""
    from labkit.family import shared_pool

    offsets = {}
    for form in ("buggy", "owned"):  # "copied out" holds a copy: the graphs' outputs are the buggy form's
        case = shared_pool.PromptScoring(form, device=device)
        case.score(0)
        offsets[form] = case.hidden.data_ptr() - case.draft_hidden.data_ptr()
    return offsets


def family_section(quick: bool = False) -> dict:
    """Cases 3 and 4 on the GPU (`quick` changes nothing: each runs in well under a second)."""
    from labkit.family.measure import measure

    results = measure("cuda", keys=KEYS)
    results["shared-pool"]["output_offset_bytes"] = output_offsets("cuda")
    return results


def summary_lines(section: dict) -> list[str]:
    """The section in a few lines: each form's symptom, and where the allocator put the outputs."""
    lines = ["The family under real CUDA graphs:"]
    for key in KEYS:
        result = section.get(key, {})
        for form, entry in result.get("symptom", {}).items():
            lines.append(f"  {key}, {form}: {entry['count']} of {entry['total']} {entry['unit']} differ from eager"
                         f"; audit {'passes' if result['audit'][form]['passed'] else 'fails'}")
    offsets = section.get("shared-pool", {}).get("output_offset_bytes")
    if offsets:
        lines.append("  target output minus drafter output, bytes: "
                     + ", ".join(f"{form} {offset}" for form, offset in offsets.items()))
    return lines
