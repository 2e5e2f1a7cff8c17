"""The sections of a GPU run, by name: what each measures and the function that measures it.

Each section returns a JSON-ready dict stored under its name in the record. ``quick`` asks for
fewer sizes or launches (a smoke run). The modules are imported when a section runs, so that the
command line answers ``--help`` and ``--list`` without touching the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from labkit.gpu.sizes import DRAFT_CHECK_ROWS, KERNEL_SIZES, PEER_SHAPES, ROWS, SWEEP_SHAPES, TOY_CAPTURE_SIZES


@dataclass(frozen=True)
class Section:
    name: str
    summary: str
    run: Callable[[bool], dict]  # quick -> the section's data


def _kernel(quick: bool) -> dict:
    from labkit.gpu.kernel import bench_kernel

    return bench_kernel(rows_list=(1, 8, 64, 256, 512) if quick else ROWS)


def _torch_natural(quick: bool) -> dict:
    from labkit.gpu.kernel import bench_torch_natural

    return bench_torch_natural()


def _sweep(quick: bool) -> dict:
    from labkit.gpu.kernel import bench_sweep

    return bench_sweep(shapes=SWEEP_SHAPES[:1] if quick else SWEEP_SHAPES)


def _graphs(quick: bool) -> dict:
    from labkit.gpu.drafter import bench_graphs

    return bench_graphs(capture_sizes=(1, 8, 64) if quick else TOY_CAPTURE_SIZES)


def _staircase_kernel(quick: bool) -> dict:
    from labkit.gpu.staircase import bench_staircase_kernel

    return bench_staircase_kernel(kernel_sizes=(1, 8, 64, 512) if quick else KERNEL_SIZES)


def _staircase_toy(quick: bool) -> dict:
    from labkit.gpu.staircase import bench_staircase_toy

    return bench_staircase_toy(capture_sizes=(1, 2, 4, 8) if quick else TOY_CAPTURE_SIZES)


def _draft_checks(quick: bool) -> dict:
    from labkit.gpu.drafter import bench_draft_checks

    return bench_draft_checks(rows_list=(1, 64) if quick else DRAFT_CHECK_ROWS, iters=20 if quick else 60)


def _e2e(quick: bool) -> dict:
    from labkit.gpu.drafter import bench_e2e

    return bench_e2e(repeats=1 if quick else 5)


def _race(quick: bool) -> dict:
    from labkit.gpu.race import race_section

    return race_section(quick)


def _race_blocks(quick: bool) -> dict:
    from labkit.gpu.race import race_blocks_section

    return race_blocks_section(*((20, 100) if quick else (200, 1000)))


def _peers(quick: bool) -> dict:
    from labkit.gpu.peers import bench_peers

    return bench_peers(shapes=PEER_SHAPES[2:4] if quick else PEER_SHAPES)


def _exactness(quick: bool) -> dict:
    from labkit.gpu.correctness import exactness

    return exactness()


def _invariance(quick: bool) -> dict:
    from labkit.gpu.correctness import invariance_section

    return invariance_section()


def _sanitizer(quick: bool) -> dict:
    from labkit.gpu.sanitizer import sanitizer_section

    return sanitizer_section()


def _family(quick: bool) -> dict:
    from labkit.gpu.family import family_section

    return family_section(quick)


def _upstream_audit(quick: bool) -> dict:
    # Every release carried in build/vllm-trees/ (or LABKIT_VLLM_TREES): the box has no network.
    from labkit.upstream.record import audit_releases

    return audit_releases(log=print)


SECTIONS: dict[str, Section] = {s.name: s for s in [
    Section("kernel", "the sampling kernel, masked and unmasked, vs torch, torch.compile and a same-bytes copy",
            _kernel),
    Section("torch_natural", "the kernel vs natural torch samplers (torch.rand Gumbel, multinomial) at 256 and "
            "512 x 151936", _torch_natural),
    Section("peers", "the kit's call with and without q beside vLLM's gumbel_sample and FlashInfer's sampling "
            "from logits (each checked first; missing ones skipped by name), a read-only pass and a copy", _peers),
    Section("sweep", "block size x warps x fast-math level: what bounds the kernel", _sweep),
    Section("graphs", "a toy draft step: CUDA graph replay vs eager launches", _graphs),
    Section("staircase_kernel", "the kernel at 151936 against live rows, graphs padded as the fix pads them",
            _staircase_kernel),
    Section("staircase_toy", "the toy draft step against live rows: padded graph vs eager", _staircase_toy),
    Section("draft_checks", "an eager draft step with the input checks on vs the same step with none", _draft_checks),
    Section("e2e", "tokens/s of the toy engine per mode", _e2e),
    Section("race", "colliding rows: whole-launch winners at vocab 30 and 151936, eager and graphed", _race),
    Section("race_blocks", "colliding rows: which row's values land in each vocab block of q", _race_blocks),
    Section("exactness", "the compiled kernel's sampling distribution per fast-math level", _exactness),
    Section("invariance", "the toy models' batch invariance on the GPU, per model and per layer", _invariance),
    Section("sanitizer", "compute-sanitizer memcheck: the fixed kernel, the fill without the mask, the stale slot",
            _sanitizer),
    Section("family", "the case book's shared-pool and static-buffer cases under real CUDA graphs: symptoms "
            "against eager, both audits, where the allocator put the graphs' outputs", _family),
    Section("upstream_audit", "audit-vllm compiled: every release whose files are carried in $LABKIT_VLLM_TREES "
            "(default build/vllm-trees/; fetched elsewhere with python -m labkit upstream fetch)", _upstream_audit),
]}
