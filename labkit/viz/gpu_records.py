"""Recorded GPU measurements: finding them, reading them, and the tables the kit computes from them.

The records are JSON files written by ``python -m labkit gpu`` on a GPU and kept in
``labkit/data/gpu/``. Only this module reads them (the GPU package writes them), so the rest of
the kit draws GPU results on any machine, the CPU included.

    record_paths(data_dir)     -> list[Path]    recorded files, oldest first
    load_record(path)          -> dict | None   one record (default: the newest); None if none
    caption(record)            -> str           "NVIDIA H200 · driver ... · 2026-11-29": where and when
    section_provenance(record, name) -> dict    one section's own date, versions, command, commit
    section_caption(record, *names)  -> str     caption() per section: each panel's own provenance
    kernel_table(record)       -> list[dict]    per (rows, vocab): times, GB/s, share of copy
    headline(record)           -> dict          the figures the kit claims, computed from the record
    staircase_data(record)     -> dict          the padding staircase's sections that succeeded
    race_block_entries(record) -> list[dict]    the race's per-block winners, largest vocabulary first
    upstream_audit(record)     -> dict | None   audit-vllm compiled on the pinned vLLM releases, if recorded
"""

from __future__ import annotations

import json
from pathlib import Path

from labkit import paths
from labkit.errors import LabkitInputError

DATA_DIR = paths.DATA / "gpu"
RACE_BLOCK_KEYS = ("vocab", "block_v", "launches", "rows", "padded_share_per_launch", "padded_wins_per_block",
                   "example_owner", "whole_launch_wins")


def record_paths(data_dir: Path | str | None = None) -> list[Path]:
    """Recorded GPU benchmark files, oldest first by their recorded date."""
    folder = Path(data_dir) if data_dir is not None else DATA_DIR
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return sorted(paths, key=lambda p: (_read(p).get("provenance", {}).get("date", ""), p.name))


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def load_record(path: Path | str | None = None, data_dir: Path | str | None = None) -> dict | None:
    """The record at `path`, or the newest one in `data_dir` (default labkit/data/gpu); None if none."""
    if path is not None:
        return json.loads(Path(path).read_text())
    paths = record_paths(data_dir)
    return _read(paths[-1]) if paths else None


def caption(record: dict | None) -> str:
    """One line naming the device, driver and versions that produced a record, and when."""
    if not record:
        return "no GPU record"
    p = record.get("provenance", {})
    if p.get("cpu_measured"):
        return (f"CPU-measured on this machine ({p.get('device', 'cpu')}), torch {p.get('torch')}, "
                f"{p.get('date', '')[:10]}: no GPU record found")
    return (f"{p.get('device')} · driver {p.get('driver')} · CUDA {p.get('cuda')} · torch {p.get('torch')} · "
            f"triton {p.get('triton')} · {p.get('date', '')[:10]}")


def section_provenance(record: dict, section: str) -> dict:
    """Where, when and by what `section` was measured: ``record["section_provenance"][section]``
    (a record gathers sections of several runs), else the record's own provenance."""
    stamps = record.get("section_provenance", {}) if isinstance(record, dict) else {}
    return stamps.get(section) or record.get("provenance", {})


def _stamp_line(stamp: dict) -> str:
    return (f"{stamp.get('device')} · driver {stamp.get('driver')} · CUDA {stamp.get('cuda')} · "
            f"torch {stamp.get('torch')} · triton {stamp.get('triton')} · {str(stamp.get('date', ''))[:10]}")


def section_caption(record: dict | None, *sections: str) -> str:
    """Provenance lines for the sections a figure draws from, one per distinct run:
    ``"kernel, torch_natural: NVIDIA H200 · driver ... · 2026-12-01"``."""
    if not record:
        return "no GPU record"
    if record.get("provenance", {}).get("cpu_measured") or not sections:
        return caption(record)
    groups: dict[str, list[str]] = {}
    for name in sections:
        groups.setdefault(_stamp_line(section_provenance(record, name)), []).append(name)
    return "\n".join(f"{', '.join(names)}: {line}" for line, names in groups.items())


# -- tables computed from a record --------------------------------------------------------------------

def _kernel_row(e: dict) -> dict:
    ms, g = e["ms"], e.get("graph_ms", {})
    row = {
        "rows": e["rows"], "vocab": e["vocab"], "bytes": e["bytes"],
        "copy_us": ms["copy"] * 1e3, "masked_us": ms["masked"] * 1e3, "unmasked_us": ms["unmasked"] * 1e3,
        "call_us": ms["masked_call"] * 1e3, "torch_us": ms["torch"] * 1e3,
        "masked_gbs": e["bytes"] / ms["masked"] / 1e6, "copy_gbs": e["bytes"] / ms["copy"] / 1e6,
        "share_of_copy": ms["copy"] / ms["masked"],
        "masked_over_unmasked": (g["masked"] / g["unmasked"]) if g else ms["masked"] / ms["unmasked"],
        "masked_over_unmasked_cold": ms["masked"] / ms["unmasked"],
        "speedup_vs_torch": ms["torch"] / ms["masked_call"],
    }
    if "eager_ms" in e:
        row["eager_call_us"] = e["eager_ms"]["masked_call"] * 1e3
    if "compiled_ms" in e:
        row["compiled_us"] = e["compiled_ms"] * 1e3
        row["speedup_vs_compiled"] = e["compiled_ms"] / ms["masked_call"]
    if "half_padded_ms" in e:
        h = e["half_padded_ms"]
        row["early_exit_over_masked"] = h["early_exit"] / h["masked"]
        row["live_only_over_masked"] = h["live_rows_only"] / h["masked"]
    return row


def kernel_table(record: dict, section: dict | None = None) -> list[dict]:
    """Per (rows, vocab): medians in microseconds, effective GB/s and share of the same-bytes copy
    (``share_of_peak_copy``: of the run's 2 GiB copy, where the record holds one).
    ``masked_over_unmasked`` is from warm back-to-back replays, ``..._cold`` from the cold ones.
    `section`: another kernel section than the record's (a superseded one, say)."""
    data = section if section is not None else record.get("kernel", {})
    peak = record.get("peak_copy", {}).get("gb_per_s") if section is None else None
    rows = [_kernel_row(e) for e in data.get("sizes", [])]
    if peak:
        for row in rows:
            row["share_of_peak_copy"] = row["masked_gbs"] / peak
    return rows


def cited_run(record: dict, section: str, words: str) -> dict:
    """The earlier run of `section` that the record keeps because a doc cites it: the superseded entry
    whose ``cited_by`` mentions `words` (labkit.records keeps such entries through every merge)."""
    for old in superseded(record, section):
        if words in old.get("cited_by", ""):
            return old
    raise LabkitInputError(f"the record keeps no earlier run of {section!r} cited for {words!r}")


def superseded(record: dict, section: str) -> list[dict]:
    """What re-measurements replaced: ``[{"data", "provenance", "superseded_because"}]``, oldest first."""
    return list(record.get("superseded", {}).get(section, []))


def graph_runs(record: dict) -> list[tuple[dict, dict]]:
    """Every recorded run of section "graphs" as (provenance, data): superseded ones, the current
    one, then its repeats (``graph_repeats``)."""
    runs = [(old["provenance"] or record.get("provenance", {}), old["data"]) for old in superseded(record, "graphs")]
    if record.get("graphs"):
        runs.append((section_provenance(record, "graphs"), record["graphs"]))
    runs += [(rep["provenance"], rep["data"]) for rep in record.get("graph_repeats", [])]
    return runs


def headline(record: dict, min_elements: int = 256 * 151936) -> dict:
    """The figures the kit claims, at rows x vocab >= 256 x 151936 (worst case over those sizes)."""
    table = kernel_table(record)
    big = [r for r in table if r["rows"] * r["vocab"] >= min_elements]
    out = {"sizes": [(r["rows"], r["vocab"]) for r in big]}
    if big:
        out["min_share_of_copy"] = min(r["share_of_copy"] for r in big)
        out["max_masked_over_unmasked"] = max(r["masked_over_unmasked"] for r in big)
        out["min_speedup_vs_torch"] = min(r["speedup_vs_torch"] for r in big)
        for key, worst, name in (("speedup_vs_compiled", min, "min_speedup_vs_compiled"),
                                 ("early_exit_over_masked", max, "max_early_exit_over_masked")):
            values = [r[key] for r in big if key in r]
            if values:
                out[name] = worst(values)
    if table:
        out["max_masked_over_unmasked_all_sizes"] = max(r["masked_over_unmasked"] for r in table)
    graphs = record.get("graphs", {}).get("sizes", [])
    if graphs:
        out["graph_speedup_by_rows"] = {e["rows"]: round(e["speedup_vs_eager_launches"], 2) for e in graphs}
    if record.get("peak_copy"):
        out["peak_copy_gbs"] = record["peak_copy"]["gb_per_s"]
    e2e = record.get("e2e", {}).get("median_tokens_per_s")
    if e2e:
        out["tokens_per_s"] = e2e
    return out


def sweep_default_against_fastest(record: dict, default_config: tuple[int, int], single_pass: bool) -> list[dict]:
    """Per swept shape, the whole call of the compiled default -- `default_config` is its (block size,
    warps), ``(GPU_BLOCK_V, GPU_NUM_WARPS)`` in :mod:`labkit.kernels.gumbel_tuning` -- beside the
    fastest whole call of any swept configuration, each as a share of the same-bytes copy's speed."""
    mode = "call_single_pass" if single_pass else "call_two_pass"
    shapes: dict[tuple[int, int], dict] = {}
    for c in record.get("sweep", {}).get("configs", []):
        entry = shapes.setdefault((c["rows"], c["vocab"]), {"rows": c["rows"], "vocab": c["vocab"], "fastest": 0.0})
        for name, ms in c["ms"].items():
            if name.startswith("call_") and c["copy_ms"] / ms > entry["fastest"]:
                entry.update(fastest=c["copy_ms"] / ms, fastest_config=(c["block_v"], c["num_warps"], name))
        if (c["block_v"], c["num_warps"]) == tuple(default_config):
            entry.update(default=c["copy_ms"] / c["ms"][mode], default_config=(c["block_v"], c["num_warps"]))
    return list(shapes.values())


def early_exit_shares(section: dict, vocab: int = 151936, min_rows: int = 64) -> dict:
    """A half-padded batch in a ``kernel`` section: early exit's time and the live rows' alone, each as
    a fraction of the masked launch's, as (lowest, highest) over the sizes of `min_rows` rows and up."""
    pts = [e["half_padded_ms"] for e in section.get("sizes", [])
           if e["vocab"] == vocab and e["rows"] >= min_rows and "half_padded_ms" in e]
    if not pts:
        return {}
    early = [p["early_exit"] / p["masked"] for p in pts]
    live = [p["live_rows_only"] / p["masked"] for p in pts]
    return {"early_exit": (min(early), max(early)), "live_rows_only": (min(live), max(live)), "sizes": len(pts)}


def staircase_data(record: dict) -> dict:
    """{'toy': ..., 'kernel': ...} from a record (sections 'staircase_toy' and 'staircase_kernel',
    or an older combined 'staircase'); parts that failed or are missing are left out."""
    old = record.get("staircase", {}) if isinstance(record.get("staircase"), dict) else {}
    out = {}
    for part in ("toy", "kernel"):
        data = record.get(f"staircase_{part}", old.get(part))
        if isinstance(data, dict) and "error" not in data and data.get("points"):
            out[part] = data
    return out


def race_block_entries(record: dict) -> list[dict]:
    """The record's race measurements per vocab block, largest vocabulary first.

    ``record["race_blocks"]`` is one entry, a list of entries, or a dict of named entries; each
    entry has the keys in :data:`RACE_BLOCK_KEYS`. Raises LabkitInputError naming what is missing.
    """
    data = record.get("race_blocks") if isinstance(record, dict) else None
    if not data:
        raise LabkitInputError("record has no 'race_blocks' section (python -m labkit gpu records it on a GPU)")
    if isinstance(data, dict):
        entries = [data] if "vocab" in data else list(data.values())
    else:
        entries = list(data)
    for entry in entries:
        missing = [k for k in RACE_BLOCK_KEYS if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise LabkitInputError(f"record['race_blocks'] entry lacks {', '.join(missing)}")
        _check_race_entry(entry)
    return sorted(entries, key=lambda e: -e["vocab"])


def _check_race_entry(entry: dict) -> None:
    where = f"record['race_blocks'] (vocab {entry['vocab']})"
    if len(entry["padded_wins_per_block"]) != len(entry["example_owner"]) or not entry["example_owner"]:
        raise LabkitInputError(f"{where}: padded_wins_per_block and example_owner must have one entry per vocab "
                               f"block, got {len(entry['padded_wins_per_block'])} and {len(entry['example_owner'])}")
    if not entry["padded_share_per_launch"]:
        raise LabkitInputError(f"{where}: padded_share_per_launch is empty")
    if len(entry["rows"]) != 2:
        raise LabkitInputError(f"{where}: rows must be [live_row, padded_row], got {entry['rows']}")


def race_runs(record: dict, include_superseded: bool = False) -> list[dict]:
    """Every recorded race outcome, one entry per (run, vocabulary, eager or graph), in one form:
    run 1 is section "race" (whole-launch counts), run 2 section "race_blocks" (per block too).

    Each entry: run, section, vocab, graph, launches, padded_won, live_won, mixed, padded_share (the
    share of q's elements that came from the padded row, over all launches), provenance, superseded
    (False for the record's current runs). `include_superseded` adds the runs that re-measurements
    replaced, each with its own provenance; runs of one vocabulary, run and mode go oldest first."""
    out = []
    if include_superseded:
        for section in ("race", "race_blocks"):
            for old in superseded(record, section):
                for run in race_runs({section: old["data"],
                                      "section_provenance": {section: old["provenance"] or {}}}):
                    out.append(run | {"superseded": True})
    for key, r in (record.get("race") or {}).items():
        if isinstance(r, dict) and "launches" in r:
            out.append({"run": 1, "section": "race", "key": key, "vocab": r["vocab"], "graph": r["graph"],
                        "launches": r["launches"], "padded_won": r["padded_row_won"], "live_won": r["live_row_won"],
                        "mixed": r["mixed"], "padded_share": r["padded_share_of_elements"],
                        "provenance": section_provenance(record, "race"), "superseded": False})
    if record.get("race_blocks"):
        for e in race_block_entries(record):
            won = e["whole_launch_wins"]
            out.append({"run": 2, "section": "race_blocks", "key": f"vocab_{e['vocab']}", "vocab": e["vocab"],
                        "graph": bool(e.get("graph")), "launches": e["launches"], "padded_won": won["padded"],
                        "live_won": won["live"], "mixed": e["launches"] - won["padded"] - won["live"],
                        "padded_share": sum(e["padded_share_per_launch"]) / e["launches"],
                        "provenance": section_provenance(record, "race_blocks"), "superseded": False})
    return sorted(out, key=lambda x: (-x["vocab"], x["run"], x["graph"], str(x["provenance"].get("date", ""))))


def upstream_audit(record: dict | None) -> dict | None:
    """The ``upstream_audit`` section (audit-vllm compiled per pinned vLLM release), with its own
    provenance under ``"provenance"``; None if the record has none or it failed."""
    if not record or not isinstance(record.get("upstream_audit"), dict) or "error" in record["upstream_audit"]:
        return None
    return {**record["upstream_audit"], "provenance": section_provenance(record, "upstream_audit")}


# -- the kit against the samplers engineers pick instead (section "peers") ------------------------------

# What each comparison says, in the order the appendix prints them. "time" ratios: the first call's
# time over the second's (below 1: the first is faster); "share" ratios: a reference's time over the
# call's (the fraction of that reference's speed the call reaches).
PEER_COMPARISONS = (
    ("kit_q_over_vllm_q", "time", "the kit's call with q", "vLLM's gumbel_sample storing its q"),
    ("kit_no_q_over_vllm_no_q", "time", "the kit without q", "vLLM's gumbel_sample without its store"),
    ("kit_no_q_over_flashinfer", "time", "the kit without q", "FlashInfer's SamplingFromLogits"),
    ("kit_q_of_copy", "share", "the kit's call with q", "a copy of the same bytes"),
    ("vllm_q_of_copy", "share", "vLLM's call with q", "a copy of the same bytes"),
    ("kit_no_q_of_read_only", "share", "the kit without q", "a read-only pass over the logits"),
    ("flashinfer_of_read_only", "share", "FlashInfer", "a read-only pass over the logits"),
    ("kit_no_q_no_noise_of_read_only", "share", "the kit without q and without noise",
     "a read-only pass over the logits"),
)


def peers_section(record: dict | None) -> dict | None:
    """The record's ``peers`` section if it was measured (not an error), else None."""
    section = (record or {}).get("peers")
    return section if isinstance(section, dict) and section.get("sizes") else None


def _shapes_text(shapes: list[tuple[int, int]]) -> str:
    rows = sorted({r for r, _ in shapes})
    vocabs = sorted({v for _, v in shapes})
    rows_text = f"{rows[0]}-{rows[-1]}" if len(rows) > 1 else str(rows[0])
    return f"{rows_text} rows x {', '.join(str(v) for v in vocabs)}"


def peer_comparisons(record: dict | None) -> list[dict]:
    """Per comparison of :data:`PEER_COMPARISONS` the record holds: its lowest and highest ratio and the
    shapes they come from (only the shapes where both calls were timed)."""
    section = peers_section(record)
    out = []
    for key, kind, first, second in PEER_COMPARISONS if section else ():
        found = [(e["rows"], e["vocab"], e["ratios"][key]) for e in section["sizes"] if key in e.get("ratios", {})]
        if found:
            values, shapes = [v for _, _, v in found], [(r, v) for r, v, _ in found]
            out.append({"key": key, "kind": kind, "first": first, "second": second, "low": min(values),
                        "high": max(values), "shapes": shapes, "shapes_text": _shapes_text(shapes)})
    return out


def peers_skipped(record: dict | None) -> dict[str, str]:
    """Peer name -> why it was not timed in the recorded run."""
    section = peers_section(record)
    return dict(section.get("skipped", {})) if section else {}


def peer_lines(record: dict | None) -> list[str]:
    """The lines notebook 08 prints about the peers: each comparison's range and shapes, the no-q
    bound from Nsight Compute, and what the run could not time (tests/test_peers.py ties the
    notebook's stored output to these)."""
    lines = []
    peers = (peers_section(record) or {}).get("peers", {})
    if "vllm" in peers:
        v = peers["vllm"]
        lines.append(f"vLLM: release {v.get('version')} (commit {v.get('commit')}), its {v.get('kernel_file')}, "
                     f"API '{v.get('api')}'")
    if "flashinfer" in peers:
        f = peers["flashinfer"]
        lines.append(f"FlashInfer: {f.get('version') or f.get('headers')} ({f.get('source', '').split('=')[0]}), "
                     f"{f.get('nvcc', '')}")
    for c in peer_comparisons(record):
        what = "of the time of" if c["kind"] == "time" else "of the speed of"
        lines.append(f"{c['first']} takes {c['low']:.2f}-{c['high']:.2f} {what} {c['second']} ({c['shapes_text']})"
                     if c["kind"] == "time" else
                     f"{c['first']} reaches {c['low']:.2f}-{c['high']:.2f} {what} {c['second']} ({c['shapes_text']})")
    bound = (peers_section(record) or {}).get("no_q_bound", {})
    for e in bound.get("ncu", []):
        if "error" in e:
            lines.append(f"ncu at {e['rows']} x {e['vocab']}: no counts ({e['error'][:80]})")
            continue
        lines.append(f"ncu, the kit without q at {e['rows']} x {e['vocab']}: {e['lane_instructions_per_element']:.1f} "
                     f"instructions per element; at the issue limit they alone take {e['issue_limit_s'] * 1e6:.1f} us "
                     f"of the kernel's {e['duration_s'] * 1e6:.1f} us (issue slots busy {e['issue_active_pct']:.0f}% "
                     "of the time)")
    for name, why in peers_skipped(record).items():
        lines.append(f"not timed: {name} ({why[:120]})")
    return lines


def no_q_ceiling(record: dict | None) -> list[dict]:
    """Per ncu shape: the best share of the read-only pass the no-q call could reach if every issue slot
    were busy (read-only time / issue-limit time), beside the share it reaches."""
    section = peers_section(record) or {}
    read = {(e["rows"], e["vocab"]): e for e in section.get("sizes", [])}
    out = []
    for e in section.get("no_q_bound", {}).get("ncu", []):
        timed = read.get((e.get("rows"), e.get("vocab")))
        if "error" in e or not timed or "read_only" not in timed["ms"] or "kit_no_q" not in timed["ms"]:
            continue
        read_s = timed["ms"]["read_only"] * 1e-3
        out.append({"rows": e["rows"], "vocab": e["vocab"], "reached": read_s / (timed["ms"]["kit_no_q"] * 1e-3),
                    "ceiling_at_full_issue": read_s / e["issue_limit_s"]})
    return out
