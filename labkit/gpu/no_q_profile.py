"""What bounds the kit's call without q? Nsight Compute's instruction and byte counts, per element.

An entry point of its own, not a command of ``python -m labkit``: ncu profiles the launches in a
process of their own (``--launch``, which only ncu starts), and ``--ncu`` starts that process under
ncu on the GPU box:

    python -m labkit.gpu.no_q_profile --launch ROWS VOCAB   the launches ncu watches (GPU)
    python -m labkit.gpu.no_q_profile --ncu OUT.json        run ncu on them and write the bound (GPU)

Without q the kernel reads each logit once and writes nothing per element, so a read-only pass
is its floor -- unless its per-element work takes longer than the reads. ncu counts the warp
instructions the sampling kernel executes (``smsp__inst_executed.sum``) and the DRAM bytes it
reads; at the H200's issue rate (one warp instruction per cycle per scheduler, four schedulers
per SM) the instructions alone need ``inst / (4 * SMs * clock)`` seconds. When that is close to
the read-only pass's time, no schedule of the same instructions can reach it: fewer instructions
per element are the only way, and the same tokens fix most of them (the hash, the inner log's
polynomial: docs in labkit.kernels.noise and labkit.kernels.fast_math).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys

KERNEL = "gumbel_sample_kernel"
METRICS = ("smsp__inst_executed.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second",
           "dram__bytes_read.sum", "gpu__time_duration.sum", "sm__inst_executed_pipe_fma.sum",
           "sm__inst_executed_pipe_alu.sum", "sm__inst_executed_pipe_xu.sum",
           "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.pct_of_peak_sustained_active")
SHAPES = ((256, 151936), (512, 151936))
WARMUP = 2  # launches ncu skips (compilation, first touch)
SCHEDULERS_PER_SM = 4


def launch(rows: int, vocab: int, times: int = WARMUP + 1) -> None:
    """The kit's whole call without q, `times` times, on a GPU (what ncu profiles)."""
    import torch

    from labkit.gpu.kernel import STEP, kernel_case
    from labkit.kernels.gumbel import gumbel_sample

    logits, state = kernel_case(rows, vocab)
    for _ in range(times):
        gumbel_sample(logits, state.with_q(None), draft_step=STEP, validate=False, backend="triton")
    torch.cuda.synchronize()


def parse_ncu_csv(text: str) -> dict[str, float]:
    """{metric: value} of the one kernel launch in ncu's ``--csv`` output (its table of metrics)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    values = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if KERNEL not in row.get("Kernel Name", ""):
            continue
        value = row["Metric Value"].replace(",", "")
        try:
            values[row["Metric Name"]] = float(value)
        except ValueError:
            continue
    return values


def bound(metrics: dict[str, float], rows: int, vocab: int, sms: int) -> dict:
    """Per element: warp instructions, lane instructions; the time the instructions alone need at the
    issue limit; the time the bytes read need at the measured rate."""
    elements = rows * vocab
    inst = metrics["smsp__inst_executed.sum"]
    clock = metrics["sm__cycles_elapsed.avg.per_second"]
    issue_s = inst / (SCHEDULERS_PER_SM * sms * clock)
    duration_s = metrics["gpu__time_duration.sum"] * 1e-9
    return {"rows": rows, "vocab": vocab, "elements": elements, "sms": sms, "clock_hz": clock,
            "warp_instructions": inst, "lane_instructions_per_element": 32 * inst / elements,
            "fma_pipe_per_element": 32 * metrics.get("sm__inst_executed_pipe_fma.sum", 0) / elements,
            "alu_pipe_per_element": 32 * metrics.get("sm__inst_executed_pipe_alu.sum", 0) / elements,
            "xu_pipe_per_element": 32 * metrics.get("sm__inst_executed_pipe_xu.sum", 0) / elements,
            "issue_active_pct": metrics.get("smsp__issue_active.avg.pct_of_peak_sustained_active"),
            "warps_active_pct": metrics.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
            "dram_bytes_read": metrics.get("dram__bytes_read.sum"), "duration_s": duration_s,
            "issue_limit_s": issue_s, "issue_limit_share": issue_s / duration_s}


def profile(out: str) -> int:
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results = []
    for rows, vocab in SHAPES:
        cmd = ["ncu", "--clock-control", "none", "--kernel-name", KERNEL, "--launch-skip", str(WARMUP),
               "--launch-count", "1", "--csv", "--metrics", ",".join(METRICS),
               sys.executable, "-m", "labkit.gpu.no_q_profile", "--launch", str(rows), str(vocab)]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        metrics = parse_ncu_csv(done.stdout)
        if "smsp__inst_executed.sum" not in metrics:
            results.append({"rows": rows, "vocab": vocab, "error": (done.stderr or done.stdout)[-800:]})
            continue
        entry = bound(metrics, rows, vocab, sms)
        entry["metrics"] = metrics
        results.append(entry)
        print(f"{rows} x {vocab}: {entry['lane_instructions_per_element']:.1f} instructions per element, "
              f"issue limit {entry['issue_limit_s'] * 1e6:.1f} us of {entry['duration_s'] * 1e6:.1f} us "
              f"({entry['issue_limit_share']:.0%}), issue active {entry['issue_active_pct']}%", flush=True)
    with open(out, "w") as f:
        json.dump({"ncu": results, "command": "ncu --clock-control none --metrics " + ",".join(METRICS)}, f, indent=1)
    return 0 if all("error" not in r for r in results) else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.gpu.no_q_profile", description=__doc__.splitlines()[0])
    parser.add_argument("--launch", nargs=2, type=int, metavar=("ROWS", "VOCAB"))
    parser.add_argument("--ncu", metavar="OUT.json")
    args = parser.parse_args(argv)
    if args.launch:
        launch(*args.launch)
        return 0
    if args.ncu:
        return profile(args.ncu)
    parser.error("give --launch ROWS VOCAB or --ncu OUT.json")
    return 2


if __name__ == "__main__":
    sys.exit(main())
