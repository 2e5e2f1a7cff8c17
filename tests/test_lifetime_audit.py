"""The output-lifetime audit (labkit.proofs.lifetime) on steps written here: a later stage that writes
into an output already handed on is named, with the output and its reader; a copy taken at hand-off,
or a stage that leaves the output alone, passes. What the audit expects is computed from the step."""

from __future__ import annotations

import pytest
import torch

from labkit.errors import LabkitInputError
from labkit.proofs.audit_report import OUTPUT_LIFETIME, OutputLifetimeError
from labkit.proofs.lifetime import HandedOn, Stage, audit_lifetime


class TwoGraphs:
    """A producer stage whose output is a slice of one shared buffer; a later stage that writes rows
    `clobbered` of the same buffer; a harmless stage between them; a reader."""

    def __init__(self, *, copy_out: bool, clobbered=(0, 1), rows: int = 4):
        self.buffer = torch.zeros(8)
        self.copy_out, self.clobbered, self.rows = copy_out, list(clobbered), rows
        self.handed = None
        self.read = None
        self.value = 1.0

    def produce(self):
        self.buffer[: self.rows] = self.value + torch.arange(self.rows, dtype=torch.float32)
        out = self.buffer[: self.rows]
        self.handed = out.clone() if self.copy_out else out

    def harmless(self):
        self.buffer[6:] = -5.0  # outside what was handed on

    def later_graph(self):
        self.buffer[self.clobbered] = -1.0

    def reader(self):
        self.read = self.handed.clone()

    def stages(self):
        return [Stage("producer", self.produce), Stage("harmless", self.harmless),
                Stage("later graph", self.later_graph), Stage("reader", self.reader)]

    def output(self):
        return HandedOn("out", lambda: self.handed, by="producer", read_by="reader")

    def before_step(self, step):
        self.value = 10.0 * (step + 1)


def test_a_later_stage_writing_the_handed_on_output_is_named_with_the_output_and_its_reader():
    step = TwoGraphs(copy_out=False)
    report = audit_lifetime(step.stages(), [step.output()], steps=3, before_step=step.before_step, name="two graphs")
    assert not report.passed and report.checks == OUTPUT_LIFETIME
    (found,) = report.findings
    assert (found.buffer, found.writer, found.handed_on_by, found.reader) == (
        "out", "later graph", "producer", "reader")
    assert found.rows == tuple(step.clobbered) and found.steps == (0, 1, 2)
    assert found.sentence() == "later graph overwrote out[0:2], handed on by producer, before reader read it"
    assert str(report).startswith("FAIL two graphs: output lifetime, 4 stages (producer, harmless, later graph, "
                                  "reader) over 3 step(s); checked out -- 1 output(s) overwritten")
    with pytest.raises(OutputLifetimeError, match="later graph overwrote out"):
        report.raise_if_failed()


def test_a_copy_taken_when_handed_on_passes():
    step = TwoGraphs(copy_out=True)
    report = audit_lifetime(step.stages(), [step.output()], steps=2, before_step=step.before_step)
    assert report.passed and report.raise_if_failed() is report and str(report).startswith("PASS step")


@pytest.mark.parametrize("clobbered", [(2,), (0, 3), (1, 2, 3)])
def test_the_rows_named_are_the_rows_the_later_stage_wrote(clobbered):
    step = TwoGraphs(copy_out=False, clobbered=clobbered)
    (found,) = audit_lifetime(step.stages(), [step.output()]).findings
    assert found.rows == tuple(clobbered)


def test_a_write_outside_the_rows_handed_on_is_no_finding():
    step = TwoGraphs(copy_out=False, clobbered=(5,))
    assert audit_lifetime(step.stages(), [step.output()]).passed


def test_a_change_after_the_reader_read_is_no_finding():
    step = TwoGraphs(copy_out=False)
    stages = step.stages()
    stages = [stages[0], stages[1], stages[3], stages[2]]  # the later graph now runs after the reader
    assert audit_lifetime(stages, [step.output()]).passed


def test_rows_limit_what_is_compared():
    step = TwoGraphs(copy_out=False, clobbered=(3,))
    limited = HandedOn("out", lambda: step.handed, by="producer", read_by="reader", rows=lambda: 3)
    assert audit_lifetime(step.stages(), [limited]).passed
    assert not audit_lifetime(step.stages(), [step.output()]).passed


@pytest.mark.parametrize("outputs,match", [
    ([HandedOn("out", lambda: None, by="nope", read_by="reader")], "by='nope' is no stage"),
    ([HandedOn("out", lambda: None, by="reader", read_by="producer")], "must run after"),
    ([], "non-empty list of HandedOn"),
    ([HandedOn("x", lambda: None, by="producer", read_by="reader")] * 2, "output names repeat"),
])
def test_bad_descriptions_are_refused_in_one_line(outputs, match):
    step = TwoGraphs(copy_out=False)
    with pytest.raises(LabkitInputError, match=match):
        audit_lifetime(step.stages(), outputs)


def test_bad_stages_and_steps_are_refused():
    step = TwoGraphs(copy_out=False)
    with pytest.raises(LabkitInputError, match="stage names repeat"):
        audit_lifetime(step.stages() + step.stages()[:1], [step.output()])
    with pytest.raises(LabkitInputError, match="steps must be a positive integer"):
        audit_lifetime(step.stages(), [step.output()], steps=0)
    with pytest.raises(LabkitInputError, match="tensor with at least one dimension"):
        audit_lifetime(step.stages(), [HandedOn("out", lambda: 3.0, by="producer", read_by="reader")])
