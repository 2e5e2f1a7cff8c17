"""DFlash's input preparation from a vLLM tree, run in the kit's scenario: what lands in the padded sample rows.

A DFlash drafter samples ``max_num_reqs * k`` rows in one captured launch and maps each sample row to
a request's slot through ``sample_idx_mapping``; the sampling kernel stores each row's q by that slot.
The rows past the live ones are padding, written by the tree's own ``prepare_dflash_inputs`` (its
Triton kernel, and from 0.34.0 a helper kernel that kernel calls). This module loads that function
with what it uses from the tree (:func:`labkit.upstream.loader.load_partial`; nothing of vLLM is
imported) and calls it on two steps of docs/MECHANICS.md's timeline
(:data:`labkit.bench.scenario.MECHANICS_SCHEDULE`): 8 live requests in slots 0-7, then 7 (slot 3
finished), k = 2, ``max_num_reqs`` = 8, with the same persistent buffers, as a drafter keeps them.
After the second step, sample rows 14 and 15 are padding. What they hold decides DFlash's part:

    the fix's   the sampling kernel skips them (docs/VLLM_MAP.md, after the exercises)
    0           slot 0's q is overwritten by a padded row every step (the pad PR #47066 replaced)
    7           untouched: the stale slot the first step left, so slot 7's q is overwritten
    live rows   rows 0-13 must hold the live slots, each k times; if not, the run is not the kit's
                scenario and the part falls back to reading the source (:mod:`labkit.upstream.dflash_reading`)

Under Triton's interpreter on a CPU, compiled on a GPU. The function's parameters have grown with the
releases (19 in 0.24.0, 29 in 0.34.0); each one seen is given a value below, and a parameter the
kit does not know yet stops the run with its name (the source is read instead).
"""

from __future__ import annotations

import ast
import inspect
import types
from dataclasses import dataclass
from pathlib import Path

from labkit.bench.scenario import MECHANICS_SCHEDULE, TIMELINE
from labkit.errors import LabkitInputError
from labkit.upstream.dflash_reading import DFlashReading, read_dflash
from labkit.upstream.loader import load_partial, parse
from labkit.upstream.speculator_reading import SPEC_DECODE

FUNCTION = "prepare_dflash_inputs"
BUFFER = "sample_idx_mapping"
K = TIMELINE.k
MAX_NUM_REQS = TIMELINE.max_num_reqs
QUERY_PER_REQ = K + 1  # the anchor (the bonus token) and k mask tokens; the k masks are sampled
TARGET_TOKENS = K + 1  # each request's verified tokens in the target step
CONTEXT = 20  # each request's length before the step, so positions are neither 0 nor a block boundary
BLOCK = 16
BLOCKS_PER_REQ = 8
MAX_MODEL_LEN = BLOCK * BLOCKS_PER_REQ
MAX_NUM_TOKENS = MAX_NUM_REQS * (TARGET_TOKENS + QUERY_PER_REQ)


@dataclass(frozen=True)
class DFlashRun:
    """One tree's preparation run: where the function is, and what the padded sample rows held."""
    file: str  # relative to the tree
    line: int
    ran: bool
    problem: str | None  # why it did not run, or why its result is not the scenario's
    live: list[int]  # sample_idx_mapping's live rows after the second step
    padded: list[int]  # its padded rows after the second step
    stale: int  # what the padded rows held after the first step (a live slot then)
    backend: str = ""  # "Triton's interpreter" or "compiled on DEVICE"

    @property
    def state(self) -> str | None:
        """The fix's pad, 'pads slot N' (a constant slot), 'keeps stale slot N' (the rows left as the step
        before left them), 'pads N' (another value the kernel skips as it skips the fix's), or None where it
        did not run.
        Rows that differ are judged by the first that holds a slot (it overwrites that slot's q)."""
        if not self.ran:
            return None
        slot = next((v for v in self.padded if v >= 0), None)
        if slot is None:
            return "pads -1" if set(self.padded) == {-1} else f"pads {min(self.padded)}"
        return f"keeps stale slot {slot}" if slot == self.stale else f"pads slot {slot}"

    def to_json(self) -> dict:
        return {"method": f"{FUNCTION} run in the kit's scenario (two steps: slots 0-7, then 0-2 and 4-7; k = {K}, "
                          f"max_num_reqs = {MAX_NUM_REQS})", "file": self.file, "line": self.line, "ran": self.ran,
                "problem": self.problem, "live_rows": self.live, "padded_rows": self.padded,
                "stale_slot_before": self.stale, "backend": self.backend, "state": self.state}


def find_function(tree: Path) -> tuple[str, int] | None:
    """(file, line) of the top-level ``prepare_dflash_inputs`` in a DFlash file of the tree, or None."""
    folder = tree / SPEC_DECODE
    for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
        rel = path.relative_to(tree).as_posix()
        if "/dflash" not in rel:
            continue
        try:
            module = parse(path)
        except LabkitInputError:
            continue
        for node in module.body:
            if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
                return rel, node.lineno
    return None


def _step_inputs(torch, device, slots: tuple[int, ...]) -> dict:
    """The values of every parameter seen in a release's ``prepare_dflash_inputs``, for one step."""
    import numpy  # vLLM's InputBatch holds the scheduled token counts as a numpy array

    r = len(slots)
    i32, i64 = dict(dtype=torch.int32, device=device), dict(dtype=torch.int64, device=device)
    positions = torch.tensor([CONTEXT - TARGET_TOKENS + j for _ in slots for j in range(TARGET_TOKENS)], **i64)
    batch = types.SimpleNamespace(
        num_reqs=r, idx_mapping=torch.tensor(slots, **i32), positions=positions,
        query_start_loc=torch.arange(0, (r + 1) * TARGET_TOKENS, TARGET_TOKENS, **i32),
        num_scheduled_tokens=numpy.full(r, TARGET_TOKENS, dtype=numpy.int32))
    return {
        "input_batch": batch,
        "num_sampled": torch.ones(r, **i32), "num_rejected": torch.zeros(r, **i32),
        "last_sampled": torch.arange(100, 100 + MAX_NUM_REQS, **i64),
        "next_prefill_tokens": torch.arange(200, 200 + MAX_NUM_REQS, **i32),
        "input_temperature": torch.ones(MAX_NUM_REQS, dtype=torch.float32, device=device),
        "input_seeds": torch.arange(MAX_NUM_REQS, **i64),
        "block_table": torch.arange(MAX_NUM_REQS * BLOCKS_PER_REQ, **i32).reshape(MAX_NUM_REQS, BLOCKS_PER_REQ),
        "block_size": BLOCK, "cp_rank": 0, "cp_size": 1, "cp_interleave": 1, "parallel_drafting_token_id": 7,
        "num_query_per_req": QUERY_PER_REQ, "num_speculative_steps": K, "max_num_reqs": MAX_NUM_REQS,
        "max_num_tokens": MAX_NUM_TOKENS, "max_model_len": MAX_MODEL_LEN, "sample_from_anchor": False,
        "num_reqs_override": None,
    }


def _persistent_buffers(torch, device) -> dict:
    """The drafter's buffers that live across steps (the graph reads them at fixed addresses)."""
    i32, i64 = dict(dtype=torch.int32, device=device), dict(dtype=torch.int64, device=device)
    buffers = types.SimpleNamespace(
        input_ids=torch.zeros(MAX_NUM_TOKENS, **i32), positions=torch.zeros(MAX_NUM_TOKENS, **i64),
        query_start_loc=torch.zeros(MAX_NUM_REQS + 1, **i32), seq_lens=torch.zeros(MAX_NUM_REQS, **i32),
        is_padding=torch.zeros(MAX_NUM_TOKENS, dtype=torch.bool, device=device))
    return {
        "input_buffers": buffers,
        "query_slot_mapping": torch.zeros(MAX_NUM_TOKENS, **i64),
        "context_positions": torch.zeros(MAX_NUM_TOKENS, **i64),
        "context_slot_mapping": torch.zeros(MAX_NUM_TOKENS, **i64),
        "sample_indices": torch.zeros(MAX_NUM_REQS * K, **i64),
        "sample_pos": torch.zeros(MAX_NUM_REQS * K, **i64),
        BUFFER: torch.zeros(MAX_NUM_REQS * K, **i32),
        "temperature": torch.zeros(MAX_NUM_REQS, dtype=torch.float32, device=device),
        "seeds": torch.zeros(MAX_NUM_REQS, **i64),
    }


def run_dflash(tree: str | Path, device=None) -> DFlashRun | None:
    """The tree's DFlash preparation in the scenario above; None where the tree has no such function.
    Anything that goes wrong is the run's `problem` (one line), never raised."""
    import torch

    from labkit import backends

    tree = Path(tree)
    found = find_function(tree)
    if found is None:
        return None
    rel, line = found

    def not_run(problem: str, live=(), padded=(), stale=-2) -> DFlashRun:
        return DFlashRun(rel, line, False, problem[:500], list(live), list(padded), stale)

    if not backends.HAS_TRITON:
        return not_run("Triton is not installed here")
    if device is None:
        device = torch.device("cpu") if backends.KERNELS_INTERPRETED else torch.device("cuda")
    device = torch.device(device)
    module = ".".join(Path(rel).with_suffix("").parts)
    try:
        prepare = getattr(load_partial(tree, module, [FUNCTION]), FUNCTION)
    except LabkitInputError as err:
        return not_run(f"{FUNCTION} did not load: {str(err).splitlines()[0]}")
    persistent = _persistent_buffers(torch, device)
    parameters = list(inspect.signature(prepare).parameters.values())
    known = set(persistent) | set(_step_inputs(torch, device, (0,)))
    unknown = [p.name for p in parameters if p.name not in known and p.default is inspect.Parameter.empty]
    if unknown:
        return not_run(f"{FUNCTION} takes {', '.join(unknown)}, which the kit does not know yet (its parameters: "
                       f"{', '.join(p.name for p in parameters)})")
    first, second = MECHANICS_SCHEDULE
    try:
        for slots in (first, second):
            values = {**persistent, **_step_inputs(torch, device, slots)}
            prepare(**{p.name: values[p.name] for p in parameters if p.name in values})
            if slots == first:
                stale = int(persistent[BUFFER][len(second) * K])
    except Exception as err:  # noqa: BLE001 - the tree's code failed in the scenario: said, never raised
        first_line = str(err).splitlines()[0] if str(err) else ""
        return not_run(f"{FUNCTION} failed in the scenario: {type(err).__name__}: {first_line}")
    mapping = persistent[BUFFER].cpu().tolist()
    live, padded = mapping[:len(second) * K], mapping[len(second) * K:]
    expected = [slot for slot in second for _ in range(K)]
    if live != expected:
        return not_run(f"its live sample rows hold {live}, not the live slots {expected}: the kit's scenario does "
                       "not fit this release", live, padded, stale)
    backend = ("Triton's interpreter" if device.type == "cpu" else
               f"compiled on {torch.cuda.get_device_name(device) if device.type == 'cuda' else device}")
    return DFlashRun(rel, line, True, None, live, padded, stale, backend)


def overwrites_a_slot(state: str) -> bool:
    """Whether DFlash's part, in this state, has a padded sample row store its q over a live slot's."""
    return state.startswith(("pads slot", "keeps stale slot"))


@dataclass(frozen=True)
class DFlashAudit:
    """DFlash's part of a tree's verdict: the run decides where it ran, the reading where it did not;
    the reading's stores are the evidence either way (file and line)."""
    reading: DFlashReading
    run: DFlashRun | None

    def part(self) -> dict:
        read = self.reading.part()
        if read["state"] == "absent" and self.run is None:
            return read
        if self.run is None or not self.run.ran:
            why = (f"{FUNCTION} not found in the DFlash files" if self.run is None else self.run.problem)
            return {**read, "how": f"read with Python's ast (not run: {why})"}
        state, evidence = self.run.state, read["evidence"]
        where = f"{self.run.file}:{self.run.line}"
        rows = f"sample rows {len(self.run.live)}-{len(self.run.live) + len(self.run.padded) - 1}"
        if state == "pads -1" or not overwrites_a_slot(state):
            value = state.removeprefix("pads ")
            says = f"DFlash pads {BUFFER} with {value}"
        elif state.startswith("pads slot"):
            slot = int(state.rsplit(" ", 1)[1])
            store = next((s for s in self.reading.pads if s.value == slot), None)
            at = f"{store.file}:{store.line}" if store else f"{FUNCTION}, {where}"
            says = f"DFlash pads {BUFFER} with {slot} ({at}): every padded sample row stores its q over slot {slot}'s"
        else:
            slot = int(state.rsplit(" ", 1)[1])
            says = (f"DFlash leaves {BUFFER}'s padded rows as the step before left them ({FUNCTION}, {where}): "
                    f"they hold slot {slot}, and every padded sample row stores its q over slot {slot}'s")
        return {"state": state, "says": says, "evidence": evidence,
                "how": f"{FUNCTION} run in the kit's scenario under {self.run.backend} ({where}): {rows} held "
                       f"{self.run.padded} after the second step"}

    def lines(self) -> list[str]:
        part = self.part()
        out = [f"DFlash ({part['how']}): {part['says']}"] if "how" in part else [f"DFlash: {part['says']}"]
        out += [f"  {s['file']}:{s['line']}: {s['code']}" for s in part["evidence"]]
        out += [f"  could not read {u}" for u in self.reading.unreadable]
        return out

    def to_json(self) -> dict:
        return {"run": None if self.run is None else self.run.to_json(), "reading": self.reading.to_json(),
                "part": self.part()}


def audit_dflash(tree: str | Path, device=None) -> DFlashAudit:
    """DFlash's part of `tree`: read, and run where the tree has the function and the kit can run it."""
    return DFlashAudit(read_dflash(tree), run_dflash(tree, device))
