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
import contextlib
import copy as _copy
import inspect
import types
from dataclasses import dataclass
from pathlib import Path

from labkit.bench.scenario import MECHANICS_SCHEDULE, TIMELINE
from labkit.errors import LabkitInputError
from labkit.upstream.dflash_reading import DFlashReading, read_dflash
from labkit.upstream.interpreter_index import scalar_index
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


@dataclass(frozen=True)
class HostWrite:
    """A write of the drafter's sample mapping by host code around the preparation, in a form the kit runs:
    a constant into ``[lower:upper]`` (None: that end of the buffer), before or after the preparation."""
    file: str
    line: int
    code: str
    when: str  # "before" or "after" the preparation, or "before the first step" (__init__, capture)
    lower: object  # an ast expression, or None
    upper: object
    value: int | None

    def apply(self, buffer, num_reqs: int) -> None:
        lo, hi = (None if e is None else _evaluate(e, num_reqs) for e in (self.lower, self.upper))
        buffer[lo:hi] = self.value

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "code": self.code, "when": self.when, "value": self.value}


class _NotEvaluable(Exception):
    pass


_SELF = {"num_speculative_steps": K, "max_num_reqs": MAX_NUM_REQS, "num_query_per_req": QUERY_PER_REQ}


def _evaluate(node, num_reqs: int, local: dict | None = None) -> int:
    """A slice bound of the scenario's step: numbers, the step's request count and the drafter's sizes."""
    local = {"num_reqs": num_reqs, **(local or {})}
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in local:
        value = local[node.id]
        return _evaluate(value, num_reqs, {k: v for k, v in local.items() if k != node.id}) \
            if isinstance(value, ast.AST) else value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == "self" and node.attr in _SELF:
            return _SELF[node.attr]
        if node.value.id == "input_batch" and node.attr == "num_reqs":
            return num_reqs
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, num_reqs, local)
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__}
        if type(node.op) in ops:
            return ops[type(node.op)](_evaluate(node.left, num_reqs, local), _evaluate(node.right, num_reqs, local))
    raise _NotEvaluable(ast.unparse(node))


def _constant_write(stmt, attr: str):
    """(lower, upper, value) of ``self.<attr>[lo:hi].fill_(C)`` / ``.zero_()`` / ``self.<attr>[lo:hi] = C`` (the
    whole buffer without a slice); None for any other form."""
    target, value = None, None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        call = stmt.value
        if call.func.attr == "zero_" and not call.args:
            target, value = call.func.value, 0
        elif call.func.attr == "fill_" and len(call.args) == 1 and not call.keywords:
            target, value = call.func.value, _int(call.args[0])
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript):
        target, value = stmt.targets[0], _int(stmt.value)
    if target is None or value is None:
        return None
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice) and target.slice.step is None:
        lower, upper, target = target.slice.lower, target.slice.upper, target.value
    else:
        lower = upper = None
    if isinstance(target, ast.Attribute) and target.attr == attr and isinstance(target.value, ast.Name) \
            and target.value.id == "self":
        return lower, upper, value
    return None


def _int(node) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        return -v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


@dataclass
class HostProgram:
    """The host writes of the sample mapping around the preparation: those the kit runs with it, and those it
    cannot place (each a problem: the part is then not judged)."""
    writes: list[HostWrite]
    problems: list[str]


def host_program(tree: Path) -> HostProgram:
    """Every write of ``self.sample_idx_mapping`` by the classes that call the preparation, read with ast."""
    from labkit.upstream.host_step_run import _functions, _statements, writes_of

    folder = tree / SPEC_DECODE
    writes, problems = [], []
    callers = []  # (file, class) of each class that calls the preparation
    unreadable = []
    for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
        rel = path.relative_to(tree).as_posix()
        try:
            module = parse(path)
        except LabkitInputError as err:
            unreadable.append(str(err).splitlines()[0])
            continue
        callers += [(rel, n) for n in module.body if isinstance(n, ast.ClassDef)
                    and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == FUNCTION
                            for c in ast.walk(n))]
    if callers and unreadable:  # a file the kit cannot read may hold a base class or a write of the buffer
        problems += [f"could not read {u}" for u in unreadable]
    # and the classes they inherit from, among the speculators': their methods run on the same buffer
    for rel, cls in callers + _bases(tree, [c for _, c in callers]):
        for fn, qual in _functions(ast.Module(body=[cls], type_ignores=[])):
            calls = [c.lineno for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                     and c.func.id == FUNCTION]
            local = {}
            for stmt, depth in _statements(fn):
                if depth == 0 and isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                        isinstance(stmt.targets[0], ast.Name):
                    local[stmt.targets[0].id] = stmt.value
            for stmt, depth, what in writes_of(fn, BUFFER):
                code = ast.unparse(stmt).splitlines()[0][:160]
                if what == f"hands it to {FUNCTION}":
                    continue
                method = qual.rsplit(".", 1)[-1]
                form = _constant_write(stmt, BUFFER)
                if method in ("__init__", "capture") and (what == "binds a new tensor to it" or (
                        form is not None and form[:2] == (None, None))):
                    writes.append(HostWrite(rel, stmt.lineno, code, "before the first step", None, None, None))
                    continue
                if calls and depth == 0 and form is not None:
                    try:
                        for bound in form[:2]:
                            if bound is not None:
                                _evaluate(bound, len(MECHANICS_SCHEDULE[1]), local)
                    except _NotEvaluable as err:
                        problems.append(f"{rel}:{stmt.lineno} ({qual}) writes {BUFFER} from {err} on, which the "
                                        f"kit cannot evaluate in its scenario ({code})")
                        continue
                    when = "before" if stmt.lineno < calls[0] else "after"
                    lower, upper = (_bind(b, local) for b in form[:2])
                    writes.append(HostWrite(rel, stmt.lineno, code, when, lower, upper, form[2]))
                    continue
                problems.append(f"{rel}:{stmt.lineno} ({qual}) {what.replace('it', BUFFER, 1)} ({code}): the kit "
                                "cannot place that write against the preparation and the replay")
    return HostProgram(writes, problems)


def _bases(tree: Path, classes: list) -> list:
    """(file, class) of every class the given ones inherit from, through the speculators' files."""
    from labkit.upstream.host_step_run import _classes

    known = _classes(tree, SPEC_DECODE)
    found, todo, seen = [], [c for c in classes], {c.name for c in classes}
    while todo:
        cls = todo.pop()
        for b in cls.bases:
            name = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
            if name and name in known and name not in seen:
                seen.add(name)
                found.append(known[name])
                todo.append(known[name][1])
    return found


def _bind(node, local: dict):
    """`node` with the local names it uses replaced by what they were bound to (for evaluating later)."""
    if node is None:
        return None

    class Bind(ast.NodeTransformer):
        def visit_Name(self, n):
            return Bind().visit(_copy.deepcopy(local[n.id])) if n.id in local and n.id != "num_reqs" else n

    return Bind().visit(_copy.deepcopy(node))


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


def run_dflash(tree: str | Path, device=None, program: HostProgram | None = None) -> DFlashRun | None:
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
    stale = -2
    # Triton's interpreter before 3.7 cannot take a scalar as a loop bound under NumPy 2: given 3.7's way
    try:
        with scalar_index() if device.type == "cpu" else contextlib.nullcontext():
            for slots in (first, second):
                values = {**persistent, **_step_inputs(torch, device, slots)}
                for w in program.writes if program else ():
                    if w.when == "before":
                        w.apply(persistent[BUFFER], len(slots))
                prepare(**{p.name: values[p.name] for p in parameters if p.name in values})
                for w in program.writes if program else ():
                    if w.when == "after":
                        w.apply(persistent[BUFFER], len(slots))
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
    program: HostProgram | None = None

    def part(self) -> dict:
        read = self.reading.part()
        if read["state"] == "absent" and self.run is None:
            return read
        host = [w.to_json() for w in self.program.writes] if self.program else []
        if self.program and self.program.problems:
            return {"state": "unknown", "evidence": read["evidence"], "host_writes": host,
                    "says": "DFlash's padded sample rows could not be judged: " + "; ".join(self.program.problems)}
        if self.run is None or not self.run.ran:
            why = (f"{FUNCTION} not found in the DFlash files" if self.run is None else self.run.problem)
            how = f"read with Python's ast (not run: {why})"
            if overwrites_a_slot(read["state"]):  # a constant slot stored past the live rows: affected as read
                return {**read, "how": how}
            # A -1 store read in the source says nothing of which rows it reaches or what host code does after it.
            return {"state": "unknown", "evidence": read["evidence"], "how": how,
                    "says": f"DFlash's padded sample rows could not be judged: {FUNCTION} not run ({why})"}
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
        around = [w for w in (self.program.writes if self.program else []) if w.when in ("before", "after")]
        if around:
            rows += " (with the host writes around it: " + "; ".join(
                f"{w.file}:{w.line} {w.when}: {w.code}" for w in around) + ")"
        return {"state": state, "says": says, "evidence": evidence, "host_writes": host,
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
    program = host_program(Path(tree))
    return DFlashAudit(read_dflash(tree), run_dflash(tree, device, program), program)
