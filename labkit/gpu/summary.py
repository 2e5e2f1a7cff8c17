"""The few lines printed at the end of a GPU run: the numbers a reader looks for first."""

from __future__ import annotations

BIG = 256 * 151936  # rows x vocab from which the kernel is bandwidth-bound

# The kit's speed targets at the real vocabularies (128256, 151936), as fractions of the same-bytes
# torch copy: (rows, what) -> at least; a kernel near them is bound by the bytes it must move, as a
# copy is. 'ratio' is masked / unmasked time, at most, from 64 rows up: the fix must cost nothing.
TARGET_VOCABS = (128256, 151936)
TARGETS = {"call": {64: 0.80, 256: 0.88, 512: 0.88}, "kernel": {256: 0.90, 512: 0.90}, "mask_ratio_at_most": 1.02}


def fractions(entry: dict) -> dict:
    """The kernel alone and the whole call as fractions of each copy's speed (copy time / their time)."""
    ms = entry["ms"]
    out = {"kernel_of_copy": ms["copy"] / ms["masked"], "call_of_copy": ms["copy"] / ms["masked_call"],
           "mask_ratio": ms["masked"] / ms["unmasked"]}
    if "triton_copy" in ms:
        out.update(kernel_of_triton_copy=ms["triton_copy"] / ms["masked"],
                   call_of_triton_copy=ms["triton_copy"] / ms["masked_call"])
    if "triton_copy_rows_first" in ms:  # the same copy, its programs in vLLM's order (rows first)
        out.update(triton_copy_of_copy=ms["copy"] / ms["triton_copy"],
                   rows_first_copy_of_copy=ms["copy"] / ms["triton_copy_rows_first"])
    for name in ("single_pass_call", "two_pass_call"):
        if name in ms:
            out[f"{name}_of_copy"] = ms["copy"] / ms[name]
    return out


def targets_for(rows: int, vocab: int) -> dict:
    """The targets at this size (empty where none is set)."""
    if vocab not in TARGET_VOCABS:
        return {}
    out = {}
    if rows in TARGETS["call"]:
        out["call_of_copy_at_least"] = TARGETS["call"][rows]
    if rows in TARGETS["kernel"]:
        out["kernel_of_copy_at_least"] = TARGETS["kernel"][rows]
    if rows >= 64:
        out["mask_ratio_at_most"] = TARGETS["mask_ratio_at_most"]
    return out


def fraction_line(entry: dict) -> str:
    """Kernel and whole call as fractions of the torch copy and of the same-grid Triton copy, targets beside."""
    f, t = entry.get("fractions") or fractions(entry), entry.get("targets", {})

    def beside(value: float, key: str, sign: str = ">=") -> str:
        goal = t.get(key)
        return f"{value:.2f}" + (f" (target {sign} {goal:.2f})" if goal is not None else "")

    line = (f"kernel {beside(f['kernel_of_copy'], 'kernel_of_copy_at_least')} of the torch copy, "
            f"call {beside(f['call_of_copy'], 'call_of_copy_at_least')}")
    if "kernel_of_triton_copy" in f:
        line += (f"; of the same-grid Triton copy: kernel {f['kernel_of_triton_copy']:.2f}, "
                 f"call {f['call_of_triton_copy']:.2f}")
    if "rows_first_copy_of_copy" in f:
        line += (f"; that copy {f['triton_copy_of_copy']:.2f} of the torch copy (rows first: "
                 f"{f['rows_first_copy_of_copy']:.2f})")
    if "single_pass_call_of_copy" in f:
        line += (f"; call with the reduction in Triton (single pass) {f['single_pass_call_of_copy']:.2f}, "
                 f"in torch (two passes) {f['two_pass_call_of_copy']:.2f}")
    return line + f"; masked/unmasked {beside(f['mask_ratio'], 'mask_ratio_at_most', '<=')}"


def _kernel_lines(kernel: dict) -> list[str]:
    lines = ["Sampling kernel at rows x vocab >= 256 x 151936 (kernel alone; bytes = read logits + write q):"]
    for e in kernel.get("sizes", []):
        if e["rows"] * e["vocab"] < BIG:
            continue
        ms = e["ms"]
        line = (f"  {e['rows']:>3} x {e['vocab']}: masked {e['bytes']/ms['masked']/1e6:6.0f} GB/s = "
                f"{ms['copy']/ms['masked']:.0%} of copy; masked/unmasked {ms['masked']/ms['unmasked']:.3f}; "
                f"torch hash port {ms['torch']/ms['masked_call']:.1f}x slower")
        if "compiled_ms" in e:
            line += f"; torch.compile {e['compiled_ms']/ms['masked_call']:.1f}x slower"
        lines.append(line)
        lines.append("      " + fraction_line(e))
        if "half_padded_ms" in e:
            h = e["half_padded_ms"]
            lines.append(f"      half padded: early exit {h['early_exit']/h['masked']:.2f} of masked, "
                         f"live rows alone {h['live_rows_only']/h['masked']:.2f}")
    return lines


def _natural_lines(natural: dict) -> list[str]:
    lines = ["The kernel's whole call against torch samplers (cold graph replays; eager in brackets):"]
    for e in natural.get("sizes", []):
        eager = e.get("kernel_faster_by_eager", {})
        lines.append(f"  {e['rows']} x {e['vocab']}: " + ", ".join(
            f"{n} {v:.1f}x ({eager.get(n, float('nan')):.1f}x)" for n, v in e["kernel_faster_by"].items()))
    return lines


def _race_blocks_lines(race: dict) -> list[str]:
    lines = []
    for r in race.values():
        if not isinstance(r, dict) or "padded_share_per_launch" not in r:
            continue
        shares = r["padded_share_per_launch"]
        wins = r["whole_launch_wins"]
        lines.append(f"Race at vocab {r['vocab']} ({r['num_blocks']} blocks of {r['block_v']}): whole launches "
                     f"won by the padded row {wins['padded']}, by the live row {wins['live']}, of {r['launches']}; "
                     f"padded share of q {sum(shares) / len(shares):.1%}; mixed blocks {r['mixed_blocks']}")
    return lines


def _sanitizer_lines(san: dict) -> list[str]:
    return [f"memcheck, {case}: {san[case]['errors']} errors ({san[case]['invalid_reads']} invalid reads, "
            f"{san[case]['invalid_writes']} invalid writes)" + _stale_note(san[case])
            for case in ("fixed", "fill_only", "stale_slot") if case in san]


def _stale_note(result: dict) -> str:
    audit = (result.get("probe") or {}).get("audit")
    if not audit:
        return ""
    return (f"; live slot {audit['slot']}'s q took the padded row's values in {audit['padded_values_in_live_q']} of "
            f"{audit['launches']} launches")


def summary_lines(record: dict) -> list[str]:
    """Readable lines for the sections present (and not failed) in `record`."""
    ok = {k: v for k, v in record.items() if isinstance(v, dict) and "error" not in v}
    lines = []
    if "kernel" in ok:
        lines += [""] + _kernel_lines(ok["kernel"])
    if "torch_natural" in ok:
        lines += [""] + _natural_lines(ok["torch_natural"])
    if "graphs" in ok:
        lines += ["", "Draft step, graph replay speed-up over eager launches: " + ", ".join(
            f"{e['rows']}: {e['speedup_vs_eager_launches']:.1f}x" for e in ok["graphs"]["sizes"])]
    if "draft_checks" in ok:
        d = ok["draft_checks"]
        lines += ["", f"Eager draft step (k={d['k']}), checks on / checks off "
                  f"(target <= {d['target_ratio_at_most']}x): "
                  + ", ".join(f"{e['rows']} rows {e['ratio']:.2f}x" + (
                      f" ({e['ratio_validate_off']:.2f}x over validate=False)" if "ratio_validate_off" in e else "")
                      for e in d["sizes"])]
    if "e2e" in ok:
        lines += ["", "End to end tokens/s (median): " + ", ".join(
            f"{m} {v:.0f}" for m, v in ok["e2e"]["median_tokens_per_s"].items())]
    if "race_blocks" in ok:
        lines += [""] + _race_blocks_lines(ok["race_blocks"])
    if "sanitizer" in ok:
        lines += [""] + _sanitizer_lines(ok["sanitizer"])
    if "family" in ok:
        from labkit.gpu.family import summary_lines as family_lines

        lines += [""] + family_lines(ok["family"])
    failed = [k for k, v in record.items() if isinstance(v, dict) and "error" in v]
    if failed:
        lines += ["", "Sections that failed (their error is in the record): " + ", ".join(failed)]
    return lines


def print_summary(record: dict) -> None:
    print("\n".join(summary_lines(record)))
