"""One sampling launch with a padded row holding -1, for compute-sanitizer to watch.

    python -m labkit.gpu.sanitizer_probe fixed       the masked kernel (the fix): reads nothing out of bounds
    python -m labkit.gpu.sanitizer_probe fill_only   the unmasked kernel, checks off: reads temperature[-1]
                                                     and seeds[-1], stores q[-1]

Run it under ``compute-sanitizer --tool memcheck`` (see :mod:`labkit.gpu.sanitizer`), with
``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` so that every tensor is its own cudaMalloc allocation: memcheck
knows allocations, not tensors, and a read just before a tensor carved out of the caching
allocator's pool would land inside the pool and go unseen. Each slot-indexed buffer is allocated
right after a 4-byte guard tensor: cudaMalloc rounds sizes up, so the bytes just before the buffer
are, as allocations are laid out in practice, the guard's unused tail, which memcheck counts as
outside every allocation.

Prints one line ``PROBE {json}``: the case, whether the launch was made (or why the kit refused
it on the host), and the CUDA error the launch left, if any (memcheck stops a kernel that makes an
invalid access, and the next synchronisation reports it).
"""

from __future__ import annotations

import json
import sys

CASES = ("fixed", "fill_only")
VOCAB = 30


def _guarded(tensor):
    """`tensor` on the GPU, allocated right after a 4-byte guard (kept alive with it)."""
    import torch

    guard = torch.zeros(1, dtype=torch.int32, device="cuda")
    return tensor.to("cuda"), guard


def _inputs():
    """docs/MECHANICS.md's second step (7 live rows in a graph of 8), with the fill: row 7 holds -1."""
    import torch

    from labkit.scenario import MECHANICS_SCHEDULE

    live = list(MECHANICS_SCHEDULE[1])
    rows = len(MECHANICS_SCHEDULE[0])
    mapping = torch.tensor(live + [-1] * (rows - len(live)), dtype=torch.int32, device="cuda")
    logits = torch.randn(rows, VOCAB, device="cuda")
    positions = torch.zeros(rows, dtype=torch.int64, device="cuda")
    temperature, g1 = _guarded(torch.full((rows,), 0.8))
    seeds, g2 = _guarded(torch.arange(rows, dtype=torch.int64))
    q, g3 = _guarded(torch.zeros(rows, 1, VOCAB))
    from labkit.kernels.sampling_state import SamplingState

    return (logits, SamplingState(mapping, temperature, seeds, positions, q)), (g1, g2, g3)


def probe(case: str) -> dict:
    """Launch once and synchronise; say how far it got."""
    import torch

    from labkit.errors import LabkitInputError, PaddedSlotOutOfBoundsError
    from labkit.kernels.gumbel import gumbel_sample

    result = {"case": case, "launched": False, "cuda_error": None, "refused": None}
    tensors, guards = _inputs()
    try:
        result["launched"] = True
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
