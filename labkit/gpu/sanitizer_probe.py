"""One sampling launch with a padded row as the host fill leaves it, for compute-sanitizer to watch.

An entry point of its own because :mod:`labkit.gpu.sanitizer` runs it under compute-sanitizer, in
a process of its own; nobody types it (the GPU measurements are ``python -m labkit gpu``):

    python -m labkit.gpu.sanitizer_probe fixed       the masked kernel (the fix): reads nothing out of bounds
    python -m labkit.gpu.sanitizer_probe fill_only   the unmasked kernel, checks off: reads temperature[-1]
                                                     and seeds[-1], stores q[-1]
    python -m labkit.gpu.sanitizer_probe stale_slot  the bug itself: the unmasked kernel, padded row 7 still
                                                     holding slot 7 (no fill); every access is in bounds,
                                                     and the padded row's values land in live slot 7's q

Run it under ``compute-sanitizer --tool memcheck`` (see :mod:`labkit.gpu.sanitizer`), with
``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` so that every tensor is its own cudaMalloc allocation: memcheck
knows allocations, not tensors, and a read just before a tensor carved out of the caching
allocator's pool would land inside the pool and go unseen. Each slot-indexed buffer is allocated
right after a 4-byte guard tensor: cudaMalloc rounds sizes up, so the bytes just before the buffer
are, as allocations are laid out in practice, the guard's unused tail, which memcheck counts as
outside every allocation.

Prints one line ``PROBE {json}``: the case, whether the launch was made (or why the kit refused
it on the host), and the CUDA error the launch left, if any (memcheck stops a kernel that makes an
invalid access, and the next synchronisation reports it). The ``stale_slot`` case adds what the
padding-invariance audit compares (:mod:`labkit.proofs.audit`): live slot 7's q after the padded
launch against the same launch of the live rows alone, over :data:`STALE_LAUNCHES` launches with
fresh logits (the padded row's shifted by +100 so that its values are recognisable), and counts
the launches in which the padded row's values landed in that live request's q.
"""

from __future__ import annotations

import json
import sys

CASES = ("fixed", "fill_only", "stale_slot")
VOCAB = 30
STALE_LAUNCHES = 20
PADDED_SHIFT = 100.0


def _guarded(tensor, device: str = "cuda"):
    """`tensor` on the GPU, allocated right after a 4-byte guard (kept alive with it)."""
    import torch

    guard = torch.zeros(1, dtype=torch.int32, device=device)
    return tensor.to(device), guard


def _inputs(stale: bool = False, device: str = "cuda"):
    """docs/MECHANICS.md's second step (7 live rows in a graph of 8): with the fill, row 7 holds -1;
    `stale`, it still holds slot 7 from the step before (the bug)."""
    import torch

    from labkit.bench.scenario import MECHANICS_SCHEDULE

    before, live = list(MECHANICS_SCHEDULE[0]), list(MECHANICS_SCHEDULE[1])
    rows = len(before)
    pad = before[len(live):] if stale else [-1] * (rows - len(live))
    mapping = torch.tensor(live + pad, dtype=torch.int32, device=device)
    logits = torch.randn(rows, VOCAB, device=device)
    positions = torch.zeros(rows, dtype=torch.int64, device=device)
    temperature, g1 = _guarded(torch.full((rows,), 0.8), device)
    seeds, g2 = _guarded(torch.arange(rows, dtype=torch.int64), device)
    q, g3 = _guarded(torch.zeros(rows, 1, VOCAB), device)
    from labkit.kernels.sampling_state import SamplingState

    return (logits, SamplingState(mapping, temperature, seeds, positions, q)), (g1, g2, g3)


def stale_overwrites(tensors, launches: int = STALE_LAUNCHES, backend: str = "triton") -> dict:
    """The audit's comparison for the stale case: live slot 7's q after the padded launch against
    the launch of the live rows alone, with fresh logits each launch."""
    import torch

    from labkit.kernels.gumbel import gumbel_sample
    from labkit.kernels.sampling_state import SamplingState

    logits, state = tensors
    mapping, temperature, q = state.idx_mapping, state.temperature, state.draft_logits
    live = int((mapping[:-1] >= 0).sum())  # rows 0..6 are live; row 7 is the padded one
    padded_row, slot = live, int(mapping[live])
    live_row = int((mapping[:live] == slot).nonzero()[0])
    reference = torch.zeros_like(q)
    gen = torch.Generator(device=logits.device).manual_seed(0)
    differs = from_padded = 0
    for _ in range(launches):
        logits.normal_(generator=gen)
        logits[padded_row] += PADDED_SHIFT
        gumbel_sample(logits, state, draft_step=0, masked=False, validate=False, backend=backend)
        alone = SamplingState(mapping[:live], temperature, state.seeds, state.positions[:live], reference)
        gumbel_sample(logits[:live], alone, draft_step=0, masked=False, validate=False, backend=backend)
        got = q[slot, 0]
        differs += int(not torch.equal(got, reference[slot, 0]))
        from_padded += int(torch.isclose(got, logits[padded_row] / temperature[slot], rtol=1e-6, atol=0).any())
    if logits.is_cuda:
        torch.cuda.synchronize()
    return {"mapping": mapping.tolist(), "slot": slot, "rows": [live_row, padded_row], "launches": launches,
            "live_q_differs_from_unpadded": differs, "padded_values_in_live_q": from_padded}


def probe(case: str) -> dict:
    """Launch once and synchronise (the stale case: launch several times); say how far it got."""
    import torch

    from labkit.errors import LabkitInputError, PaddedSlotOutOfBoundsError
    from labkit.kernels.gumbel import gumbel_sample

    result = {"case": case, "launched": False, "cuda_error": None, "refused": None}
    tensors, guards = _inputs(stale=(case == "stale_slot"))
    try:
        result["launched"] = True
        if case == "stale_slot":
            result["audit"] = stale_overwrites(tensors)
        else:
            gumbel_sample(*tensors, draft_step=0, masked=(case == "fixed"), validate=False, backend="triton")
        torch.cuda.synchronize()
    except (LabkitInputError, PaddedSlotOutOfBoundsError) as err:
        # Refused on the host before any launch: not a memcheck finding.
        result.update(launched=False, refused=f"{type(err).__name__}: {err}"[:300])
    except Exception as err:  # the CUDA error a stopped kernel leaves behind
        result["cuda_error"] = f"{type(err).__name__}: {str(err).splitlines()[0]}"[:300]
    del guards
    return result


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in CASES:
        print(f"usage: python -m labkit.gpu.sanitizer_probe {{{'|'.join(CASES)}}}", file=sys.stderr)
        return 2
    print("PROBE " + json.dumps(probe(argv[0])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
