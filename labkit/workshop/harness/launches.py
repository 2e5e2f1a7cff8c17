"""The launches of exercise (b): the learner's sampling kernel (or torch function) on guarded buffers.

Each case is one launch of a toy vocabulary (31 tokens: one block of 32 lanes with one lane
past the vocabulary) with a row -> slot mapping whose padded rows hold what the fixed host side
writes. Temperature, seeds and q (``draft_logits``) sit inside guarded allocations (:mod:`labkit.proofs.guarded`); the
outcome says what the launch produced and what it touched outside the buffers.

How reads are seen depends on where the learner's code runs:

    interpreter (CPU)   every load and store is logged before it happens      exact
    torch function      integer indexing of the buffers is logged             exact
    compiled (GPU)      the launch runs under two guard contents, each twice
                        (A B B A); a row whose token changed with the guards
                        alone, not from launch to launch, read them           by effect only
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

import torch

from labkit import backends
from labkit.kernels.gumbel import gumbel_sample_torch
from labkit.kernels.noise import SALT_DRAFT
from labkit.kernels.sampling_state import SamplingState
from labkit.models import one_thread_on_cpu
from labkit.proofs.guarded import (
    GUARD_Q,
    GUARD_ROWS,
    GUARD_SETS,
    Q_UNTOUCHED,
    Access,
    AccessLog,
    Guarded,
    GuardedTensor,
    recording,
)

M = 8  # slots (max_num_reqs)
V = 31  # the toy vocabulary
BLOCK_V = 32
TOKEN_UNSET = -7

# The row -> slot mapping of each launch; slot 0 is live, so a `slot > 0` test shows up. Private, with
# a function to read it: `?` on a public table would show its padded rows before the exercises.
_CASE_MAPPINGS = ((0, 1, 2, 4, 5, 6, 7, -1), (6, 0, -1, -1), (3, 7, 1, 0))


def case_mappings() -> tuple[tuple[int, ...], ...]:
    """The row -> slot mapping of each launch, in order (the checker of (b) names each as it runs it)."""
    return _CASE_MAPPINGS


@dataclass
class KernelCase:
    index: int
    mapping_list: tuple[int, ...]
    logits: torch.Tensor
    mapping: torch.Tensor
    temperature: torch.Tensor
    seeds: torch.Tensor
    positions: torch.Tensor

    @property
    def live(self) -> dict[int, int]:
        """slot -> the live row that holds it."""
        return {s: r for r, s in enumerate(self.mapping_list) if s >= 0}

    @property
    def padded_rows(self) -> list[int]:
        return [r for r, s in enumerate(self.mapping_list) if s < 0]

    def reference(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens [rows] and q [M, V] of the kit's masked kernel (its torch reference)."""
        q = torch.full((M, 1, V), Q_UNTOUCHED, dtype=torch.float32, device=self.logits.device)
        tokens = gumbel_sample_torch(self.logits, SamplingState(self.mapping, self.temperature, self.seeds,
                                                                 self.positions, q), draft_step=0, masked=True)
        return tokens, q[:, 0]


def triton_kernels_run() -> bool:
    """Whether a learner's @triton.jit kernel can run in this session (interpreter, or a GPU)."""
    return backends.HAS_TRITON and (backends.KERNELS_INTERPRETED or backends.HAS_CUDA)


@contextlib.contextmanager
def kit_work_on(device):
    """Inside the block, the kit's own kernels on `device`: on the CPU, the torch backend on one thread.

    The host exercises and the capstone run the kit's kernels around the learner's code. On the
    CPU the torch backend has the kernels' semantics (same tokens, same q, same in-order stores)
    at a fraction of the interpreter's time, and the tensors are tiny (rows x a 31-token
    vocabulary), so intra-op threads only add synchronisation (on a busy 2-core machine, a lot).
    On a GPU the compiled kernels stay as they are. The learner's own kernel is not affected.
    """
    if torch.device(device).type != "cpu":
        yield
        return
    with backends.using_backend("torch"), one_thread_on_cpu(device):
        yield


def kernel_device() -> torch.device:
    """Where a learner's Triton kernel runs: the CPU in the interpreter, else the GPU."""
    return torch.device("cpu") if backends.KERNELS_INTERPRETED else torch.device("cuda")


def kernel_case(index: int, device) -> KernelCase:
    mapping_list = _CASE_MAPPINGS[index]
    g = torch.Generator().manual_seed(50 + index)
    rows = len(mapping_list)
    logits = 3 * torch.randn(rows, V, generator=g)
    temperature = torch.linspace(0.6, 1.0, M)
    temperature[5] = 0.0  # one greedy request: its q is the unscaled logits, its token the argmax
    seeds = torch.randint(0, 2**62, (M,), generator=g)
    positions = torch.randint(0, 5000, (rows,), generator=g)
    mapping = torch.tensor(mapping_list, dtype=torch.int32)
    return KernelCase(index, mapping_list, *(t.to(device) for t in (logits, mapping, temperature, seeds, positions)))


@dataclass
class LaunchOutcome:
    """What one launch produced, and what it touched outside the buffers."""

    tokens: torch.Tensor  # [rows]; TOKEN_UNSET where the learner's code wrote nothing
    q: torch.Tensor  # [M, V] after the launch
    q_guard_rows_written: list[int]  # e.g. [-1]: draft_logits[-1] changed
    reads: list[Access] = field(default_factory=list)  # out-of-bounds loads
    stores: list[Access] = field(default_factory=list)  # out-of-bounds stores (where logged)
    loads_without_other: list[str] = field(default_factory=list)
    reads_seen: str = "exact"  # or "by effect" (compiled kernels)

    def stored_rows(self) -> list[int]:
        """The rows of draft_logits the launch changed, its guard rows included (negative: before the buffer)."""
        own = [s for s in range(M) if not torch.all(self.q[s] == Q_UNTOUCHED)]
        return sorted(own + self.q_guard_rows_written)


def _buffers(case: KernelCase, guard_temp, guard_seed):
    return (Guarded.around("temperature", case.temperature, guard_temp),
            Guarded.around("seeds", case.seeds, guard_seed),
            Guarded.around("draft_logits", torch.full((M, V), Q_UNTOUCHED, device=case.logits.device), GUARD_Q))


def _q_outcome(q: Guarded) -> tuple[torch.Tensor, list[int]]:
    guards = q.guard_rows()
    written = [i for i, row in zip(q.guard_indices(), guards, strict=True) if not torch.all(row == GUARD_Q)]
    return q.view.clone(), written


def launch_triton(kernel, case: KernelCase) -> LaunchOutcome:
    """Launch a learner's @triton.jit kernel: logged in the interpreter, four times when compiled."""
    if backends.KERNELS_INTERPRETED:
        temp, seeds, q = _buffers(case, *GUARD_SETS[0])
        tokens = torch.full((len(case.mapping_list),), TOKEN_UNSET, dtype=torch.int64)
        plain = dict(logits=case.logits, idx_mapping=case.mapping, positions=case.positions, tokens=tokens)
        with recording(plain, [temp, seeds, q]) as log:
            _grid_launch(kernel, case, temp, seeds, q, tokens)
        q_after, written = _q_outcome(q)
        reads = [a for a in log.out_of_bounds if a.kind == "load"]
        stores = [a for a in log.out_of_bounds if a.kind == "store"]
        return LaunchOutcome(tokens, q_after, written, reads, stores, log.loads_without_other)
    # Each guard set is launched twice, in the order A B B A: a result that changes from launch to
    # launch (rows racing to store one address, whichever lands last) is then not taken for a read of
    # the guards, whether it alternates launch by launch or drifts over the four. That still lets a
    # race through when it happens to repeat within each pair, so q is compared without the entries a
    # neighbouring row's lanes past the vocabulary can land on (see _off_the_spill).
    runs: dict[int, list] = {0: [], 1: []}
    for which in (0, 1, 1, 0):
        temp, seeds, q = _buffers(case, *GUARD_SETS[which])
        tokens = torch.full((len(case.mapping_list),), TOKEN_UNSET, dtype=torch.int64, device=case.logits.device)
        _grid_launch(kernel, case, temp, seeds, q, tokens)
        runs[which].append((tokens.cpu(), *_q_outcome(q)))
    (tokens, q_after, written), (tokens_a2, q_a2, _) = runs[0]
    (tokens_b, q_b, _), (tokens_b2, q_b2, _) = runs[1]
    steady = [r for r in range(len(case.mapping_list))
              if int(tokens[r]) == int(tokens_a2[r]) and int(tokens_b[r]) == int(tokens_b2[r])]
    reads = [Access("load", "temperature or seeds", -1, r) for r in steady if int(tokens[r]) != int(tokens_b[r])]
    a, a2, b, b2 = (_off_the_spill(x) for x in (q_after, q_a2, q_b, q_b2))
    if not reads and _same(a, a2) and _same(b, b2) and not _same(a, b):
        reads = [Access("load", "temperature or seeds", -1, None)]
    return LaunchOutcome(tokens, q_after, written, reads, reads_seen="by effect")


def _off_the_spill(q: torch.Tensor) -> torch.Tensor:
    """q [M, V] without each row's first BLOCK_V - V entries: where a store that ignores the vocabulary's
    end lands (row s's lanes past V are row s + 1's first entries), racing that row's own store on a GPU.
    A read of the guards changes a whole row of q (its temperature scales every entry), so the rest shows it."""
    return q[:, BLOCK_V - V:]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise the same values, a NaN matching a NaN (a learner's 0/0 is not a difference)."""
    return torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)


def _grid_launch(kernel, case, temp: Guarded, seeds: Guarded, q: Guarded, tokens) -> None:
    kernel[(len(case.mapping_list),)](case.logits, case.mapping, temp.view, seeds.view, case.positions,
                                      q.view, tokens, V, SALT_DRAFT, BLOCK_V=BLOCK_V)


def launch_torch(fn: Callable, case: KernelCase) -> LaunchOutcome:
    """Call a learner's torch function; its temperature, seeds and q index like pointers."""
    temp, seeds, q = _buffers(case, *GUARD_SETS[0])
    log = AccessLog()
    result = fn(case.logits.clone(), case.mapping.clone(), GuardedTensor.wrap(temp, log),
                GuardedTensor.wrap(seeds, log), case.positions.clone(), GuardedTensor.wrap(q, log), SALT_DRAFT)
    tokens = torch.full((len(case.mapping_list),), TOKEN_UNSET, dtype=torch.int64)
    if result is not None:
        values = torch.as_tensor(result).reshape(-1).to("cpu", torch.int64)
        tokens[: values.numel()] = values[: tokens.numel()]
    q_after, written = _q_outcome(q)
    # A store such as `q[slot] = x` is logged as a store; `q[slot].copy_(x)` first indexes (a
    # 'load'), so q's own guard contents are what tell its stores. Reads matter for the inputs.
    reads = [a for a in log.out_of_bounds if a.kind == "load" and a.buffer != "draft_logits"]
    stores = [a for a in log.out_of_bounds if a.kind == "store"]
    return LaunchOutcome(tokens, q_after, written, reads, stores)


__all__ = ["GUARD_ROWS", "KernelCase", "LaunchOutcome", "kernel_case", "kernel_device", "launch_triton",
           "launch_torch", "triton_kernels_run", "case_mappings", "M", "V", "BLOCK_V", "TOKEN_UNSET", "Q_UNTOUCHED"]
