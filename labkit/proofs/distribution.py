"""A distribution proof: speculative decoding emits exactly p -- unless q is overwritten.

Rejection sampling (Leviathan et al. 2023) keeps the output distributed as the target's p only if
the q it divides by is the distribution the draft token was drawn from. This module measures that
directly. For one fixed context it runs many independent requests (each with its own seed, so each
is an independent draw: every random number in the kit is keyed by (seed, position)), takes the
first token each one emits, and compares the empirical distribution with the exact p:

* total-variation distance TV = 1/2 sum |p_hat - p|, as a function of the sample count N;
  for exact sampling it shrinks like 1/sqrt(N);
* a chi-square goodness-of-fit test of p_hat against p (small-expectation categories pooled),
  with its p-value from the regularised upper incomplete gamma function.

The samples come from the kit's real path, vectorised over the requests: the padded speculator's
draft launch (`gumbel_sample` storing q into `draft_logits` by slot) and `rejection_sample`. The
buggy variant is *computed*, not faked: a batch of 2N requests shrinks to the N under test, so
the graph of 2N rows replays with N padded rows whose stale `idx_mapping` entries are exactly the
live requests' slots, and whose stale inputs are those requests' previous context. With
:meth:`DrafterConfig.before_fix` the padded rows overwrite every live q with draft logits of the stale
context; with the fix they are masked out. The exact distribution the buggy path emits is also
computed (:func:`emitted_distribution`), so the plateau it converges to is known in advance.

Bulk sampling runs on the torch backend (the interpreter runs one program at a time);
:func:`backends_agree` reruns a subset through the Triton kernels and checks token-for-token
equality. :func:`speedup_check` compares acceptance and tokens per step with
(1 - a^(k+1)) / (1 - a) in a setting where that formula is exact.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

import torch

from labkit import backends
from labkit.errors import LabkitInputError
from labkit.proofs.stats import ChiSquare, chi_square, expected_tv, loglog_slope, total_variation, tv_curve

DEFAULT_CONTEXT = "the kind baker lives in the "
DEFAULT_N = 16384
SEED_BASE = 20_250_000  # request i of a run has seed SEED_BASE + i
OTHER_SEED_BASE = 90_000_000  # the requests that finish before the batch shrinks


def kernel_backend() -> str | None:
    """The Triton backend this process can launch: 'interpreter' (kernels interpreted on the CPU),
    'triton' (compiled, with a GPU), or None (no Triton, or compiled kernels without a GPU)."""
    if backends.KERNELS_INTERPRETED:
        return "interpreter"
    if backends.HAS_TRITON and backends.HAS_CUDA:
        return "triton"
    return None


# -- exact distributions ----------------------------------------------------------------------

def emitted_distribution(p: torch.Tensor, q_drawn: torch.Tensor, q_verified: torch.Tensor) -> torch.Tensor:
    """Exact distribution of the first emitted token when the draft is drawn from `q_drawn` but
    verified against `q_verified`: accept x with min(1, p(x)/q_verified(x)), else emit from
    norm(max(0, p - q_verified)). Equals p when q_verified == q_drawn."""
    p, qd, qv = p.double(), q_drawn.double(), q_verified.double()
    accept = torch.where(qv > 0, torch.clamp(p / qv.clamp(min=1e-300), max=1.0), torch.ones_like(p))
    kept = qd * accept
    residual = (p - qv).clamp(min=0)
    residual = residual / residual.sum() if residual.sum() > 0 else p
    return kept + (1 - kept.sum()) * residual


@dataclass
class Setup:
    """The fixed context and the exact distributions of the experiment (float64, over the vocab)."""

    context: str
    stale_context: str
    temperature: float
    p: torch.Tensor  # target
    q: torch.Tensor  # draft, on the context: what the draft token is drawn from
    q_stale: torch.Tensor  # draft, on the stale context: what the padded row writes over q
    p_buggy: torch.Tensor  # what the buggy path emits (exact)
    target_logits: torch.Tensor  # [V] raw target logits at the context
    bonus_logits: torch.Tensor  # [V, V] raw target logits at context + x, for each x

    @property
    def acceptance_fixed(self) -> float:
        return float(torch.minimum(self.p, self.q).sum())

    @property
    def acceptance_buggy(self) -> float:
        return float((self.q * torch.clamp(self.p / self.q_stale.clamp(min=1e-300), max=1.0)).sum())

    @property
    def tv_buggy(self) -> float:
        """TV(p, p_buggy): where the buggy path's TV plateaus."""
        return total_variation(self.p_buggy, self.p)


@torch.no_grad()
def make_setup(models=None, context: str = DEFAULT_CONTEXT, stale_context: str | None = None,
               temperature: float = 1.0) -> Setup:
    """Exact p, q, q_stale and the buggy emitted distribution for `context`.

    stale_context: what the padded row's input holds; default: the same request one step earlier
    (the context without its last character), which is what a shrinking batch leaves behind.
    """
    from labkit.models import encode_context, load_toy_models

    if temperature <= 0:
        raise LabkitInputError("the distribution proof needs temperature > 0 (greedy drafting keeps no q)")
    models = models or load_toy_models()
    tok = models.tokenizer
    stale_context = context[:-1] if stale_context is None else stale_context
    ids, stale_ids = tok.encode(context), tok.encode(stale_context)
    device = next(models.draft.parameters()).device
    draft_ctx = encode_context([ids, stale_ids], models.draft.context_len).to(device)
    draft = models.draft(draft_ctx)[:, 0, :].double().cpu()
    V = tok.vocab_size
    target_ctx = encode_context([ids] + [ids + [x] for x in range(V)], models.target.context_len).to(device)
    target = models.target(target_ctx)[:, 0, :].float().cpu()
    p = torch.softmax(target[0].double() / temperature, dim=-1)
    q = torch.softmax(draft[0] / temperature, dim=-1)
    q_stale = torch.softmax(draft[1] / temperature, dim=-1)
    return Setup(context, stale_context, temperature, p, q, q_stale, emitted_distribution(p, q, q_stale),
                 target[0].clone(), target[1:].clone())


# -- sampling through the padded speculator ---------------------------------------------------

@dataclass
class Samples:
    """The first emitted token of N independent requests on one context."""

    buggy: bool
    tokens: torch.Tensor  # [N] int64
    num_accepted: torch.Tensor  # [N]
    corrupted_slots: int  # live slots whose q a padded row overwrote (from the write trace)
    backend: str  # the kernel backend that sampled them
    device: str = "cpu"

    @property
    def n(self) -> int:
        return int(self.tokens.numel())

    @property
    def acceptance(self) -> float:
        return float(self.num_accepted.double().mean())


def _padded_speculator(models, n: int, buggy: bool, device):
    """A speculator of 2N slots with one graph of 2N rows, recording its launches."""
    from labkit.config import DrafterConfig
    from labkit.speculator import Speculator

    draft = models.draft
    if next(draft.parameters()).device != device:
        draft = copy.deepcopy(draft).to(device)  # leave the caller's model where it is
    config = DrafterConfig(k=1, max_num_reqs=2 * n, capture_sizes=(2 * n,))
    return Speculator(draft, config.before_fix() if buggy else config.with_pr_fix(), device=device, record=True)


def _draft_after_shrink(spec, setup: Setup, tokenizer, seeds: torch.Tensor, temperature: torch.Tensor):
    """Step 1 on all 2N slots (ours on the stale context), step 2 on ours alone (slots N..2N-1,
    rows 0..N-1) on the context; returns (draft tokens [N, 1], positions [N])."""
    from labkit.models import encode_context

    n, device, window = spec.max_num_reqs // 2, spec.device, spec.window
    stale = encode_context([tokenizer.encode(setup.stale_context)], window).to(device).expand(2 * n, -1)
    spec.propose(torch.arange(2 * n, dtype=torch.int32), temperature, seeds, stale.contiguous(),
                 torch.full((2 * n,), len(setup.stale_context), device=device))
    context = encode_context([tokenizer.encode(setup.context)], window).to(device).expand(n, -1)
    positions = torch.full((n,), len(setup.context), dtype=torch.int64, device=device)
    drafts = spec.propose(torch.arange(n, 2 * n, dtype=torch.int32), temperature, seeds, context.contiguous(),
                          positions)
    return drafts, positions


@torch.no_grad()
def sample_first_tokens(setup: Setup, n: int, *, buggy: bool, models=None, backend: str = "torch",
                        seed_base: int = SEED_BASE) -> Samples:
    """N requests (seeds seed_base + i) through a padded speculator whose batch shrinks 2N -> N.

    Step 1: 2N requests; rows 0..N-1 are others (they finish), rows N..2N-1 are ours, on the stale
    context. Step 2: only ours are left, now in rows 0..N-1 on the context; the graph of 2N rows
    replays. Before the fix, padded row N+i still maps to slot N+i -- live row i's slot -- and its
    input still holds the stale context, so it overwrites q of request i after request i drew its
    draft token. Then one draft token (k = 1) per request is verified on the N live rows.
    """
    from labkit.kernels.rejection import rejection_sample
    from labkit.kernels.sampling_state import SamplingState
    from labkit.models import load_toy_models

    if n < 1:
        raise LabkitInputError(f"need at least one request, got n={n}")
    models = models or load_toy_models()
    with backends.using_backend(backend):
        device = backends.default_device()
        spec = _padded_speculator(models, n, buggy, device)
        temperature = torch.full((2 * n,), setup.temperature, device=device)
        seeds = torch.cat([OTHER_SEED_BASE + torch.arange(n), seed_base + torch.arange(n)]).to(device)
        drafts, positions = _draft_after_shrink(spec, setup, models.tokenizer, seeds, temperature)
        corrupted = len({slot for slot, _, _, _ in spec.last_record.collisions()})
        target = torch.stack([setup.target_logits.expand(n, -1),
                              setup.bonus_logits[drafts[:, 0].cpu()]], dim=1).to(device)
        verdict = rejection_sample(target, drafts, SamplingState(spec.idx_mapping, temperature, seeds, positions,
                                                                 spec.draft_logits))
    return Samples(buggy, verdict.tokens[:, 0].cpu(), verdict.num_accepted.cpu(), corrupted, backend, str(device))


def backends_agree(setup: Setup, n: int = 32, *, models=None) -> dict:
    """Rerun the first `n` requests of both paths through the Triton kernels (the interpreter on a
    CPU) and compare with the torch backend, token for token. Returns {path: bool} (empty when no
    Triton kernel can be launched). The same requests agree whatever N they ran with: randomness
    is keyed by seed. On a GPU the buggy path's colliding stores are a race, so only the fixed path
    is sure to agree there."""
    other = kernel_backend()
    if other is None:
        return {}
    out = {}
    for buggy in (False, True):
        a = sample_first_tokens(setup, n, buggy=buggy, models=models, backend="torch")
        b = sample_first_tokens(setup, n, buggy=buggy, models=models, backend=other)
        out["buggy" if buggy else "fixed"] = bool(torch.equal(a.tokens, b.tokens) and
                                                  torch.equal(a.num_accepted, b.num_accepted))
    return out


# -- the proof --------------------------------------------------------------------------------

@dataclass
class Proof:
    setup: Setup
    fixed: Samples
    buggy: Samples
    ns: tuple
    tv_fixed: list = field(default_factory=list)
    tv_buggy: list = field(default_factory=list)
    chi_fixed: ChiSquare | None = None
    chi_buggy: ChiSquare | None = None

    def table(self) -> str:
        lines = [f"{'N':>7}  {'TV fixed':>9}  {'E[TV] exact':>11}  {'TV buggy':>9}"]
        for (n, f), (_, b) in zip(self.tv_fixed, self.tv_buggy, strict=True):
            lines.append(f"{n:>7}  {f:>9.4f}  {expected_tv(self.setup.p, n):>11.4f}  {b:>9.4f}")
        lines.append(f"buggy plateau TV(p, p_buggy) = {self.setup.tv_buggy:.4f}; "
                     f"log-log slope of TV fixed = {loglog_slope(self.tv_fixed):.2f} (exact: -0.5)")
        return "\n".join(lines)

    def decisions(self, alpha: float = 1e-4) -> str:
        """The chi-square decisions only, without the statistics (stable text for a lesson)."""
        lines = []
        for name, chi, s in (("fixed", self.chi_fixed, self.fixed), ("buggy", self.chi_buggy, self.buggy)):
            decision = "REJECTS p" if chi.rejects(alpha) else "does not reject p"
            strength = ", p-value < 1e-6" if chi.pvalue < 1e-6 else ""
            lines.append(f"{name} path, N = {s.n}: chi-square {decision} at alpha = {alpha:g}{strength} "
                         f"({s.corrupted_slots} of {s.n} live q overwritten)")
        return "\n".join(lines)

    def verdict(self, alpha: float = 1e-4) -> str:
        n = self.fixed.n
        lines = []
        for name, chi, s in (("fixed", self.chi_fixed, self.fixed), ("buggy", self.chi_buggy, self.buggy)):
            decision = "rejects p" if chi.rejects(alpha) else "does not reject p"
            lines.append(f"{name}: N = {n}, {chi} -> {decision} at {alpha:g} "
                         f"({s.corrupted_slots} of {n} q overwritten)")
        return "\n".join(lines)


def run_proof(models=None, *, n: int = DEFAULT_N, ns: Sequence[int] | None = None,
              context: str = DEFAULT_CONTEXT, temperature: float = 1.0, backend: str = "torch") -> Proof:
    """Sample both paths once with n requests; TV at each of `ns` and the chi-square test at n."""
    from labkit.models import load_toy_models

    models = models or load_toy_models()
    ns = tuple(ns) if ns is not None else tuple(m for m in (64, 256, 1024, 4096, 16384, 65536) if m <= n)
    setup = make_setup(models, context, temperature=temperature)
    fixed = sample_first_tokens(setup, n, buggy=False, models=models, backend=backend)
    buggy = sample_first_tokens(setup, n, buggy=True, models=models, backend=backend)
    return Proof(setup, fixed, buggy, ns, tv_curve(fixed.tokens, setup.p, ns), tv_curve(buggy.tokens, setup.p, ns),
                 chi_square(fixed.tokens, setup.p), chi_square(buggy.tokens, setup.p))


# -- acceptance and tokens per step ----------------------------------------------------------

def tokens_per_step_theory(a: float, k: int) -> float:
    """Expected tokens per verification step with k drafts and per-draft acceptance a."""
    return float(k + 1) if a >= 1.0 else (1 - a ** (k + 1)) / (1 - a)


@dataclass
class Speedup:
    k: int
    buggy: bool
    acceptance_theory: float  # sum min(p, q) (fixed) or sum q min(1, p / q_stale) (buggy)
    acceptance_measured: float  # accepted / verified drafts
    tokens_per_step: float  # measured
    n: int

    @property
    def tokens_per_step_theory(self) -> float:
        return tokens_per_step_theory(self.acceptance_theory, self.k)


@torch.no_grad()
def speedup_check(setup: Setup, ks: Sequence[int] = (1, 2, 4), *, n: int = 4096, buggy: bool = False,
                  backend: str = "torch", seed_base: int = SEED_BASE) -> list[Speedup]:
    """Acceptance and tokens per step against (1 - a^(k+1)) / (1 - a), at the kernel level.

    A stationary setting in which the formula is exact: every draft position sees the same q and
    every target position the same p (the context is held fixed), so each draft is accepted
    independently with probability a. Each draft step is one launch of the sampling kernel on a
    graph of 2N rows: N live rows, and N padded rows that, before the fix, hold the live rows' slots
    and the stale context's logits and store last (after it, they change nothing).
    """
    from labkit.kernels.gumbel import gumbel_sample
    from labkit.kernels.rejection import rejection_sample
    from labkit.kernels.sampling_state import SamplingState

    results = []
    with backends.using_backend(backend):
        device = backends.default_device()
        V = setup.p.numel()
        temp = setup.temperature
        draft_logits_row = torch.log(setup.q).float() * temp  # logits whose softmax(x / T) is q
        stale_row = torch.log(setup.q_stale).float() * temp
        logits = torch.cat([draft_logits_row.expand(n, -1), stale_row.expand(n, -1)]).to(device)
        slots = torch.arange(n, dtype=torch.int32)
        mapping = torch.cat([slots, slots if buggy else torch.full((n,), -1, dtype=torch.int32)]).to(device)
        temperature = torch.full((n,), temp, device=device)
        seeds = (seed_base + torch.arange(n)).to(device)
        pos0 = torch.full((2 * n,), 100, dtype=torch.int64, device=device)
        for k in ks:
            draft_logits = torch.zeros(n, k, V, device=device)
            drafts = torch.stack([
                gumbel_sample(logits, SamplingState(mapping, temperature, seeds, pos0 + j, draft_logits), draft_step=j,
                              masked=not buggy)[:n]
                for j in range(k)], dim=1)
            target = setup.target_logits.to(device).expand(n, k + 1, -1).contiguous()
            verified_state = SamplingState(mapping[:n], temperature, seeds, pos0[:n], draft_logits)
            verdict = rejection_sample(target, drafts, verified_state)
            accepted = verdict.num_accepted.cpu()
            verified = torch.clamp(accepted + 1, max=k)
            a_theory = setup.acceptance_buggy if buggy else setup.acceptance_fixed
            results.append(Speedup(k, buggy, a_theory, float(accepted.sum() / verified.sum()),
                                   float(verdict.num_emitted.double().mean()), n))
    return results


def format_speedup(rows: Sequence[Speedup]) -> str:
    lines = [f"{'path':<6} {'k':>2}  {'a theory':>8}  {'a measured':>10}  {'tokens/step':>11}  "
             f"{'(1-a^(k+1))/(1-a)':>17}"]
    for r in rows:
        lines.append(f"{'buggy' if r.buggy else 'fixed':<6} {r.k:>2}  {r.acceptance_theory:>8.4f}  "
                     f"{r.acceptance_measured:>10.4f}  {r.tokens_per_step:>11.3f}  {r.tokens_per_step_theory:>17.3f}")
    return "\n".join(lines)
