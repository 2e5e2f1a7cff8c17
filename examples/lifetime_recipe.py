"""The output-lifetime audit as a recipe, applied to a step written from scratch.

The step: an engine that overlaps its steps. Each step replays one captured graph that computes the
log-probability of every live request's sampled token, and hands those logprobs to the output
processor (detokenizing, streaming to the client), which runs while the engine has already started
the next step. The graph's output is memory fixed at its capture: the next step's replay of the
same graph writes the same memory. So three stages, in the order they run:

1. ``graph at step t``: the graph replays for step t's batch and hands on its logprobs;
2. ``graph at step t+1``: the graph replays for the next batch (overlapped with step t's output);
3. ``output processor of step t``: reads step t's logprobs.

The batches replay the graphs of 4, 4, 8 and 8 rows: the next step replays the same graph after
steps 0 and 2 only, and only there can it overwrite what the output processor has yet to read. The
graphs own their outputs (one block each): a single graph's output is overwritten by its own next
replay all the same.

The buggy form hands on the graph's output itself; the fixed form copies it out when handing it on
(a copy the next replay does not touch). Nothing here is padded: the padding-invariance audit has
nothing to find, and the lifetime audit (labkit.proofs.lifetime) names what overwrote the logprobs
and who read them after.

    python examples/lifetime_recipe.py

docs/AUDIT_RECIPE.md explains both properties and how to test them in a GPU serving engine.
"""

from __future__ import annotations

import argparse

import torch

from labkit.graph_pool import GraphPool
from labkit.graphs import GraphRunner
from labkit.proofs.audit_report import AuditReport
from labkit.proofs.lifetime import HandedOn, Stage, audit_lifetime

CAPTURE_SIZES = (4, 8)
VOCAB = 16
STEPS = 3  # engine steps audited, each overlapped with the next
BATCHES = (3, 4, 6, 7)  # live requests per engine step (the audit needs STEPS + 1): graphs of 4, 4, 8, 8
FORMS = ("buggy", "copied")


class OverlappedLogprobs:
    """The graph of the logprobs step, its persistent inputs, and the overlapped output processor."""

    def __init__(self, form: str, seed: int = 0):
        if form not in FORMS:
            raise SystemExit(f"form must be one of {', '.join(FORMS)}, got {form!r}")
        self.form = form
        gen = torch.Generator().manual_seed(seed)
        self.batches = [(torch.randn(n, VOCAB, generator=gen), torch.randint(0, VOCAB, (n,), generator=gen))
                        for n in BATCHES]
        self.logits = torch.zeros(max(CAPTURE_SIZES), VOCAB)  # the graph's persistent inputs
        self.tokens = torch.zeros(max(CAPTURE_SIZES), dtype=torch.int64)
        self.runner = GraphRunner(CAPTURE_SIZES, pool=GraphPool())
        self.step_index = 0
        self.handed = None  # step t's logprobs, as the output processor will read them
        self.read = []

    def graph_step(self, rows: int) -> torch.Tensor:
        out = self.runner.pool.empty((rows,))
        logprobs = torch.log_softmax(self.logits[:rows], dim=-1)
        torch.gather(logprobs, 1, self.tokens[:rows, None], out=out[:, None])
        return out

    def replay(self, index: int) -> torch.Tensor:
        logits, tokens = self.batches[index]
        n = len(tokens)
        self.logits[:n], self.tokens[:n] = logits, tokens
        return self.runner.forward(n, self.graph_step)[:n]

    def stages(self) -> list[Stage]:
        def this_step():
            out = self.replay(self.step_index)
            self.handed = out.clone() if self.form == "copied" else out

        def next_step():
            self.replay(self.step_index + 1)

        def output_processor():
            self.read.append(self.handed.clone())

        return [Stage("graph at step t", this_step), Stage("graph at step t+1", next_step),
                Stage("output processor of step t", output_processor)]

    def start(self, step: int) -> None:
        self.step_index = step


def audit(form: str) -> AuditReport:
    step = OverlappedLogprobs(form)
    handed = HandedOn("logprobs", lambda: step.handed, by="graph at step t", read_by="output processor of step t")
    return audit_lifetime(step.stages(), [handed], steps=STEPS, before_step=step.start,
                          name=f"overlapped logprobs, {form}")


def main(argv=None) -> dict[str, AuditReport]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    reports = {form: audit(form) for form in FORMS}
    for report in reports.values():
        print(report)
        print()
    return reports


if __name__ == "__main__":
    main()
