"""The padding-invariance audit engine on a learner's own step: a one-kernel 'drafter' with logits
by row and q by slot, written as a Triton kernel and as a torch loop (one "program" per row).

The audit must name the padded row that stores into a live slot, by the write trace, the mapping
or probing; tell a live row whose own result changed with the row count from a stale store; and
pass the fixed step. The kit's speculators are audited in tests/test_speculator_audit.py.
"""

from __future__ import annotations

import pytest
import torch

from labkit import backends
from labkit.errors import LabkitInputError
from labkit.kernels.gumbel import WriteTrace
from labkit.proofs.audit import Buffer, audit_step
from labkit.proofs.audit_report import PaddingInvarianceError
from labkit.proofs.ownership import OwnershipTable

KERNEL_BACKEND = "interpreter" if backends.KERNELS_INTERPRETED else backends.backend()
DEVICE = backends.default_device()
CAN_LAUNCH_TRITON = KERNEL_BACKEND in ("interpreter", "triton")
# Which of two colliding rows stores last is fixed on the CPU (programs run in grid order) and a
# race on a GPU: tests that name the last writer of a collision in a Triton kernel run on the CPU.
cpu_store_order = pytest.mark.skipif(KERNEL_BACKEND == "triton",
                                     reason="which colliding store lands last is a race on a GPU")


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
@cpu_store_order
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
@cpu_store_order
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


def _torch_traced_step(state, *, fill, scale_by_rows=False):
    """The torch step with a writer trace; `scale_by_rows` makes each row's result depend on how
    many rows run (like a model that is not batch-invariant)."""
    def step(rows):
        if fill:
            state.mapping[N:] = -1
        for row in range(rows):
            slot = int(state.mapping[row])
            if slot < 0:
                continue
            scale = 1 + 1e-3 * rows if scale_by_rows else 1.0
            state.q[slot] = state.logits[row] / state.temperature[slot] * scale
            state.tokens[row] = state.q[slot].argmax()
            state.writer[slot] = row
    return step


def test_a_live_row_whose_result_changes_with_the_row_count_is_not_called_a_stale_store():
    state = LearnerState()
    report = audit_step(_torch_traced_step(state, fill=True, scale_by_rows=True), state.buffers(),
                        live_rows=N, padded_rows=M, trace=state.writer, poisons=("stale",))
    assert not report.passed
    # Every live q differs, and the trace names its own row as the last writer in both runs.
    assert [(f.index, f.writer, f.owner, f.by_own_row) for f in report.findings] == [
        ((slot,), row, row, True) for row, slot in enumerate(LIVE)]
    assert report.findings[-1].sentence() == (
        "q[7, :] owned by row 6 differs from the unpadded run although its own live row 6 wrote it last "
        "in both runs: that row's result depends on how many rows the step ran")
    # The same trace still names a stale row's store as one, and a batch-invariant fixed step passes.
    stale = audit_step(_torch_traced_step(state, fill=False), state.buffers(), live_rows=N, padded_rows=M,
                       trace=state.writer, poisons=("stale",))
    assert [(f.sentence(), f.by_own_row) for f in stale.findings] == [
        ("padded row 7 wrote q[7, :] owned by row 6", False)]
    fixed = audit_step(_torch_traced_step(state, fill=True), state.buffers(), live_rows=N, padded_rows=M,
                       trace=state.writer)
    assert fixed.passed, str(fixed)


def test_several_stores_with_the_owner_last_are_reported_as_a_race_not_as_batch_dependence():
    state = LearnerState()
    writes = torch.zeros(M, dtype=torch.int32, device=DEVICE)
    trace = WriteTrace(writer=state.writer, writes=writes)  # the last writer and the store count, per slot

    def step(rows):
        for row in range(rows):  # one "program" per row, in grid order
            slot = int(state.mapping[row])
            state.q[slot] = state.logits[row] / state.temperature[slot]
            state.writer[slot] = row
            writes[slot] += 1
        if rows > N:
            # On a GPU the stores of rows 6 and 7 to q[7] interleave element by element, and either
            # trace store can land last: here row 6's values stand in the second half only, and the
            # trace names row 6.
            state.q[7, V // 2:] = state.logits[6, V // 2:] / state.temperature[7]
            state.writer[7] = 6

    report = audit_step(step, [b for b in state.buffers() if b.name != "tokens"], live_rows=N, padded_rows=M,
                        trace=trace, poisons=("stale",))
    assert [f.sentence() for f in report.findings] == [
        "live row 6 wrote q[7, :] owned by row 6 (2 rows stored there; its own store landed last), yet the "
        "value differs from the unpadded run: on a GPU, stores to one address race element by element, so "
        "part of the record can hold another row's values"]


def test_a_failed_report_raises_with_its_sentences():
    state = LearnerState()
    report = audit_step(_torch_step(state, fill=False, mask=False), state.buffers(), live_rows=N, padded_rows=M,
                        poisons=("stale",))
    with pytest.raises(PaddingInvarianceError, match=r"FAIL step: 7 live rows run as 8.*\n  padded row 7 wrote q\["):
        report.raise_if_failed()
    fixed = audit_step(_torch_step(state, fill=True, mask=True), state.buffers(), live_rows=N, padded_rows=M)
    assert fixed.raise_if_failed() is fixed
    assert str(fixed).startswith("PASS step: 7 live rows run as 8, poisons stale, 1, 2; checked q, tokens")


# -- what a record reads outside the live rows, and who reads the record ------------------------------

@pytest.mark.parametrize("n,rows_read", [(3, lambda rows: range(M - rows, M)), (2, lambda rows: range(M - rows, M))])
def test_a_record_that_reads_outside_the_live_rows_is_named_with_what_it_reads(n, rows_read):
    """A step written for a tensor of exactly its rows, handed a buffer of M rows: it reads the tail."""
    hidden = torch.zeros(M, V)
    out = torch.zeros(M, V)

    def step(rows):
        torch.tanh(hidden[-rows:], out=out[:rows])

    buffers = [Buffer("hidden", hidden, "row", range(n)),
               Buffer("out", out, "row", range(n), "output", read_by="the next step")]
    report = audit_step(step, buffers, live_rows=n, padded_rows=n + 1)
    assert not report.passed
    unpadded = [f for f in report.findings if f.how == "unpadded run"]
    padded = [f for f in report.findings if f.how != "unpadded run"]
    for findings, rows in ((unpadded, n), (padded, n + 1)):
        assert sorted(f.index[0] for f in findings) == list(range(n))
        for f in findings:
            read = list(rows_read(rows))[f.index[0]]
            assert f.reads == (f"hidden[{read}, :]",), (f.how, f.index, f.reads)
            assert "which the next step reads" in f.sentence() and f"it reads hidden[{read}, :]" in f.sentence()
    assert {f.how for f in padded} == {"read probe"}


def test_the_reader_of_a_slot_indexed_output_is_named_beside_its_writer():
    state = LearnerState()
    buffers = state.buffers()
    q = next(b for b in buffers if b.name == "q")
    q.read_by = "the rejection sampler"
    report = audit_step(_torch_step(state, fill=False, mask=False), buffers, live_rows=N, padded_rows=M,
                        poisons=("stale",))
    assert report.findings[0].sentence() == ("padded row 7 wrote q[7, :] owned by row 6, which the rejection "
                                             "sampler reads")
