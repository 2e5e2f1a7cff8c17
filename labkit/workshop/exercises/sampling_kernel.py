"""Exercise (b): the sampling kernel and a row that holds no request.

The learner writes either

* a ``@triton.jit`` kernel ``gumbel_kernel(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr,
  pos_ptr, q_ptr, token_ptr, vocab_size, salt, BLOCK_V: tl.constexpr)``, one program per row and
  one block for the whole (toy) vocabulary, storing q at ``q_ptr + slot * vocab_size``; or
* where Triton cannot run (macOS, Windows), a torch function with the same semantics,
  ``gumbel_rows(logits, idx_mapping, temperature, seeds, positions, q, salt) -> tokens``, whose
  ``temperature``, ``seeds`` and ``q`` index like pointers (a negative index is the memory before them).

Judged by behaviour only, over three launches (:mod:`labkit.workshop.harness.launches`): no row reads or
writes outside the buffers, every live slot's q is its row's logits over its temperature, no other
slot's q changes, and every live row samples the reference token. Padded rows' own results are
thrown away, so every answer that meets these is right (the ways it can be written: see the
comment below, or notebook 03 after the exercises).

A verdict of "not solved yet" shows the launch it failed on, drawn
(:mod:`labkit.workshop.harness.your_launch`); its words, like the figure's, name what went wrong (rows,
slots, buffers), never the fix, which only the last hint shows.
"""
# The ways a kernel can skip the padded rows (slot -1), all judged right: masked loads with any
# ``other``, ``tl.where`` on a safe index, scalar ``if slot >= 0`` guards, or the whole body under one.
# (A comment, not the docstring: `?` shows the docstring before the exercises.)

from __future__ import annotations

import contextlib
import inspect

import torch

from labkit.proofs.guarded import Q_UNTOUCHED, wild_access_in
from labkit.workshop.exercises import record
from labkit.workshop.exercises.reveal import keeps_answer, learner_names
from labkit.workshop.feedback import (
    CheckResult,
    explain_exception,
    is_triton_kernel,
    join,
    never_raises,
    not_yet,
    resolve,
    solved,
)
from labkit.workshop.harness.launches import (
    BLOCK_V,
    TOKEN_UNSET,
    KernelCase,
    LaunchOutcome,
    M,
    V,
    case_mappings,
    kernel_case,
    kernel_device,
    launch_torch,
    launch_triton,
    triton_kernels_run,
)
from labkit.workshop.harness.your_launch import replay

TORCH_NAME = record.exercise("b").version("torch").function


def _kernel_shaped(fn) -> bool:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return "BLOCK_V" in params or any(p.endswith("_ptr") for p in params)


def _variant(fn, name: str) -> str | CheckResult:
    """'triton' or 'torch', or the reason this session cannot check `fn`."""
    if is_triton_kernel(fn):
        if triton_kernels_run():
            return "triton"
        return not_yet("b", f"`{name}` is a Triton kernel, but this session cannot run one: labkit was "
                            "imported with the torch backend (LABKIT_BACKEND=torch, or no Triton). Restart "
                            f"with LABKIT_BACKEND=interpreter, or write the torch version `{TORCH_NAME}`.")
    if not _kernel_shaped(fn):
        return "torch"
    if triton_kernels_run():
        return not_yet("b", f"`{name}` is a plain Python function: a kernel needs `@triton.jit` above its `def`.")
    return not_yet("b", "Triton cannot run on this machine (macOS and Windows have no Triton wheels), so a "
                        f"kernel cannot be launched here. Write the torch version instead: `{TORCH_NAME}(logits, "
                        "idx_mapping, temperature, seeds, positions, q, salt)` returning the tokens.")


@never_raises("b")
@keeps_answer("b")
def check_kernel(gumbel_kernel) -> CheckResult:
    """(b) The sampling kernel (or its torch version) with padded rows: live rows sample and store as before,
    and a padded row touches nothing outside the buffers.

    Takes the function, or a namespace such as ``globals()`` where it looks up ``gumbel_kernel``
    (or ``gumbel_rows``, the torch version, first where Triton cannot run). Not solved yet, the
    result shows the launch it failed on (``result.figure``); solved, the PR's fix beside your code.
    """
    fn, name, verdict = resolve("b", gumbel_kernel, *learner_names("b"))
    if verdict is not None:
        return verdict
    variant = _variant(fn, name)
    if isinstance(variant, CheckResult):
        return variant
    device = kernel_device() if variant == "triton" else torch.device("cpu")
    warnings: list[str] = []
    reads_seen = "exact"
    for index, mapping in enumerate(case_mappings()):
        case = kernel_case(index, device)
        launch = f"Launch {index + 1} (idx_mapping {list(mapping)}):"
        try:
            outcome = launch_triton(fn, case) if variant == "triton" else launch_torch(fn, case)
        except Exception as err:  # explained in words, never raised
            return _showing_launch(not_yet("b", f"{launch} {_launch_failed(err, fn, name, case)}"),
                                   fn, variant, case, name)
        problem = judge_launch(case, outcome)
        if problem:
            return _showing_launch(not_yet("b", f"{launch} {problem}{_always_true_words(fn, outcome)}"),
                                   fn, variant, case, name)
        warnings += [_no_other_warning(b) for b in outcome.loads_without_other if _no_other_warning(b) not in warnings]
        reads_seen = outcome.reads_seen
    note = ""
    if reads_seen == "by effect":
        note = (" (Compiled on a GPU, a read shows here only through its effect on a row's token: a load whose "
                "value is never used cannot be seen. Run this checker with LABKIT_BACKEND=interpreter, or "
                "under compute-sanitizer, to see every access.)")
    if variant == "triton":
        warnings += [_strict_triton_warning(mask) for mask in scalar_condition_masks(fn)]
    return solved("b", f"Over {len(case_mappings())} launches every live row sampled the reference token, every "
                       "live slot's q is its row's logits over its temperature, no other slot's q changed, "
                       f"and no row read or wrote outside the buffers.{note} The mask alone does not help a "
                       "stale slot (it is >= 0): that takes the fill of exercise (a).", warnings)


def unsigned_compares(fn) -> list[str]:
    """The comparisons with 0 in `fn`'s source whose other side is converted to an unsigned type
    (``slot.to(tl.uint32) >= 0``): an unsigned value is never below 0, so such a condition always holds."""
    import ast
    import textwrap

    from labkit.workshop.feedback import learner_source

    source = learner_source(fn)
    try:
        tree = ast.parse(textwrap.dedent(source)) if source else None
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree) if tree else ():
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        sides = [node.left, *node.comparators]
        zero = any(isinstance(side, ast.Constant) and side.value == 0 for side in sides)
        unsigned = any("uint" in getattr(n, "attr", getattr(n, "id", "")) for side in sides for n in ast.walk(side))
        if zero and unsigned:
            found.append(ast.unparse(node))
    return found


# The newest Triton whose interpreter the kit's kernels are tested under (the Makefile's TRITON_NEXT):
# stricter about masks than the pinned one (docs/TRITON_MASKS.md, "One condition for the whole block").
STRICT_TRITON = "3.9"


def scalar_condition_masks(fn) -> list[str]:
    """The masks in `fn`'s source that Triton 3.9's interpreter refuses ("mask has unsupported dtype")
    where the pinned Triton's interpreter and compiled kernels run them: the mask of a ``tl.store`` or
    ``tl.load`` of a block (its pointer or mask involves ``tl.arange``) that is a comparison of a
    value ``tl.load`` gave as a scalar, directly or combined with ``&``, ``|``, ``^`` or
    ``tl.broadcast_to`` (``in_bounds & (flag != 0)``, by name too). Measured: comparing a block
    (``(offs * 0 + flag) != 0``), or choosing with ``tl.where(flag != 0, in_bounds, False)``, runs in
    both (docs/TRITON_MASKS.md, "One condition for the whole block")."""
    import ast
    import textwrap

    from labkit.workshop.feedback import learner_source

    source = learner_source(fn)
    try:
        tree = ast.parse(textwrap.dedent(source)) if source else None
    except SyntaxError:
        return []
    if tree is None:
        return []

    def names(node) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    def calls(node, attr: str) -> list[ast.Call]:
        return [n for n in ast.walk(node) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == attr]

    assigned = [(t.id, node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)]
    blocks: set[str] = set()
    scalars: set[str] = set()
    conditions: set[str] = set()  # names holding a scalar condition, as the mask would get it

    def scalar_condition(node) -> bool:
        if isinstance(node, ast.Name):
            return node.id in conditions
        if isinstance(node, ast.Compare):
            return bool(names(node) & scalars) and not names(node) & blocks
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return scalar_condition(node.left) or scalar_condition(node.right)
        if isinstance(node, ast.UnaryOp):
            return scalar_condition(node.operand)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "broadcast_to" and node.args:
            return scalar_condition(node.args[0])
        return False  # tl.where and every other call make a block of their own

    for _ in range(len(assigned) + 1):  # to a fixed point: names made of names
        for name, value in assigned:
            if calls(value, "arange") or calls(value, "full") or names(value) & blocks:
                blocks.add(name)
                scalars.discard(name)
            elif calls(value, "load") or names(value) & scalars:
                scalars.add(name)
            if scalar_condition(value):
                conditions.add(name)
    found = []
    for call in calls(tree, "store") + calls(tree, "load"):
        mask = next((k.value for k in call.keywords if k.arg == "mask"), None)
        if mask is None or not scalar_condition(mask):
            continue
        if names(mask) & blocks or (call.args and names(call.args[0]) & blocks):
            found.append(ast.unparse(mask))
    return list(dict.fromkeys(found))


def _strict_triton_warning(mask: str) -> str:
    return (f"your mask `{mask}` combines a block with a condition on a scalar `tl.load` gave. This Triton runs it, "
            f"but the interpreter of Triton {STRICT_TRITON}, which the kit also supports, stops the launch "
            "(\"mask has unsupported dtype\"). Make the value a block before comparing it "
            "(docs/TRITON_MASKS.md, \"One condition for the whole block\").")


def _always_true_words(fn, outcome: LaunchOutcome) -> str:
    compares = unsigned_compares(fn) if (outcome.reads or outcome.q_guard_rows_written) else []
    if not compares:
        return ""
    return (f" Your code compares an unsigned value with 0 (`{compares[0]}`): an unsigned number is never below "
            "0, so that condition holds in every lane, for every row, and masks nothing.")


def _showing_launch(result: CheckResult, fn, variant: str, case: KernelCase, name: str) -> CheckResult:
    """The verdict, with the launch it failed on drawn below it where the launch can be replayed."""
    # Where the learner's code raises (the verdict says so), there is no launch to draw.
    with contextlib.suppress(Exception):
        result.launch = replay(fn, variant, case, name)
    return result


def _launch_failed(err: BaseException, fn, name: str, case: KernelCase) -> str:
    wild = wild_access_in(err)
    if wild is not None:
        return (f"a row accessed memory outside every buffer of the launch ({wild}); the checker stopped it "
                f"before it happened. The padded rows are {join(case.padded_rows) or 'none'}.")
    return explain_exception(err, fn, name)


def _no_other_warning(buffer: str) -> str:
    return (f"a masked load of `{buffer}` has no `other`. The checker's interpreter fills masked-off lanes with a "
            "constant (0 or 1, by Triton version), so the padded rows' results here are harmless and thrown "
            "away; on a GPU those lanes are undefined. Give every masked load an explicit `other`.")


def judge_launch(case: KernelCase, out: LaunchOutcome) -> str | None:
    """The first way this launch went wrong, in words; None if it is right."""
    for judge in (_outside_the_buffers, _missing_live_q, _other_slots_changed, _wrong_live_q, _wrong_tokens):
        problem = judge(case, out)
        if problem:
            return problem
    return None


def _rows_words(rows, case: KernelCase) -> str:
    rows = sorted(rows) if rows else case.padded_rows
    kinds = ["padded" if case.mapping_list[r] < 0 else "live" for r in rows]
    kind = kinds[0] if len(set(kinds)) == 1 else "the"
    return f"{kind} row{'s' if len(rows) > 1 else ''} {join(rows)}"


_READ_ORDER = ("temperature", "seeds", "temperature or seeds", "draft_logits")


def _outside_the_buffers(case: KernelCase, out: LaunchOutcome) -> str | None:
    read = sorted({a.buffer for a in out.reads}, key=lambda b: _READ_ORDER.index(b) if b in _READ_ORDER else 9)
    before = [i for i in out.q_guard_rows_written if i < 0]
    after = [i for i in out.q_guard_rows_written if i >= M]
    if not (read or before or after):
        return None
    what = (["read " + join(f"{b}[-1]".replace(" or ", "[-1] or ") for b in read)] if read else []) + \
        (["stored into draft_logits[-1]"] if before else [])
    text = ""
    if what:
        rows = {a.row for a in out.reads + out.stores if a.row is not None}
        text = (f"{_rows_words(rows, case)} (slot -1) {' and '.join(what)}: the memory just before each buffer, "
                "which on a GPU belongs to other tensors (or is not mapped at all, and the process crashes). "
                "Here it is guard memory the checker watches.")
        if out.reads_seen == "by effect" and read:
            changed = "draft_logits" if any(a.row is None for a in out.reads) else "these rows' tokens"
            text += f" (Seen by effect: {changed} changed when only the memory before the buffers did.)"
    if after:
        text += (f" {'A' if text else 'a'} store went past the end of draft_logits (into row {M}): the block has "
                 f"{BLOCK_V} lanes and the vocabulary {V}, and the lanes past the vocabulary of slot {M - 1}'s row "
                 "landed there.")
    return text.strip()


def _missing_live_q(case: KernelCase, out: LaunchOutcome) -> str | None:
    for slot, row in sorted(case.live.items(), key=lambda kv: kv[1]):
        if torch.all(out.q[slot] == Q_UNTOUCHED):
            return (f"live row {row} holds slot {slot}, but nothing was stored into draft_logits[{slot}]: the "
                    f"rejection sampler would verify row {row}'s draft against a q that was never written"
                    + (" (slot 0 is a live request's slot like any other)." if slot == 0 else "."))
    return None


def _other_slots_changed(case: KernelCase, out: LaunchOutcome) -> str | None:
    for slot in range(M):
        if slot not in case.live and not torch.all(out.q[slot] == Q_UNTOUCHED):
            return (f"no row holds slot {slot}, yet draft_logits[{slot}] changed: a store spilled out of its own "
                    f"row (the block has {BLOCK_V} lanes and the vocabulary {V}).")
    return None


def _wrong_live_q(case: KernelCase, out: LaunchOutcome) -> str | None:
    _, q_ref = case.reference()
    for slot, row in sorted(case.live.items(), key=lambda kv: kv[1]):
        got, want = out.q[slot].to(q_ref.device), q_ref[slot]
        if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
            bad = int((~torch.isclose(got, want, rtol=1e-5, atol=1e-6)).sum())
            padded = _padded_row_whose_logits(case, got)
            if padded is not None:
                return (f"live row {row}'s q (draft_logits[{slot}]) holds padded row {padded}'s logits: padded row "
                        f"{padded} (slot {case.mapping_list[padded]}) stored into draft_logits[{slot}] after live row "
                        f"{row} did, so the rejection sampler would verify row {row}'s draft against a padded "
                        "row's q.")
            t = float(case.temperature[slot])
            scale = f"divided by its temperature {t:.2f}" if t else "unscaled (its temperature is 0: greedy)"
            return (f"live row {row}'s q (draft_logits[{slot}]) differs from its logits {scale} in {bad} of "
                    f"{V} entries; q must be exactly the distribution the row's token was sampled from.")
    return None


def _padded_row_whose_logits(case: KernelCase, q: torch.Tensor) -> int | None:
    """The padded row whose logits, as they are or divided by any slot's temperature, are `q`."""
    scales = {1.0} | {float(t) for t in case.temperature if float(t) != 0.0}
    for row in case.padded_rows:
        logits = case.logits[row].to(q.device)
        if any(torch.allclose(q, logits / scale, rtol=1e-5, atol=1e-6) for scale in scales):
            return row
    return None


def _wrong_tokens(case: KernelCase, out: LaunchOutcome) -> str | None:
    tokens_ref, _ = case.reference()
    for row, slot in enumerate(case.mapping_list):
        if slot < 0:
            continue  # a padded row's token is thrown away: whatever it is, it is right
        got, want = int(out.tokens[row]), int(tokens_ref[row])
        if got == TOKEN_UNSET:
            return f"live row {row} (slot {slot}) wrote no token."
        if got != want:
            return (f"live row {row} (slot {slot}) sampled token {got}, the reference {want}: the row's sampling "
                    "(scaled logits plus Gumbel noise keyed by its slot's seed and its position, then the "
                    "argmax) changed.")
    return None
