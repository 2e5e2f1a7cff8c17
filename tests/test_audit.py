"""The padding-invariance audit: the test PR #47066 shipped without.

It must fail on every mode that lets a padded row store into a live slot, naming the slot and the
row, and pass on the fixed modes; and it must work on a learner's own step function.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from labkit import backends
from labkit.checks import LabkitInputError, PaddedSlotOutOfBoundsError
from labkit.proofs.audit import (
    Buffer,
    OwnershipTable,
    PaddingInvarianceError,
    audit_speculator,
    audit_step,
    batch_compositions,
    smallest_failing_batch,
    trace_launch,
)
from labkit.speculator import FixSwitches, Speculator

KERNEL_BACKEND = "interpreter" if backends.KERNELS_INTERPRETED else backends.backend()
DEVICE = backends.default_device()
CAN_LAUNCH_TRITON = KERNEL_BACKEND in ("interpreter", "triton")

# Which of two colliding rows stores last is fixed on the CPU (programs run in grid order) and a
# race on a GPU, so the exact reports below are CPU facts.
pytestmark = pytest.mark.skipif(backends.backend() == "triton",
                                reason="store order is a race on a GPU; these reports are checked on the CPU")
FAST = settings(max_examples=6, deadline=None, derandomize=True, database=None)


# -- the kit's modes ----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["graph-buggy", "graph-mask-only"])
def test_audit_fails_and_names_padded_row_7_overwriting_row_6s_q(models, mode):
    report = audit_speculator(mode, models=models)
    assert not report.passed
    # The MECHANICS timeline: the stale poison leaves slot 7 in padded row 7.
    assert "padded row 7 wrote draft_logits[7, 0, :] owned by row 6 (2 rows stored there; this one landed last)" \
        in report.sentences()
    assert "padded row 7 wrote draft_logits[7, 1, :] owned by row 6 (2 rows stored there; this one landed last)" \
        in report.sentences()
    # Every finding is a padded row storing into a live slot, attributed by the kernel's own trace.
    for f in report.findings:
        assert f.buffer == "draft_logits" and f.writer == 7 and f.how == "write trace" and f.stores == 2
    with pytest.raises(PaddingInvarianceError, match=r"padded row 7 wrote draft_logits\[7, 0, :\] owned by row 6"):
        report.raise_if_failed()


def test_audit_fails_on_dflash_padding_with_slot_0(models):
    report = audit_speculator("dflash-buggy", models=models)
    assert not report.passed
    assert report.sentences() == [
        "padded sample row 14 (request row 7, draft step 0) wrote draft_logits[0, 0, :] owned by row 0 "
        "(2 rows stored there; this one landed last)",
        "padded sample row 15 (request row 7, draft step 1) wrote draft_logits[0, 1, :] owned by row 0 "
        "(2 rows stored there; this one landed last)",
    ]
    # The pad value 0 is written by the input preparation, so every poison shows it.
    assert report.findings[0].poisons == ("stale", 1, 2)


@pytest.mark.parametrize("mode", ["graph-fixed", "dflash-fixed", "eager", "greedy-graph-buggy"])
def test_audit_passes_on_the_fixed_modes(models, mode):
    report = audit_speculator(mode, models=models)
    assert report.passed, str(report)
    assert report.raise_if_failed() is report
    assert str(report).startswith(f"PASS {mode}: 7 live rows run as ")


def test_fill_without_mask_is_refused_not_audited(models):
    with pytest.raises(PaddedSlotOutOfBoundsError):
        audit_speculator("graph-fill-only", models=models)


def test_audit_takes_a_factory_and_leaves_the_buffers_as_it_found_them(models):
    spec = Speculator(models.draft, max_num_reqs=8, num_steps=2, capture_sizes=(1, 2, 4, 8),
                      fix=FixSwitches.before())  # no record=True: the audit attaches a trace
    watched = {"idx_mapping": spec.idx_mapping, "draft_logits": spec.draft_logits, "input_tokens": spec.input_tokens}
    before = {name: t.clone() for name, t in watched.items()}
    report = audit_speculator(lambda: spec, [3, 0, 5], poisons=("stale",))
    # 3 rows in the graph of 4: padded row 3 holds the last live slot, 5, owned by row 2.
    assert report.sentences() == [
        f"padded row 3 wrote draft_logits[5, {j}, :] owned by row 2 (2 rows stored there; this one landed last)"
        for j in range(2)]
    for name, t in watched.items():
        assert torch.equal(t, before[name]), name


@FAST
@given(batch=batch_compositions(8, (1, 2, 4, 8)))
def test_any_padded_batch_fails_buggy_and_passes_fixed(models, batch):
    n = len(batch)
    buggy = audit_speculator("graph-buggy", batch, poisons=("stale",), models=models)
    # Padded row n + i holds live slot batch[-1 - i]: the report names exactly those.
    padded = range(n, buggy.padded_rows)
    expected = {(batch[-1 - (r - n) % n], r, n - 1 - (r - n) % n) for r in padded}
    found = {(f.index[0], f.writer, f.owner) for f in buggy.findings}
    assert found == expected
    assert audit_speculator("graph-fixed", batch, poisons=("stale",), models=models).passed


@FAST
@given(batch=batch_compositions(8, (1, 2, 4, 8)))
def test_dflash_pad_0_corrupts_exactly_when_slot_0_is_live(models, batch):
    report = audit_speculator("dflash-buggy", batch, poisons=("stale",), models=models)
    assert report.passed == (0 not in batch)
    assert all(f.index[0] == 0 and f.owner == batch.index(0) for f in report.findings)


def test_hypothesis_shrinks_to_three_requests_in_a_graph_of_four(models):
    assert smallest_failing_batch("graph-buggy", models=models, max_examples=15) == [0, 1, 2]


# -- a learner's own step ---------------------------------------------------------------------

M, V = 8, 16
LIVE = [0, 1, 2, 4, 5, 6, 7]
N = len(LIVE)


class LearnerState:
    """The persistent buffers of a one-kernel 'drafter': logits by row, q by slot."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.logits = torch.randn(M, V, generator=g).to(DEVICE)
        self.mapping = torch.zeros(M, dtype=torch.int32, device=DEVICE)
        self.mapping[:N] = torch.tensor(LIVE, dtype=torch.int32)
        self.temperature = torch.linspace(0.5, 1.0, M, device=DEVICE)
        self.q = torch.zeros(M, V, device=DEVICE)
        self.tokens = torch.zeros(M, dtype=torch.int64, device=DEVICE)
        self.writer = torch.full((M,), -1, dtype=torch.int32, device=DEVICE)

    def buffers(self, mapping_role="mapping"):
        return [
            Buffer("logits", self.logits, "row", range(N)),
            Buffer("idx_mapping", self.mapping, "row", range(N), mapping_role, values=(0, M)),
            Buffer("temperature", self.temperature, "slot", LIVE, values=(0.5, 1.5)),
            Buffer("q", self.q, "slot", LIVE, "output"),
            Buffer("tokens", self.tokens, "row", range(N), "output", values=(0, V)),
        ]


if CAN_LAUNCH_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def learner_kernel(logits_ptr, mapping_ptr, temp_ptr, q_ptr, tok_ptr, writer_ptr,
                       V: tl.constexpr, MASK: tl.constexpr, TRACE: tl.constexpr):
        row = tl.program_id(0)
        slot = tl.load(mapping_ptr + row)
        offs = tl.arange(0, V)
        if MASK:
            temp = tl.load(temp_ptr + slot, mask=slot >= 0, other=1.0)
            store_mask = (offs * 0 + slot) >= 0
        else:
            temp = tl.load(temp_ptr + slot)
            store_mask = offs < V
        x = tl.load(logits_ptr + row * V + offs) / temp
        tl.store(q_ptr + slot * V + offs, x, mask=store_mask)
        tl.store(tok_ptr + row, tl.argmax(x, axis=0))
        if TRACE:
            if slot >= 0:
                tl.store(writer_ptr + slot, row)


def _triton_step(state, *, fill, mask, trace=False):
    def step(rows):
        if fill:
            state.mapping[N:] = -1
        learner_kernel[(rows,)](state.logits, state.mapping, state.temperature, state.q, state.tokens,
                                state.writer, V=V, MASK=mask, TRACE=trace)
    return step


def _torch_step(state, *, fill, mask):
    def step(rows):
        if fill:
            state.mapping[N:] = -1
        for row in range(rows):  # one "program" per row, in grid order
            slot = int(state.mapping[row])
            if mask and slot < 0:
                continue
            x = state.logits[row] / state.temperature[slot]
            state.q[slot] = x
            state.tokens[row] = x.argmax()
    return step


needs_triton = pytest.mark.skipif(not CAN_LAUNCH_TRITON,
                                  reason="needs Triton kernels that can launch here (the torch step covers this case)")


@needs_triton
def test_learner_triton_kernel_buggy_fails_fixed_passes():
    state = LearnerState()
    buggy = audit_step(_triton_step(state, fill=False, mask=False), state.buffers(),
                       live_rows=N, padded_rows=M, name="learner, no fix")
    assert not buggy.passed
    first = buggy.findings[0]
    assert first.sentence() == "padded row 7 wrote q[7, :] owned by row 6"
    assert first.how == "mapping" and first.poisons[0] == "stale"
    mask_only = audit_step(_triton_step(state, fill=False, mask=True), state.buffers(), live_rows=N, padded_rows=M)
    assert "padded row 7 wrote q[7, :] owned by row 6" in mask_only.sentences()
    fixed = audit_step(_triton_step(state, fill=True, mask=True), state.buffers(), live_rows=N, padded_rows=M)
    assert fixed.passed, str(fixed)


@needs_triton
def test_learner_kernel_with_a_trace_tensor_and_its_ownership_table():
    state = LearnerState()
    report = audit_step(_triton_step(state, fill=False, mask=False, trace=True), state.buffers(),
                        live_rows=N, padded_rows=M, trace=state.writer, poisons=("stale",))
    found = [(f.sentence(), f.how) for f in report.findings]
    assert found == [("padded row 7 wrote q[7, :] owned by row 6", "write trace")]
    state.mapping[N:] = 7  # the stale row, then one launch with the trace on
    state.writer.fill_(-1)
    _triton_step(state, fill=False, mask=False, trace=True)(M)
    table = OwnershipTable.from_trace(state.writer, LIVE)
    assert [(e["slot"], e["verdict"]) for e in table.collisions()] == [(7, "OVERWRITTEN by padded row 7")]


def test_learner_torch_step_without_trace_is_attributed_by_probing():
    state = LearnerState()
    # Declared as a plain input, the mapping gives no hint: the audit re-runs the padded step with
    # one padded row's inputs changed and sees which row moves the corrupted value.
    report = audit_step(_torch_step(state, fill=False, mask=False), state.buffers(mapping_role="input"),
                        live_rows=N, padded_rows=M, poisons=(1, 2))
    assert not report.passed
    assert {f.how for f in report.findings} == {"probe"}
    assert all(f.writer == 7 and f.sentence().startswith("padded row 7 wrote q[") for f in report.findings)
    fixed = audit_step(_torch_step(state, fill=True, mask=True), state.buffers(), live_rows=N, padded_rows=M)
    assert fixed.passed


def test_a_step_that_reads_non_live_data_fails_even_unpadded():
    state = LearnerState()

    def step(rows):
        # Wrong in another way: every row adds the logits of the last buffer row (padding).
        for row in range(rows):
            slot = int(state.mapping[row])
            state.q[slot] = state.logits[row] + state.logits[M - 1]

    bufs = [b for b in state.buffers() if b.name != "tokens"]
    report = audit_step(step, bufs, live_rows=N, padded_rows=N)
    assert not report.passed
    assert all(f.how == "unpadded run" for f in report.findings)
    assert "changes with the poison even without padding" in report.findings[0].sentence()


def test_buffer_specs_are_checked():
    t = torch.zeros(4, dtype=torch.int32)
    with pytest.raises(LabkitInputError, match="values=\\(lo, hi\\)"):
        Buffer("idx_mapping", t, "row", range(2), "mapping")
    with pytest.raises(LabkitInputError, match="indexed_by='row'"):
        Buffer("idx_mapping", t, "slot", range(2), "mapping", values=(0, 4))
    with pytest.raises(LabkitInputError, match="outside"):
        Buffer("q", torch.zeros(4, 3), "slot", [1, 9], "output")
    with pytest.raises(LabkitInputError, match="live_rows <= padded_rows"):
        audit_step(lambda rows: None, [Buffer("q", torch.zeros(4, 3), "slot", [1], "output")],
                   live_rows=3, padded_rows=2)


# -- write ownership of one launch --------------------------------------------------------------

def _launch_inputs():
    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(8, 31, generator=g)).to(DEVICE)
    mapping = torch.tensor([0, 1, 2, 4, 5, 6, 7, 7], dtype=torch.int32, device=DEVICE)
    temperature = torch.linspace(0.6, 1.0, 8, device=DEVICE)
    seeds = (torch.arange(8) * 1000 + 7).to(DEVICE)
    positions = (torch.arange(8) + 20).to(DEVICE)
    return logits, mapping, temperature, seeds, positions


@pytest.mark.parametrize("masked", [False, True])
def test_trace_launch_is_the_same_table_in_the_kernel_and_in_torch(masked):
    args = _launch_inputs()
    if masked:
        args[1][7] = -1
    tables = []
    for backend in (KERNEL_BACKEND, "torch"):
        table, tokens, q = trace_launch(*args, live_slots=[0, 1, 2, 4, 5, 6, 7], masked=masked, backend=backend)
        tables.append((str(table), tokens.cpu()))
    assert tables[0][0] == tables[1][0] and torch.equal(tables[0][1], tables[1][1])
    table = tables[0][0]
    if masked:
        assert "OVERWRITTEN" not in table
    else:
        assert "   7    0  row 6   padded row 7              2  OVERWRITTEN by padded row 7" in table
        assert "   3    0  -       -                         0  free slot" in table


def test_ownership_table_from_a_speculator_record(models):
    spec = Speculator(models.draft, max_num_reqs=8, num_steps=2, capture_sizes=(1, 2, 4, 8),
                      fix=FixSwitches.before(), record=True)
    from labkit.proofs.audit import speculator_inputs

    spec.propose(*speculator_inputs(spec, list(range(8))))
    spec.propose(*speculator_inputs(spec, [0, 1, 2, 4, 5, 6, 7], seed=1))
    table = OwnershipTable.from_record(spec.last_record)
    bad = [(e["slot"], e["step"], e["writer"], e["owner"]) for e in table.collisions()]
    assert bad == spec.last_record.collisions() == [(7, 0, 7, 6), (7, 1, 7, 6)]
