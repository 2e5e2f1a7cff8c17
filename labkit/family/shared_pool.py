"""Case 3, vLLM #53488: a target graph and a drafter graph capture into one memory pool.

One engine step scores one prompt, in four stages (:data:`STAGES`):

1. the target model turns the prompt's tokens into hidden states, one row per token: under a graph
   for a prompt of up to ``TARGET_CAPTURE_SIZES[-1]`` tokens (padded to the next capture size), eagerly
   for a longer one, as an engine runs what no graph was captured for;
2. the sampler picks the next token from the last row's logits;
3. the drafter, a graph of two rows (one request, padded), drafts from that token;
4. the bookkeeping computes the prompt's logprobs (each token's, given the tokens before it) from
   the target's hidden states.

Both :class:`~labkit.graphs.GraphRunner` s capture into one :class:`~labkit.graph_pool.GraphPool` and
keep their graphs' outputs without owning them, as an engine does that lets its graphs' outputs
share memory. The models are small fixed random maps (an embedding, a gain, ``tanh``; an LM head for
the logits), elementwise, so that nothing but the outputs allocates from the pool.

Forms: ``"buggy"``; ``"copied out"``: the target's hidden states are copied out of the graph's output
as soon as it is handed on; ``"owned"``: the runners keep their outputs (owning their memory).
"""

from __future__ import annotations

import torch

from labkit.errors import one_of
from labkit.family.symptom import Symptom, differs, largest_difference
from labkit.graph_pool import GraphPool
from labkit.graphs import GraphRunner
from labkit.proofs.audit import Buffer, audit_step
from labkit.proofs.audit_report import AuditReport
from labkit.proofs.lifetime import HandedOn, Stage, audit_lifetime

VOCAB = 24
HIDDEN = 16
TARGET_CAPTURE_SIZES = (8, 16, 32)
DRAFT_CAPTURE_SIZES = (2,)
PROMPT_LENGTHS = (5, 8, 13, 20, 27, 32, 33, 40, 48)
FORMS = ("buggy", "copied out", "owned")
STAGES = ("target model", "sampler", "draft graph", "prompt logprobs")


class PromptScoring:
    """The four stages of a step over the prompts of :data:`PROMPT_LENGTHS`, in `form`."""

    def __init__(self, form: str = "buggy", *, device="cpu", use_graphs: bool = True, seed: int = 0):
        one_of("form", form, FORMS)
        self.form = form
        self.device = torch.device(device)
        self.use_graphs = use_graphs
        gen = torch.Generator().manual_seed(seed)

        def rand(*shape):
            return torch.randn(*shape, generator=gen).to(self.device)

        self.target_embed, self.target_gain, self.lm_head = rand(VOCAB, HIDDEN), rand(HIDDEN), rand(HIDDEN, VOCAB)
        self.draft_embed = rand(VOCAB, HIDDEN)
        self.prompts = [torch.randint(0, VOCAB, (n,), generator=gen).to(self.device) for n in PROMPT_LENGTHS]
        self.pool = GraphPool(self.device)
        mode, keep = ("full" if use_graphs else "eager"), form == "owned"
        self.target = GraphRunner(TARGET_CAPTURE_SIZES, mode=mode, device=self.device, pool=self.pool,
                                  keep_outputs=keep)
        self.drafter = GraphRunner(DRAFT_CAPTURE_SIZES, mode=mode, device=self.device, pool=self.pool,
                                   keep_outputs=keep)
        # The graphs' persistent inputs: the prompt's tokens, the drafter's token.
        self.tokens = torch.zeros(max(PROMPT_LENGTHS), dtype=torch.int64, device=self.device)
        self.draft_input = torch.zeros(DRAFT_CAPTURE_SIZES[-1], dtype=torch.int64, device=self.device)
        self.prompt = self.prompts[0]
        self.hidden = self.next_token = self.draft_hidden = self.logprobs = None

    # -- the captured work ------------------------------------------------------------------------

    def target_step(self, rows: int) -> torch.Tensor:
        out = self.target.pool.empty((rows, HIDDEN))
        torch.index_select(self.target_embed, 0, self.tokens[:rows], out=out)
        return out.mul_(self.target_gain).tanh_()

    def draft_step(self, rows: int) -> torch.Tensor:
        out = self.drafter.pool.empty((rows, HIDDEN))
        torch.index_select(self.draft_embed, 0, self.draft_input[:rows], out=out)
        return out.tanh_()

    # -- the stages -------------------------------------------------------------------------------

    def set_prompt(self, index: int) -> None:
        self.prompt = self.prompts[index]
        self.tokens[: len(self.prompt)].copy_(self.prompt)

    def under_graph(self) -> bool:
        """Whether this prompt's target pass replays a graph (an engine runs longer ones eagerly)."""
        return self.use_graphs and len(self.prompt) <= self.target.max_size

    def run_target(self) -> None:
        n = len(self.prompt)
        hidden = self.target.forward(n, self.target_step) if self.under_graph() else self.target_step(n)
        self.hidden = hidden[:n].clone() if self.form == "copied out" else hidden[:n]

    def run_sampler(self) -> None:
        self.next_token = (self.hidden[-1] @ self.lm_head).argmax()
        self.draft_input[0] = self.next_token

    def run_drafter(self) -> None:
        self.draft_hidden = self.drafter.forward(1, self.draft_step)

    def run_prompt_logprobs(self) -> None:
        logits = self.hidden[:-1] @ self.lm_head
        self.logprobs = torch.log_softmax(logits, dim=-1).gather(1, self.prompt[1:, None]).squeeze(1)

    def stages(self) -> list[Stage]:
        return [Stage(name, run) for name, run in zip(STAGES, (self.run_target, self.run_sampler, self.run_drafter,
                                                               self.run_prompt_logprobs), strict=True)]

    def score(self, index: int) -> tuple[torch.Tensor, int]:
        """Step `index`: the prompt's logprobs (a CPU copy) and the next token."""
        self.set_prompt(index)
        for stage in self.stages():
            stage.run()
        return self.logprobs.cpu().clone(), int(self.next_token)

    def shares_memory(self) -> bool:
        """After a step: whether the target's hidden states and the drafter's output share memory."""
        a, b = self.hidden, self.draft_hidden
        a_end = a.data_ptr() + a.numel() * a.element_size()
        b_end = b.data_ptr() + b.numel() * b.element_size()
        return a.data_ptr() < b_end and b.data_ptr() < a_end


def symptom(form: str = "buggy", *, device="cpu") -> Symptom:
    """The prompts (by length) whose logprobs differ from an eager run's; next tokens are compared too."""
    graphed, eager = PromptScoring(form, device=device), PromptScoring(form, device=device, use_graphs=False)
    corrupted, largest = [], 0.0
    for i, length in enumerate(PROMPT_LENGTHS):
        got, _ = graphed.score(i)
        want, _ = eager.score(i)
        if differs(got, want):
            corrupted.append(length)
            largest = max(largest, largest_difference(got, want))
    return Symptom("prompts (by length)", tuple(corrupted), len(PROMPT_LENGTHS), largest)


def next_tokens_differ(form: str = "buggy", *, device="cpu") -> int:
    """How many prompts' next tokens (what generation emits) differ from the eager run's."""
    graphed, eager = PromptScoring(form, device=device), PromptScoring(form, device=device, use_graphs=False)
    return sum(graphed.score(i)[1] != eager.score(i)[1] for i in range(len(PROMPT_LENGTHS)))


def audit(form: str = "buggy", *, device="cpu") -> AuditReport:
    """The output-lifetime audit of every prompt's step in `form`: the target's hidden states."""
    case = PromptScoring(form, device=device)
    handed = HandedOn("hidden_states", lambda: case.hidden, by=STAGES[0], read_by=STAGES[-1])
    return audit_lifetime(case.stages(), [handed], steps=len(PROMPT_LENGTHS), before_step=case.set_prompt,
                          name=f"prompt scoring, {form}")


def padding_audit(form: str = "buggy", index: int = 0, *, device="cpu") -> AuditReport:
    """The padding-invariance audit of the target's pass over prompt `index` (its live rows, unpadded
    and padded to its graph's size)."""
    case = PromptScoring(form, device=device)
    case.set_prompt(index)
    n = len(case.prompt)
    tokens = Buffer("tokens", case.tokens, "row", range(n), values=(0, VOCAB))
    return audit_step(case.target_step, [tokens], live_rows=n, padded_rows=case.target.rows_for(n),
                      name=f"target pass, {form}")
