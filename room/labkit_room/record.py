"""What one box holds, as measured: the records of ``python -m labkit hub bench``, rendered into
docs/INSTRUCTOR_GUIDE.md between ``<!-- cpu:hub-room -->``, ``<!-- gpu:hub-room -->``,
``<!-- cpu:hub-neighbour -->`` and ``<!-- gpu:hub-neighbour -->`` markers (labkit.docgen.blocks;
tests/test_taught_numbers.py ties each block to its record).

    room/labkit_room/data/cpu.json             this repository's CPU machine, N = 1, 4, 8
    room/labkit_room/data/gpu_box_rooms.json   the GPU box, N = 1, 10, 30 (room/bench/gpu_box.sh); each row
                                               names its machine (card, cores) and commit
    room/labkit_room/data/neighbour_cpu.json   a learner beside a hostile one (hub bench --neighbour), CPU machine
    room/labkit_room/data/neighbour_gpu.json   the same on the GPU box

(Not in labkit/data/gpu/: every file there is a record of ``python -m labkit gpu``.)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ROOM_CPU = DATA / "cpu.json"  # rooms on this CPU machine
ROOM_GPU_BOX = DATA / "gpu_box_rooms.json"  # rooms on the GPU box, whichever card (each row names its own)
KERNEL_MEMORY = DATA / "kernel_memory.json"  # one kernel's memory, per torch build
ROOM_NEIGHBOUR_CPU = DATA / "neighbour_cpu.json"  # a learner beside a hostile one, CPU machine
ROOM_NEIGHBOUR_GPU = DATA / "neighbour_gpu.json"  # the same on the GPU box

RECORDS = {"cpu": ROOM_CPU, "gpu": ROOM_GPU_BOX, "neighbour-cpu": ROOM_NEIGHBOUR_CPU,
           "neighbour-gpu": ROOM_NEIGHBOUR_GPU}


def load(kind: str) -> dict | None:
    path = RECORDS[kind]
    return json.loads(path.read_text()) if path.exists() else None


def _verdict(row: dict) -> str:
    every = row["every_learner_saw_corruption"] and row["every_learner_fixed_all"]
    corrupted = sorted(set(row["buggy_corrupted"]))
    span = f"{corrupted[0]}" if len(corrupted) == 1 else f"{corrupted[0]}-{corrupted[-1]}"
    return f"{span} of 50 / {row['fixed_right']}" + ("" if every else " (not every learner)")


# How a row's learners started (the bench's --start): rows recorded before warm starts existed had
# their servers started beforehand, untimed, and each kernel started when the learner sat down.
STARTS = {"cold": "cold: server and kernel start as the learner sits down",
          "warm": "warm: the room started both (hub start --warm)",
          None: "servers started before, kernel as the learner sits down"}


def _start(row: dict) -> str | None:
    return row.get("start")


def _split(row: dict) -> str:
    """The worst learner's time to first output, part by part ('-' for rows measured before the bench split it)."""
    worst = (row.get("first_output_split_s") or {}).get("worst_learner")
    if not worst:
        return "-"
    return " + ".join(f"{worst[k]:.1f}" for k in SPLIT_PARTS)


def _server_kernel(row: dict) -> str:
    """A learner's server and kernel at their peak (median learner), or '-' where not measured apart."""
    peak = (row.get("memory_split_mib") or {}).get("peak_rss") or {}
    return f"{peak['server']} / {peak['kernel']} MiB" if "server" in peak and "kernel" in peak else "-"


# The parts of a start's time to first output, in the order they happen (room/bench/hub_bench.py).
SPLIT_PARTS = ("server_start_s", "kernel_start_s", "imports_s", "first_cell_s")


def render_table(record: dict) -> str:
    gpu = any(row.get("gpu_memory_per_learner_mib") for row in record["rooms"])
    split = any(row.get("first_output_split_s") for row in record["rooms"])
    head = ("| learners | start | first output, median / worst "
            + ("| worst: server + kernel + imports + first cell " if split else "")
            + "| last cell, median / worst | memory per learner"
            + (" | server / kernel" if split else "") + (" | GPU memory per learner" if gpu else "")
            + " | buggy corrupted / fixed right |")
    rows = [head, "|" + " --- |" * (head.count("|") - 1)]
    for row in record["rooms"]:
        first, last, mem = row["first_output_s"], row["last_cell_s"], row["memory_per_learner_mib"]
        cells = [str(row["learners"]), _start(row) or "servers before",
                 f"{first['median']:.1f} / {first['worst']:.1f} s"]
        if split:
            cells.append(_split(row) + (" s" if _split(row) != "-" else ""))
        cells += [f"{last['median']:.0f} / {last['worst']:.0f} s", f"{mem['median']} MiB"]
        if split:
            cells.append(_server_kernel(row))
        if gpu:
            g = row.get("gpu_memory_per_learner_mib")
            cells.append(f"{g['median']} MiB" if g else "-")
        cells.append(_verdict(row))
        rows.append("| " + " | ".join(cells) + " |")
    starts = sorted({_start(row) for row in record["rooms"]}, key=lambda x: (x is None, x or ""))
    return "\n".join(rows) + "\n\nStart: " + "; ".join(STARTS[x] for x in starts) + "."


def _proxy_kind(line: str) -> str:
    """'configurable-http-proxy 5.3.0 (Node, /path)' -> 'configurable-http-proxy 5.3.0 (Node)'."""
    name = line.split(" (")[0] or "not recorded"
    return name + (" (Node)" if "(Node" in line else " (Python port)" if "Python port" in line else "")


def _row_provenance(record: dict, row: dict) -> dict:
    """Where and when a row was measured: its own stamp (rows merged from several runs keep theirs), else
    the record's."""
    return row.get("provenance") or record["provenance"]


def _measured(record: dict) -> str:
    """"2026-12-04 on MACHINE (...), commit C", once per run the rows come from (a merged record names each)."""
    runs: dict[tuple, list[str]] = {}
    for row in record["rooms"]:
        prov = _row_provenance(record, row)
        size = f"{row['learners']}{' ' + _start(row) if _start(row) else ''}"
        runs.setdefault((prov["date"], prov["machine"], prov["shared_cpu"], prov["commit"]), []).append(size)
    said = [f"{date} on {machine} ({shared or 'nothing else running'}), commit {commit}"
            for date, machine, shared, commit in runs]
    if len(said) == 1:
        return said[0]
    return "; ".join(f"N = {', '.join(sizes)}: {line}" for line, sizes in zip(said, runs.values(), strict=True))


def _provenance(record: dict) -> str:
    prov = record["provenance"]
    loads = ", ".join(f"{row['learners']}: {row['load_average']['before'][0]:.1f}" for row in record["rooms"])
    proxies = sorted({_proxy_kind(row.get("proxy", "")) for row in record["rooms"]})
    return (f"Measured {_measured(record)} (load average when the learners started, per room size: {loads}), "
            f"JupyterHub {prov['jupyterhub']}, proxy {', '.join(proxies)}, backend "
            f"{', '.join(sorted({b for row in record['rooms'] for b in row['backend']}))} for the repro: "
            f"`{prov['command']}`.")


def render_cpu() -> str:
    record = load("cpu")
    if record is None:
        return "Not measured on a CPU machine yet: `python -m labkit hub bench --learners 1,4,8 --record`, as root."
    most = max(r["learners"] for r in record["rooms"])
    largest = {_start(r): r for r in record["rooms"] if r["learners"] == most}
    said = "; ".join(f"{start or 'servers started before'}, first output within "
                     f"{row['first_output_s']['worst']:.1f} s and notebook 00, notebook 01 and the repro done within "
                     f"{row['last_cell_s']['worst']:.0f} s" for start, row in sorted(
                         largest.items(), key=lambda kv: (kv[0] is None, kv[0] or "")))
    return (f"On this repository's CPU machine, {most} learners starting together: {said}:\n\n"
            + render_table(record) + "\n\n" + _provenance(record) + " Times run from the moment every learner "
            "sits down at once (a barrier). Memory is the peak resident memory of a learner's server and kernel."
            + _split_words(record))


def _card(record: dict, row: dict) -> str:
    """The GPU a row was measured on, from its machine: '16 cores (...), 126 GiB, NVIDIA H200' -> 'NVIDIA H200'."""
    return _row_provenance(record, row)["machine"].rpartition(", ")[2]


def holds_sentence(record: dict) -> str:
    """'One <card> holds N learners with first output under T s ...': the largest room that ran without
    errors, per start (cold: a learner who arrives late or whose server the culler ended; warm: the
    room started their server and kernel before), each with the card its row was measured on."""
    rows = [r for r in record["rooms"] if not r["errors"]]
    if not rows:
        return "No room size ran cleanly"
    most = max(r["learners"] for r in rows)
    largest = sorted((r for r in rows if r["learners"] == most), key=lambda r: (_start(r) is None, _start(r) or ""))
    cards = {_card(record, r) for r in largest}
    said = {"cold": "for a learner whose server and kernel start as they sit down (cold)",
            "warm": "in a room started before (warm)", None: "with servers started before"}
    # Under: the worst learner's time rounded up (9.2 s is under 10 s, not under 9).
    parts = [f"under {math.ceil(r['first_output_s']['worst'])} s {said[_start(r)]}"
             + (f" on an {_card(record, r)}" if len(cards) > 1 else "") for r in largest]
    who = f"One {cards.pop()}" if len(cards) == 1 else "One GPU box"
    return f"{who} holds {most} learners with first output " + " and ".join(parts) + " (the worst learner's)"


def _split_words(record: dict) -> str:
    """Where a cold start's time went, in words, for the largest cold room that has it."""
    cold = [r for r in record["rooms"] if _start(r) == "cold" and r.get("first_output_split_s") and not r["errors"]]
    if not cold:
        return ""
    row = max(cold, key=lambda r: r["learners"])
    worst = row["first_output_split_s"]["worst_learner"]
    names = ("the server's start (spawn to its answer)", "the kernel's start (to its kernel_info reply; the "
             "kernel imports torch for the room's limits)", "the first cell's imports", "its own work")
    parts = ", ".join(f"{name} {worst[k]:.1f} s" for name, k in zip(names, SPLIT_PARTS, strict=True))
    memory = row.get("memory_split_mib") or {}
    holds = memory.get("kernel_holds") or {}
    peak = memory.get("peak_rss") or {}
    kernel = (f"; at their peak a learner's server held {peak.get('server')} MiB and their kernel "
              f"{peak.get('kernel')} MiB ({', '.join(holds.get('heavy', []))} imported"
              f"{', with a CUDA context' if holds.get('cuda_initialised') else ''})" if peak else "")
    client = (f" The bench's client, which stands in for the learners' browsers (on their own laptops in a "
              f"room), ran at the hub's priority (nice {row['client_nice']}) and waited for each server on the "
              "hub's progress stream, as the spawn page does." if "client_nice" in row else "")
    return (f" Where a cold start's time goes, for the last of {row['learners']} learners to see output: "
            f"{parts}{kernel}.{client}")


def render_gpu() -> str:
    record = load("gpu")
    if record is None:
        return ("Not measured on a GPU box yet: `room/bench/gpu_box.sh` says what to carry to the box and runs "
                "N = 1, 10 and 30 there; `python -m labkit docs --write` then renders the figures here.")
    # Each run's notes, said once, from the rows' own stamps: a run merged later keeps the earlier rows' notes.
    said: list[str] = []
    for prov in [record["provenance"], *(_row_provenance(record, row) for row in record["rooms"])]:
        said += [prov[k] for k in ("gpu_memory_note", "server_note", "commit_note")
                 if prov.get(k) and prov[k] not in said]
    notes = "".join(f" {note[0].upper()}{note[1:]}." for note in said)
    before = [r for r in record["rooms"] if _start(r) is None]
    if before:
        notes += (f" The rows marked 'servers before' ({', '.join(str(r['learners']) for r in before)} learners) "
                  "predate cold and warm starts: each server was started before the learners sat down, untimed, "
                  "and each kernel and its `import torch` when they did; `bash room/bench/gpu_box.sh run 1,10` and "
                  "`run 30 cold`, `run 30 warm` measure both into the same record.")
    return (holds_sentence(record) + ":\n\n" + render_table(record) + "\n\n" + _provenance(record)
            + _split_words(record) + notes)


def render_neighbour(kind: str) -> str:
    """A learner's notebook 00 beside a hostile learner, in words, from the record of `kind` ('cpu', 'gpu')."""
    record = load(f"neighbour-{kind}")
    where = "this repository's CPU machine" if kind == "cpu" else "the GPU box"
    if record is None:
        how = ("`room/bench/gpu_box.sh neighbour` runs it there" if kind == "gpu"
               else "`sudo .venv/bin/python -m labkit hub bench --neighbour --record`")
        return f"Not measured on {where} yet: {how}, then `python -m labkit docs --write`."
    prov, a = record["provenance"], record["neighbour"]
    idle, busy = sorted(record["idle_s"]), sorted(record["busy_s"])
    killed = sum(1 for code in a["memory_process_exits"] if code != 0)
    mib = 2**20
    fills = " and ".join(f"{a[key]['bytes'] // mib} MiB to {name} ({a[key]['error'] or 'not refused'})"
                         for name, key in (("/dev/shm", "shm"), ("their home", "home")))
    errors = ", ".join(record["errors_of_b"]) or "none"
    cpu_share = next((line for line in record["enforced"] if line["what"] == "CPU"), {})
    share = "enforced" if cpu_share.get("enforced") else "NOT enforced"
    return (f"On {where} ({record['cgroups']}; CPU share {share}), "
            f"learner B's notebook 00 took {idle[0]:.1f}-{idle[-1]:.1f} s in an idle room and "
            f"{busy[0]:.1f}-{busy[-1]:.1f} s, **{record['ratio']:.2f}x** (median against median), while learner A ran "
            f"{a['busy_processes']} busy processes, forked until refused ({a['forks']['started']} forks: "
            f"{a['forks']['refused']}), ran {len(a['memory_process_exits'])} processes that together went past "
            f"their memory ({killed} ended by their group's cap) and wrote {fills}. B's errors: {errors}. "
            f"Measured {prov['date']} on "
            f"{prov['machine']} ({prov['shared_cpu'] or 'nothing else running'}; load average while B ran beside A: "
            f"{record['load_average_while_busy'][0]:.1f}), commit {prov['commit']}: `{prov['command']}`.")


def renderers(wrap) -> dict:
    """The blocks, their prose wrapped by `wrap` (labkit.docgen.numbers's, the docs' line length, which
    passes it in); a table's rows stay whole."""
    def wrapped(render):
        return lambda: "\n".join(line if line.startswith("|") else wrap(line) for line in render().split("\n"))

    return {"cpu:hub-room": wrapped(render_cpu), "gpu:hub-room": wrapped(render_gpu),
            "cpu:hub-neighbour": wrapped(lambda: render_neighbour("cpu")),
            "gpu:hub-neighbour": wrapped(lambda: render_neighbour("gpu"))}
