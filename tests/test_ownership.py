"""Who wrote each q in one launch: the ownership table of the sampling kernel's write trace.

The same launch must give the same table in the Triton kernel (the interpreter on a CPU) and in
its torch reference; a stale row's store is named OVERWRITTEN; a DFlash launch's own sample rows
(request row i, draft step j -> sample row i * k + j) are their owners' writers, not intruders.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from labkit import backends
from labkit.bench.scenario import MECHANICS_BATCH, TIMELINE, propose_inputs
from labkit.config import FixSwitches
from labkit.kernels import SamplingState
from labkit.proofs.ownership import OwnershipTable, trace_launch
from labkit.speculator import DFlashSpeculator, Speculator

KERNEL_BACKEND = "interpreter" if backends.KERNELS_INTERPRETED else backends.backend()
DEVICE = backends.default_device()
cpu_store_order = pytest.mark.skipif(KERNEL_BACKEND == "triton",
                                     reason="which colliding store lands last is a race on a GPU")


def _launch_inputs():
    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(8, 31, generator=g)).to(DEVICE)
    mapping = torch.tensor([0, 1, 2, 4, 5, 6, 7, 7], dtype=torch.int32, device=DEVICE)
    temperature = torch.linspace(0.6, 1.0, 8, device=DEVICE)
    seeds = (torch.arange(8) * 1000 + 7).to(DEVICE)
    positions = (torch.arange(8) + 20).to(DEVICE)
    return logits, mapping, temperature, seeds, positions


@cpu_store_order
@pytest.mark.parametrize("masked", [False, True])
def test_trace_launch_is_the_same_table_in_the_kernel_and_in_torch(masked):
    args = _launch_inputs()
    if masked:
        args[1][7] = -1
    tables = []
    for backend in (KERNEL_BACKEND, "torch"):
        table, tokens, q = trace_launch(args[0], SamplingState(*args[1:]), live_slots=[0, 1, 2, 4, 5, 6, 7],
                                        masked=masked, backend=backend)
        tables.append((str(table), tokens.cpu()))
    assert tables[0][0] == tables[1][0] and torch.equal(tables[0][1], tables[1][1])
    table = tables[0][0]
    if masked:
        assert "OVERWRITTEN" not in table
    else:
        assert "   7    0  row 6   padded row 7              2  OVERWRITTEN by padded row 7" in table
        assert "   3    0  -       -                         0  free slot" in table


@cpu_store_order
def test_ownership_table_from_a_speculator_record(models):
    spec = Speculator(models.draft, TIMELINE.before_fix(), record=True)
    spec.propose(*propose_inputs(spec, list(range(8))))
    spec.propose(*propose_inputs(spec, MECHANICS_BATCH, step=1))
    table = OwnershipTable.from_record(spec.last_record)
    bad = [(e["slot"], e["step"], e["writer"], e["owner"]) for e in table.collisions()]
    assert bad == spec.last_record.collisions() == [(7, 0, 7, 6), (7, 1, 7, 6)]


@pytest.mark.parametrize("pad", [-1, 0])
def test_dflash_own_sample_rows_are_their_owners_writers(models, pad):
    # Capture sizes without 1: one live request (slot 3) runs in a graph of 2 rows, 4 sample rows.
    config = replace(TIMELINE, drafter="dflash", capture_sizes=(2, 4, 8), fix=FixSwitches(dflash=pad == -1))
    spec = DFlashSpeculator(models.draft, config, record=True)
    spec.propose(*propose_inputs(spec, [3, 0]))
    spec.propose(*propose_inputs(spec, [3], step=1))
    table = OwnershipTable.from_record(spec.last_record)
    by_slot = {(e["slot"], e["step"]): e for e in table.entries()}
    # Request row 0 owns slot 3; its draft steps 0 and 1 are sample rows 0 and 1.
    for step in (0, 1):
        assert table.own_row(3, step) == spec.last_record.own_sample_row(0, step) == step
        assert by_slot[(3, step)]["writer"] == step and by_slot[(3, step)]["verdict"] == "ok"
    assert table.mapping == [3, 3, pad, pad]
    if pad == 0:
        # Padded sample rows 2 and 3 store into slot 0, which no live request owns now: harmless.
        assert by_slot[(0, 0)]["verdict"] == "written by padded sample row 2 (no live owner: harmless)"
        assert by_slot[(0, 1)]["verdict"] == "written by padded sample row 3 (no live owner: harmless)"
    assert table.collisions() == [] and spec.last_record.collisions() == []


def test_from_trace_takes_a_bare_writer_tensor():
    writer = torch.tensor([0, 1, -1, 1], dtype=torch.int32)  # slot 3's store came from row 1, not row 2
    table = OwnershipTable.from_trace(writer, live_slots=[0, 1, 3], mapping=[0, 1, 3, 1])
    assert [(e["slot"], e["kind"], e["verdict"]) for e in table.collisions()] == [
        (3, "overwritten", "OVERWRITTEN by live row 1")]
    assert [e["kind"] for e in table.entries()] == ["ok", "ok", "free", "overwritten"]
    assert "mapping read by the launch (row -> slot): [0, 1, 3, 1]" in str(table)
