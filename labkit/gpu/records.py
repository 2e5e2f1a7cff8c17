"""The provenance a GPU run writes first in its record: the device, its driver and clocks, CUDA, torch
and Triton, the date, the command, the kit's commit (:func:`labkit.records.kit_commit`, as every record), and
the kernel's launch defaults, which each section's stamp keeps (:mod:`labkit.gpu.measured_with`).

A record is what the notebooks plot on any machine (:mod:`labkit.viz.gpu_records` reads them), so it
carries everything needed to judge its numbers later. Writing and merging records is
:mod:`labkit.records`'s, for every record of the kit.
"""

from __future__ import annotations

import platform

from labkit import records
from labkit.gpu.measured_with import kernel_defaults

RECORD_NAME = "gpu_benchmarks.json"
PROGRAM = "python -m labkit gpu"
TIMING_NOTE = ("CUDA events per iteration, median. kernel.ms: a CUDA graph holding one call, replayed with "
               "the L2 flushed (256 MiB write) before each replay (cold GPU time, no Python); "
               "kernel.eager_ms: the same calls launched from Python; kernel.graph_ms: warm replays of 20 "
               "calls / 20, interleaved masked/unmasked")


def _nvidia_smi() -> dict:
    smi = records.output_of(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit",
                             "--format=csv,noheader"])
    parts = [p.strip() for p in smi.splitlines()[0].split(",")] if smi else []
    driver, max_sm, max_mem, power = (parts + [None] * 4)[:4]
    return {"driver": driver, "max_sm_clock": max_sm, "max_mem_clock": max_mem, "power_limit": power}


def command_line(argv: list[str]) -> str:
    return " ".join([PROGRAM, *argv])


def provenance(command: str) -> dict:
    """Where and when a record was made (needs a CUDA device)."""
    import torch
    import triton

    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0),
        "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "compute_capability": f"{props.major}.{props.minor}",
        **_nvidia_smi(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": records.utc_now(),
        "command": command,
        **records.kit_commit(),
        "kernel_defaults": kernel_defaults(),
        "timing": TIMING_NOTE,
    }
