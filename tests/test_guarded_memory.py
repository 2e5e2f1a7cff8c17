"""Padded rows read and write nothing outside the buffers: guarded and fenced buffers.

A padded row holds slot -1 (or any negative slot). The fixed kernel must neither store its q nor
load its temperature or seed: ``temperature[-1]`` is the memory just before the buffer.

* Guard values (every backend): temperature, seeds and draft_logits are views into bigger buffers,
  with guard elements before and after. The launch runs twice with different guard values; the
  tokens (padded rows' too) and the live q must not change, and no guard may be written. A padded
  row that loads its temperature unmasked gets a guard as its temperature, and samples with noise
  instead of the noiseless argmax that a masked load (``other=0``: greedy) gives.
* Fences (interpreter): a seed loaded unmasked changes no output (its temperature is 0, so no
  noise is drawn), so the test makes the read itself fail: the slot-indexed buffers start right
  after an unreadable page, and a read of slot -1 kills the process -- in a forked child, whose
  death fails the test. A positive control (the unmasked kernel) shows that the fence does fail.
* Read logs (torch backend): the buffers record every index the reference reads them at, and no
  index may be negative (Python indexing would silently wrap -1 to the last slot).
"""

from __future__ import annotations

import ctypes
import faulthandler
import mmap
import os
import signal
import warnings

import pytest
import torch
from kernel_cases import DEVICE, KERNEL_BACKEND, Q_TOL, scaled_rows

from labkit.kernels import SamplingState, WriteTrace, gumbel_sample

M, K, V, G = 8, 2, 50, 4
STEP = 1
# Live rows 0..3 (slot 0 among them: a `slot > 0` mask would skip it), padded rows 4..7.
MAPPING = [0, 5, 2, 7, -1, -1, -2, -1]
LIVE = [r for r, s in enumerate(MAPPING) if s >= 0]
PADDED = [r for r, s in enumerate(MAPPING) if s < 0]
BACKENDS = sorted({KERNEL_BACKEND, "torch"})
Q_FILL = 5.0


def _inputs():
    g = torch.Generator().manual_seed(21)
    # Flat logits: Gumbel noise moves the argmax, so a padded row that draws noise is seen to.
    logits = 0.3 * torch.randn(len(MAPPING), V, generator=g)
    temperature = 0.5 + torch.rand(M, generator=g)
    seeds = torch.randint(0, 2**62, (M,), generator=g)
    positions = torch.randint(0, 5000, (len(MAPPING),), generator=g)
    mapping = torch.tensor(MAPPING, dtype=torch.int32)
    return tuple(t.to(DEVICE) for t in (logits, mapping, temperature, seeds, positions))


def _guarded(values: torch.Tensor, guard) -> tuple[torch.Tensor, torch.Tensor]:
    """(store, view): `values` as the middle of a buffer with G guard elements on each side."""
    store = torch.full((values.shape[0] + 2 * G, *values.shape[1:]), guard, dtype=values.dtype, device=DEVICE)
    store[G:-G] = values
    return store, store[G:-G]


def _run_with_guards(backend, early_exit, guard_temp, guard_seed, guard_q):
    logits, mapping, temperature, seeds, positions = _inputs()
    temp_store, temp_view = _guarded(temperature, guard_temp)
    seed_store, seed_view = _guarded(seeds, guard_seed)
    # q: guard slots before and after, and a guard column on each side of the vocabulary.
    q_store = torch.full((M + 2 * G, K, V + 2), guard_q, device=DEVICE)
    q_store[G:-G, :, 1:-1] = Q_FILL
    q_view = q_store[G:-G, :, 1:-1]
    trace = WriteTrace.empty(M, K, DEVICE)
    tokens = gumbel_sample(logits, SamplingState(mapping, temp_view, seed_view, positions, q_view), draft_step=STEP,
                           early_exit=early_exit, trace=trace, backend=backend)
    return dict(tokens=tokens.cpu(), q=q_view.cpu().clone(), writes=trace.writes.cpu(),
                temp_store=temp_store.cpu(), seed_store=seed_store.cpu(), q_store=q_store.cpu(),
                guards=(guard_temp, guard_seed, guard_q))


def _assert_guards_untouched(run):
    guard_temp, guard_seed, guard_q = run["guards"]
    for name, store, guard in (("temperature", run["temp_store"], guard_temp),
                               ("seeds", run["seed_store"], guard_seed)):
        assert bool((store[:G] == guard).all() and (store[-G:] == guard).all()), f"a guard of {name} was written"
    q = run["q_store"]
    inside = torch.zeros(q.shape, dtype=torch.bool)
    inside[G:-G, :, 1:-1] = True
    assert bool((q[~inside] == guard_q).all()), "a store landed outside draft_logits (a padded row's q?)"


@pytest.mark.parametrize("early_exit", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_padded_rows_read_no_guard_and_write_none(backend, early_exit):
    a = _run_with_guards(backend, early_exit, 0.37, 11, -555.0)
    b = _run_with_guards(backend, early_exit, 2.9, 987_654_321, 777.0)
    for run in (a, b):
        _assert_guards_untouched(run)
    assert torch.equal(a["tokens"], b["tokens"]), "a token depends on a guard value: a row read outside the buffers"
    assert torch.equal(a["q"], b["q"])
    logits, mapping, temperature, _, _ = _inputs()
    # Padded rows: masked loads give temperature 0 (the noiseless argmax); early exit gives token 0.
    expected = torch.zeros(len(PADDED), dtype=torch.int64) if early_exit else logits[PADDED].argmax(dim=1).cpu()
    assert torch.equal(a["tokens"][PADDED], expected), "a padded row sampled with a temperature it should not load"
    # Live rows: each stored its own q once, at its own slot; nothing else in draft_logits changed.
    for row, want in zip(LIVE, scaled_rows(logits, mapping, temperature, LIVE), strict=True):
        slot = MAPPING[row]
        torch.testing.assert_close(a["q"][slot, STEP], want, **Q_TOL)
        assert int(a["writes"][slot, STEP]) == 1
    untouched = torch.ones(M, K, dtype=torch.bool)
    untouched[[MAPPING[r] for r in LIVE], STEP] = False
    assert bool((a["q"][untouched] == Q_FILL).all())


# -- fences: reads before the buffers crash (interpreter) -----------------------------------------

PAGE = mmap.PAGESIZE
PROT_NONE = 0


def _fenced(values: torch.Tensor):
    """A CPU copy of 1-D `values` that starts right after a page the process may not read."""
    nbytes = values.numel() * values.element_size()
    region = mmap.mmap(-1, PAGE * (1 + -(-nbytes // PAGE)))
    tensor = torch.frombuffer(region, dtype=values.dtype, offset=PAGE, count=values.numel())
    tensor.copy_(values)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    assert libc.mprotect(address, PAGE, PROT_NONE) == 0, os.strerror(ctypes.get_errno())
    return region, tensor


def _exit_status_in_child(fn) -> int:
    """Run fn() in a forked child; 0 if it returned, the signal number if a signal killed it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12 warns about fork with threads
        pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            faulthandler.disable()  # the expected crash of the control needs no traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            torch.set_num_threads(1)
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


@pytest.mark.skipif(KERNEL_BACKEND != "interpreter" or not hasattr(os, "fork"),
                    reason="fences guard raw pointer reads: the interpreter's (the GPU has compute-sanitizer)")
def test_padded_rows_load_nothing_before_the_slot_buffers():
    logits, mapping, temperature, seeds, positions = _inputs()
    fences = [_fenced(temperature), _fenced(seeds)]
    temp_fenced, seeds_fenced = (t for _, t in fences)

    def launch(**kw):
        return lambda: gumbel_sample(logits, SamplingState(mapping, temp_fenced, seeds_fenced, positions,
                                     torch.zeros(M, K, V)), draft_step=STEP, backend="interpreter", **kw)

    assert _exit_status_in_child(launch(masked=False, validate=False)) == signal.SIGSEGV, (
        "control: reading temperature[-1] before a fenced buffer must crash, or this test proves nothing")
    for early_exit in (False, True):
        status = _exit_status_in_child(launch(early_exit=early_exit))
        assert status == 0, (f"early_exit={early_exit}: the launch died (signal or exit {status}): a padded row "
                             "loaded temperature or seeds at a negative slot")


# -- read logs: no negative index (torch backend) ------------------------------------------------

class _ReadLog(torch.Tensor):
    """A tensor that records the index of every `t[index]` read of it."""

    reads: list

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.__getitem__ and isinstance(args[0], _ReadLog):
            args[0].reads.append(args[1])
        out = super().__torch_function__(func, types, args, kwargs or {})
        return out.as_subclass(torch.Tensor) if isinstance(out, _ReadLog) else out


def _logged(t: torch.Tensor) -> _ReadLog:
    logged = t.as_subclass(_ReadLog)
    logged.reads = []
    return logged


def _indices(index) -> list[int]:
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    for part in parts:
        if isinstance(part, torch.Tensor) and not part.is_floating_point() and part.dtype != torch.bool:
            out += part.flatten().tolist()
        elif isinstance(part, int):
            out.append(part)
    return out


@pytest.mark.parametrize("early_exit", [False, True])
def test_the_torch_reference_reads_no_slot_at_a_negative_index(early_exit):
    logits, mapping, temperature, seeds, positions = _inputs()
    temp_log, seed_log = _logged(temperature), _logged(seeds)
    gumbel_sample(logits, SamplingState(mapping, temp_log, seed_log, positions, torch.zeros(M, K, V, device=DEVICE)),
                  draft_step=STEP, early_exit=early_exit, backend="torch")
    for name, log in (("temperature", temp_log), ("seeds", seed_log)):
        read = [i for index in log.reads for i in _indices(index)]
        assert read, f"the reference reads {name} by indexing (or this test sees nothing)"
        assert min(read) >= 0 and max(read) < M, f"{name} was read at {sorted(set(read))}: -1 wraps to the last slot"
