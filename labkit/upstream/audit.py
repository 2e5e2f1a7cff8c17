"""A sampling kernel in the kit's stale-padding scenario, and the verdict: does it mask padded rows?

The scenario is docs/MECHANICS.md's step t+1 (:data:`labkit.bench.scenario.MECHANICS_BATCH`): 7 live
rows owning slots ``0 1 2 4 5 6 7``, run as a graph of 8 rows, k = 2 draft steps, a toy vocabulary
of 31 tokens (one block of any kernel: the interpreter stays fast). Temperature, seeds and q
(``draft_logits``) sit inside guarded allocations (:mod:`labkit.proofs.guarded`). Two cases:

    stale    the padded row holds a live slot, as a batch that shrank leaves it (before the host
             fill). Audited with the kit's padding-invariance audit (:func:`labkit.proofs.audit.audit_step`):
             each live record is compared with an eager run of exactly the live rows, and the audit
             names the row that wrote a corrupted one.
    filled   the padded row holds what the host fill writes. The launch is compared with the eager
             run, and every access outside a buffer is logged: exactly under Triton's interpreter
             (each load and store, with its row, before it happens), by the guard rows' contents
             and by the padded row's result under two guard contents when compiled.

Verdicts: "kernel masks padded rows" (the filled case touches nothing outside the buffers and
changes no live record) and "the kernel alone, given a stale slot, overwrites a live q" (the stale
case changes a live record).
The second is expected to be yes for every kernel, masked or not: a stale slot is >= 0, so no
mask can tell it from a live one; only the host fill removes it.

A kernel enters as a :class:`Sampler`: vLLM's (:func:`vllm_sampler`) or the kit's own
(:func:`kit_sampler`), which the tests use to derive what each verdict must be.
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass, field
from typing import Callable

import torch

from labkit import backends
from labkit.bench.scenario import MECHANICS_BATCH
from labkit.proofs.audit import DEFAULT_POISONS, Buffer, audit_step
from labkit.proofs.guarded import (
    GUARD_Q,
    GUARD_SETS,
    Q_UNTOUCHED,
    Access,
    Guarded,
    WildAccess,
    recording,
    wild_access_in,
)

M = 8  # request-state slots (max_num_reqs)
K = 2  # draft steps: columns of q
V = 31  # toy vocabulary
LIVE_SLOTS = tuple(MECHANICS_BATCH)  # live rows 0..6 -> these slots
PADDED_ROWS = 8


# -- kernels under audit ------------------------------------------------------------------------

@dataclass(frozen=True)
class Sampler:
    """A sampling launch: call(logits [rows, V], mapping [rows], temperature [M], seeds [M],
    positions [rows], q [M, K, V], col) -> tokens [rows], storing q[slot, col, :] by slot.

    `module`: where the call comes from. Every kernel the call launches is watched, whichever
    function of whichever module launches it (see :func:`_watched`)."""

    name: str
    call: Callable
    module: types.ModuleType
    q_is: str
    row_axis: int = 0  # the grid axis whose program id is the batch row (vLLM's grid: (row, block))


def vllm_sampler(module, api) -> Sampler:
    """vLLM's gumbel_sample from a loaded kernel file (:mod:`labkit.upstream.loader`), called as `api`
    (:func:`labkit.upstream.kernel_api.plan`) says."""
    from labkit.upstream.kernel_api import sample

    def call(logits, mapping, temperature, seeds, positions, q, col):
        return sample(module, api, logits=logits, mapping=mapping, temperature=temperature, seeds=seeds,
                      positions=positions, q=q, col=col)

    return Sampler(f"vLLM gumbel_sample ({api.name})", call, module, api.q_is)


def kit_sampler(masked: bool) -> Sampler:
    """The kit's own Gumbel kernel, before (masked=False) or after (masked=True) the fix."""
    from labkit.kernels import SamplingState
    from labkit.kernels import gumbel as kit

    def call(logits, mapping, temperature, seeds, positions, q, col):
        state = SamplingState(mapping, temperature, seeds, positions, q)
        return kit.gumbel_sample(logits.contiguous(), state, draft_step=col, masked=masked, validate=False)

    return Sampler(f"the kit's gumbel_sample ({'masked' if masked else 'unmasked'})", call, kit,
                   "the draft logits after temperature", row_axis=1)


# -- watching the launches ----------------------------------------------------------------------

class _Watch:
    """Every launch of a sampler's kernels under the interpreter, logged against guarded buffers."""

    def __init__(self, guarded: list[Guarded], row_axis: int = 0):
        self.guarded = guarded
        self.row_axis = row_axis
        self.accesses: list[Access] = []
        self.wild: str | None = None

    def plain_tensors(self, fn, args, kwargs) -> dict[str, torch.Tensor]:
        storages = {g.storage.untyped_storage().data_ptr() for g in self.guarded}
        named = list(zip(getattr(fn, "arg_names", ()), args, strict=False)) + list(kwargs.items())
        # Each tensor argument counts as its whole storage: a strided view (one draft step's logits)
        # reaches past its first numel() elements.
        return {name: torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()) for name, t in named
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in storages}

    def launch(self, original):
        """`original` (an interpreted kernel's run), each launch logged against the guarded buffers."""
        watch = self

        def run(fn, *args, **kwargs):
            with recording(watch.plain_tensors(fn, args, kwargs), watch.guarded) as log:
                out = original(fn, *args, **kwargs)
            for a in log.out_of_bounds:
                if watch.row_axis != 0:  # the log's row is program id 0, not the row here
                    a = Access(a.kind, a.buffer, a.index, None)
                if a not in watch.accesses:
                    watch.accesses.append(a)
            return out

        return run


@contextlib.contextmanager
def _watched(sampler: Sampler, guarded: list[Guarded]):
    """Every kernel launched inside, watched: whichever function launches it (a wrapper, a helper of
    another file), not only the kernels the sampler names. Launches go through the interpreter's one
    `run`, which is replaced for the duration."""
    watch = _Watch(guarded, sampler.row_axis)
    if not backends.KERNELS_INTERPRETED:
        yield watch  # compiled: no hook; the guard rows and the results tell
        return
    from triton.runtime.interpreter import InterpretedFunction

    original = InterpretedFunction.run
    InterpretedFunction.run = watch.launch(original)
    try:
        yield watch
    finally:
        InterpretedFunction.run = original


# -- the scenario -------------------------------------------------------------------------------

@dataclass
class Inputs:
    logits: torch.Tensor  # [PADDED_ROWS, K, V], by row and draft step
    positions: torch.Tensor  # [PADDED_ROWS] int64
    temperature: torch.Tensor  # [M]
    seeds: torch.Tensor  # [M] int64


def scenario_inputs(device) -> Inputs:
    g = torch.Generator().manual_seed(47066)
    logits = 3 * torch.randn(PADDED_ROWS, K, V, generator=g)
    positions = torch.randint(0, 5000, (PADDED_ROWS,), generator=g)
    temperature = torch.linspace(0.6, 1.0, M)
    seeds = torch.randint(0, 2**62, (M,), generator=g)
    return Inputs(*(t.to(device) for t in (logits, positions, temperature, seeds)))


@dataclass
class Buffers:
    temperature: Guarded
    seeds: Guarded
    q: Guarded  # [M, K, V] inside guard rows
    mapping: torch.Tensor  # [PADDED_ROWS] int32
    tokens: torch.Tensor  # [PADDED_ROWS, K] int64


def make_buffers(inputs: Inputs, mapping: list[int], guard_temp=GUARD_SETS[0][0], guard_seed=GUARD_SETS[0][1]):
    device = inputs.logits.device
    q = torch.full((M, K, V), Q_UNTOUCHED, device=device)
    return Buffers(Guarded.around("temperature", inputs.temperature, guard_temp),
                   Guarded.around("seeds", inputs.seeds, guard_seed),
                   Guarded.around("draft_logits", q, GUARD_Q),
                   torch.tensor(mapping + [0] * (PADDED_ROWS - len(mapping)), dtype=torch.int32, device=device),
                   torch.zeros(PADDED_ROWS, K, dtype=torch.int64, device=device))


def run_draft_steps(sampler: Sampler, inputs: Inputs, buf: Buffers, rows: int) -> None:
    """k draft steps over the first `rows` rows, as the drafter runs them: step i stores q[:, i]."""
    for col in range(K):
        tokens = sampler.call(inputs.logits[:rows, col], buf.mapping[:rows], buf.temperature.view,
                              buf.seeds.view, inputs.positions[:rows] + col, buf.q.view, col)
        buf.tokens[:rows, col] = tokens.reshape(-1)[:rows].to(torch.int64)


# -- the two cases ------------------------------------------------------------------------------

@dataclass
class CaseResult:
    name: str
    mapping: list[int]  # row -> slot of the padded launch
    live_records_changed: list[str]  # e.g. "draft_logits[7, 1, :] (slot 7, live row 6)"
    writers: list[dict]  # which row wrote which live slot's record, for the changed ones
    out_of_bounds: list[dict]  # {"kind", "buffer", "index", "row"}
    reads_seen: str  # "exact" (interpreter) or "by effect" (compiled)
    sentences: list[str] = field(default_factory=list)
    live_records_unstored: list[str] = field(default_factory=list)  # a live row's q the launch never stored

    def shared_slots(self) -> dict[int, list[int]]:
        """Slots that two or more rows of the padded launch name: each of those rows stores q there
        unless the kernel masks it (a live row's slot named again by a padded row is the bug)."""
        rows: dict[int, list[int]] = {}
        for row, slot in enumerate(self.mapping):
            if slot >= 0:
                rows.setdefault(slot, []).append(row)
        return {slot: r for slot, r in rows.items() if len(r) > 1}

    def to_json(self) -> dict:
        return {**self.__dict__, "rows_naming_each_shared_slot": {str(k): v for k, v in self.shared_slots().items()}}


def _access_json(a: Access) -> dict:
    return {"kind": a.kind, "buffer": a.buffer, "index": a.index, "row": a.row}


def _q_guard_writes(q: Guarded) -> list[int]:
    return [i for i, row in zip(q.guard_indices(), q.guard_rows(), strict=True) if not torch.all(row == GUARD_Q)]


def stale_case(sampler: Sampler, inputs: Inputs, poisons=DEFAULT_POISONS) -> CaseResult:
    """The padded row holds a live slot: the kit's padding-invariance audit of the k draft steps."""
    n = len(LIVE_SLOTS)
    buf = make_buffers(inputs, list(LIVE_SLOTS))
    logits = inputs.logits.clone()
    positions = inputs.positions.clone()
    step_inputs = Inputs(logits, positions, inputs.temperature, inputs.seeds)
    buffers = [Buffer("logits", logits, "row", range(n)),
               Buffer("idx_mapping", buf.mapping, "row", range(n), "mapping", values=(0, M)),
               Buffer("positions", positions, "row", range(n), values=(0, 5000)),
               Buffer("temperature", buf.temperature.view, "slot", LIVE_SLOTS, values=(0.3, 1.5)),
               Buffer("seeds", buf.seeds.view, "slot", LIVE_SLOTS, values=(0, 2**31)),
               Buffer("draft_logits", buf.q.view, "slot", LIVE_SLOTS, "output"),
               Buffer("draft_tokens", buf.tokens, "row", range(n), "output", values=(0, V))]
    mappings_seen: list[list[int]] = []

    def step(rows):
        if rows == PADDED_ROWS:
            mappings_seen.append(buf.mapping.tolist())
        run_draft_steps(sampler, step_inputs, buf, rows)

    with _watched(sampler, [buf.temperature, buf.seeds, buf.q]) as watch:
        report = audit_step(step, buffers, live_rows=n, padded_rows=PADDED_ROWS, poisons=poisons,
                            name=sampler.name)
    changed = [f"{f.location} (slot {f.index[0]}, live row {f.owner})" for f in report.findings
               if f.buffer == "draft_logits"]
    writers = [{"record": f.location, "slot": f.index[0], "owner_row": f.owner, "writer_row": f.writer,
                "writer": f.writer_text, "found_by": f.how, "poisons": [str(p) for p in f.poisons]}
               for f in report.findings]
    return CaseResult("stale", mappings_seen[0] if mappings_seen else [], sorted(set(changed), key=changed.index),
                      writers, [_access_json(a) for a in watch.accesses],
                      "exact" if backends.KERNELS_INTERPRETED else "by effect",
                      [f"{f.sentence()} [poison {', '.join(str(p) for p in f.poisons)}]" for f in report.findings])


def _launch(sampler, inputs, mapping, rows, guard_set):
    buf = make_buffers(inputs, mapping, *guard_set)
    with _watched(sampler, [buf.temperature, buf.seeds, buf.q]) as watch:
        try:
            run_draft_steps(sampler, inputs, buf, rows)
        except Exception as err:  # an access outside every buffer, refused by the interpreter's hook
            wild = wild_access_in(err)
            if wild is None:
                raise
            watch.wild = str(wild)
    return buf, watch


def filled_case(sampler: Sampler, inputs: Inputs) -> CaseResult:
    """The padded row as the host fill leaves it: what the launch touches outside the buffers, and what it changes."""
    n = len(LIVE_SLOTS)
    mapping = list(LIVE_SLOTS) + [-1] * (PADDED_ROWS - n)
    reference, _ = _launch(sampler, inputs, list(LIVE_SLOTS), n, GUARD_SETS[0])
    padded, watch = _launch(sampler, inputs, mapping, PADDED_ROWS, GUARD_SETS[0])
    accesses = [_access_json(a) for a in watch.accesses]
    if watch.wild:
        accesses.append({"kind": "access", "buffer": "outside every buffer", "index": None, "row": None,
                         "detail": watch.wild})
    accesses += [{"kind": "store", "buffer": "draft_logits", "index": i, "row": None, "seen": "guard row changed"}
                 for i in _q_guard_writes(padded.q) if not any(a["kind"] == "store" and a["buffer"] ==
                                                              "draft_logits" and a["index"] == i for a in accesses)]
    reads_seen = "exact"
    if not backends.KERNELS_INTERPRETED:
        reads_seen = "by effect"
        other, _ = _launch(sampler, inputs, mapping, PADDED_ROWS, GUARD_SETS[1])
        for r in range(n, PADDED_ROWS):
            if not torch.equal(other.tokens[r], padded.tokens[r]):
                accesses.append({"kind": "load", "buffer": "temperature or seeds", "index": -1, "row": r,
                                 "seen": "the row's token changed with the guard contents alone"})
    changed, unstored = [], []
    for row, slot in enumerate(LIVE_SLOTS):
        for col in range(K):
            if not torch.equal(padded.q.view[slot, col], reference.q.view[slot, col]):
                changed.append(f"draft_logits[{slot}, {col}, :] (slot {slot}, live row {row})")
            # The eager run is the same kernel: a mask that also skips a live row skips it there too. A
            # live row's q must be stored, whatever the kernel.
            if torch.all(padded.q.view[slot, col] == Q_UNTOUCHED):
                unstored.append(f"draft_logits[{slot}, {col}, :] (slot {slot}, live row {row})")
        if not torch.equal(padded.tokens[row], reference.tokens[row]):
            changed.append(f"draft_tokens[{row}] (live row {row})")
    sentences = [_access_sentence(a) for a in accesses] + [f"{c} differs from the eager run" for c in changed] + [
        f"{c} was never stored: the kernel skips a live row" for c in unstored]
    return CaseResult("filled", mapping, changed, [], accesses, reads_seen, sentences, unstored)


def _access_sentence(a: dict) -> str:
    who = f"padded row {a['row']}" if a.get("row") is not None else "a padded row"
    if a["buffer"] == "outside every buffer":
        return f"{who} accessed memory outside every buffer of the launch ({a.get('detail')})"
    verb = "read" if a["kind"] == "load" else "wrote"
    how = f" ({a['seen']})" if a.get("seen") else ""
    return f"{who} {verb} {a['buffer']}[{a['index']}], outside the buffer{how}"


# -- the verdict --------------------------------------------------------------------------------

@dataclass
class KernelVerdict:
    sampler: str
    q_is: str
    backend: str
    stale: CaseResult
    filled: CaseResult

    @property
    def masks_padded_rows(self) -> bool:
        return not self.filled.out_of_bounds and not self.filled.live_records_changed and \
            not self.filled.live_records_unstored

    @property
    def skips_live_rows(self) -> bool:
        return bool(self.filled.live_records_unstored)

    @property
    def stale_slots_corrupt(self) -> bool:
        return bool(self.stale.live_records_changed)

    def to_json(self) -> dict:
        return {"sampler": self.sampler, "q_is": self.q_is, "backend": self.backend,
                "scenario": {"max_num_reqs": M, "k": K, "vocab": V, "live_slots": list(LIVE_SLOTS),
                             "padded_rows": PADDED_ROWS},
                "kernel_masks_padded_rows": self.masks_padded_rows,
                "stale_slots_still_corrupt": self.stale_slots_corrupt,
                "stale": self.stale.to_json(), "filled": self.filled.to_json()}

    def lines(self) -> list[str]:
        yes = {True: "yes", False: "no"}
        out = [f"kernel: {self.sampler}; q holds {self.q_is}; run {self.backend}",
               f"scenario: live rows 0-{len(LIVE_SLOTS) - 1} own slots {' '.join(map(str, LIVE_SLOTS))}, run as "
               f"{PADDED_ROWS} rows, k = {K}, vocabulary {V}",
               f"padded row holding a live slot (mapping {' '.join(map(str, self.stale.mapping))}):"]
        out += [f"  slot {slot} is named by rows {', '.join(map(str, rows))}: each of them stores q there"
                for slot, rows in self.stale.shared_slots().items()]
        out += [f"  {s}" for s in self.stale.sentences] or ["  no live record changed"]
        out += [f"  outside the buffers: {_access_sentence(a)}" for a in self.stale.out_of_bounds]
        out.append(f"padded row holding -1 (mapping {' '.join(map(str, self.filled.mapping))}), reads seen "
                   f"{self.filled.reads_seen}:")
        out += [f"  {s}" for s in self.filled.sentences] or ["  nothing outside the buffers; no live record changed"]
        out += [f"kernel masks padded rows: {yes[self.masks_padded_rows]}",
                f"the kernel alone, given a stale slot, overwrites a live q: {yes[self.stale_slots_corrupt]}"
                + (" (true of every kernel that stores by slot, fixed ones too: a stale slot is >= 0, so no "
                   "mask sees it; the host fill with -1 is what removes it)" if self.stale_slots_corrupt else "")]
        return out


def audit_sampler(sampler: Sampler, device=None) -> KernelVerdict:
    """Both cases for one kernel, on the kit's backend: the CPU interpreter, or compiled on the GPU."""
    if device is None:
        device = torch.device("cpu") if backends.KERNELS_INTERPRETED else torch.device("cuda")
    device = torch.device(device)
    inputs = scenario_inputs(device)
    if backends.KERNELS_INTERPRETED:
        backend = "in Triton's CPU interpreter"
    else:
        backend = f"compiled on {torch.cuda.get_device_name(device) if device.type == 'cuda' else device}"
    return KernelVerdict(sampler.name, sampler.q_is, backend, stale_case(sampler, inputs), filled_case(sampler, inputs))


__all__ = ["Sampler", "KernelVerdict", "CaseResult", "audit_sampler", "kit_sampler", "vllm_sampler", "WildAccess"]
