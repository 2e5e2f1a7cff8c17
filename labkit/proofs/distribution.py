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
:meth:`FixSwitches.before` the padded rows overwrite every live q with draft logits of the stale
context; with the fix they are masked out. The exact distribution the buggy path emits is also
computed (:func:`emitted_distribution`), so the plateau it converges to is known in advance.

Bulk sampling runs on the torch backend (the interpreter runs one program at a time);
:func:`backends_agree` reruns a subset through the Triton kernels and checks token-for-token
equality. :func:`speedup_check` compares acceptance and tokens per step with
(1 - a^(k+1)) / (1 - a) in a setting where that formula is exact.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass, field
from typing import Sequence

import torch

from labkit import backends
from labkit.checks import LabkitInputError

DEFAULT_CONTEXT = "the kind baker lives in the "
DEFAULT_N = 16384
DEFAULT_NS = (256, 1024, 4096, 16384)
SEED_BASE = 20_250_000  # request i of a run has seed SEED_BASE + i
OTHER_SEED_BASE = 90_000_000  # the requests that finish before the batch shrinks


@contextlib.contextmanager
def using_backend(name: str):
    """Temporarily switch the kernel backend ('torch', or the one chosen at import)."""
    previous = backends.set_backend(name)
    try:
        yield
    finally:
        backends.set_backend(previous)


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
        return tv(self.p_buggy, self.p)


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
    backend: str

    @property
    def n(self) -> int:
        return int(self.tokens.numel())

    @property
    def acceptance(self) -> float:
        return float(self.num_accepted.double().mean())


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
    from labkit.kernels.gumbel import WriteTrace
    from labkit.kernels.rejection import rejection_sample
    from labkit.models import encode_context, load_toy_models
    from labkit.speculator import FixSwitches, Speculator

    if n < 1:
        raise LabkitInputError(f"need at least one request, got n={n}")
    models = models or load_toy_models()
    tok = models.tokenizer
    with using_backend(backend):
        device = backends.default_device()
        draft = models.draft
        if next(draft.parameters()).device != device:
            draft = copy.deepcopy(draft).to(device)  # leave the caller's model where it is
        fix = FixSwitches.before() if buggy else FixSwitches.after()
        spec = Speculator(draft, max_num_reqs=2 * n, num_steps=1, capture_sizes=(2 * n,), fix=fix,
                          device=device)
        spec.trace = WriteTrace.empty(2 * n, 1, device)  # who stored each q (checked below)
        window = spec.window
        temperature = torch.full((2 * n,), setup.temperature, device=device)
        seeds = torch.cat([OTHER_SEED_BASE + torch.arange(n), seed_base + torch.arange(n)]).to(device)
        stale = encode_context([tok.encode(setup.stale_context)], window).to(device).expand(2 * n, -1)
        spec.propose(torch.arange(2 * n, dtype=torch.int32), temperature, seeds, stale.contiguous(),
                     torch.full((2 * n,), len(setup.stale_context), device=device))

        live_slots = torch.arange(n, 2 * n, dtype=torch.int32)
        context = encode_context([tok.encode(setup.context)], window).to(device).expand(n, -1)
        positions = torch.full((n,), len(setup.context), dtype=torch.int64, device=device)
        drafts = spec.propose(live_slots, temperature, seeds, context.contiguous(), positions)
        corrupted = int((spec.trace.writer[n:, 0].cpu() != torch.arange(n)).sum())

        target = torch.stack([setup.target_logits.expand(n, -1),
                              setup.bonus_logits[drafts[:, 0].cpu()]], dim=1).to(device)
        verdict = rejection_sample(target, spec.draft_logits, drafts, spec.idx_mapping, temperature, seeds,
                                   positions)
    return Samples(buggy, verdict.tokens[:, 0].cpu(), verdict.num_accepted.cpu(), corrupted, backend)


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


# -- statistics -------------------------------------------------------------------------------

def counts_of(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    return torch.bincount(tokens.flatten().long(), minlength=vocab).double()


def tv(a: torch.Tensor, b: torch.Tensor) -> float:
    """Total-variation distance between two distributions (or between counts, normalised)."""
    a, b = a.double(), b.double()
    return 0.5 * float((a / a.sum() - b / b.sum()).abs().sum())


def expected_tv(p: torch.Tensor, n: int) -> float:
    """E[TV(p_hat, p)] for N exact samples, to leading order: 1/2 sum sqrt(2 p (1 - p) / (pi N))."""
    p = p.double()
    return 0.5 * float(torch.sqrt(2 * p * (1 - p) / (math.pi * n)).sum())


def chi2_sf(stat: float, df: int) -> float:
    """P(X >= stat) for X ~ chi-square(df): the regularised upper incomplete gamma Q(df/2, stat/2)."""
    if df < 1:
        raise LabkitInputError(f"chi-square needs df >= 1, got {df}")
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


@dataclass
class ChiSquare:
    stat: float
    df: int
    pvalue: float
    bins: int

    def rejects(self, alpha: float) -> bool:
        return self.pvalue < alpha

    def __str__(self) -> str:
        pv = "< 1e-300" if self.pvalue == 0.0 else f"= {self.pvalue:.3g}"
        return f"chi-square {self.stat:.1f} on {self.df} df, p-value {pv}"


def chi_square(tokens: torch.Tensor, p: torch.Tensor, min_expected: float = 5.0) -> ChiSquare:
    """Goodness of fit of the tokens to p. Categories whose expected count is below `min_expected`
    are pooled into one bin (and that bin into the smallest other if it is still too small)."""
    p = p.double() / p.double().sum()
    counts = counts_of(tokens, p.numel())
    n = float(counts.sum())
    expected = n * p
    big = expected >= min_expected
    obs = counts[big].tolist()
    exp = expected[big].tolist()
    pooled_obs, pooled_exp = float(counts[~big].sum()), float(expected[~big].sum())
    if pooled_exp > 0 or pooled_obs > 0:
        if pooled_exp >= min_expected or not exp:
            obs.append(pooled_obs)
            exp.append(pooled_exp)
        else:
            i = min(range(len(exp)), key=exp.__getitem__)
            obs[i] += pooled_obs
            exp[i] += pooled_exp
    if len(exp) < 2:
        raise LabkitInputError("chi-square needs at least two bins; draw more samples")
    stat = 0.0
    for o, e in zip(obs, exp):
        stat += math.inf if e == 0 and o > 0 else ((o - e) ** 2 / e if e > 0 else 0.0)
    df = len(exp) - 1
    return ChiSquare(stat, df, chi2_sf(stat, df) if math.isfinite(stat) else 0.0, len(exp))


def tv_curve(tokens: torch.Tensor, p: torch.Tensor, ns: Sequence[int]) -> list[tuple[int, float]]:
    """TV of the first n samples to p, for each n (prefixes of one run: requests are independent)."""
    if max(ns) > tokens.numel():
        raise LabkitInputError(f"asked for n={max(ns)} but only {tokens.numel()} samples were drawn")
    return [(n, tv(counts_of(tokens[:n], p.numel()), p)) for n in ns]


def loglog_slope(curve: Sequence[tuple[int, float]]) -> float:
    """Least-squares slope of log TV against log N (-0.5 for exact sampling)."""
    xs = [math.log(n) for n, _ in curve]
    ys = [math.log(max(t, 1e-12)) for _, t in curve]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


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
        for (n, f), (_, b) in zip(self.tv_fixed, self.tv_buggy):
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
    graph of 2N rows: N live rows, and N padded rows that are masked (-1) after the fix or, before
    it, hold the live rows' slots and the stale context's logits and store last.
    """
    from labkit.kernels.gumbel import gumbel_sample
    from labkit.kernels.rejection import rejection_sample

    results = []
    with using_backend(backend):
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
                gumbel_sample(logits, mapping, temperature, seeds, pos0 + j, draft_logits, j, masked=not buggy)[:n]
                for j in range(k)], dim=1)
            target = setup.target_logits.to(device).expand(n, k + 1, -1).contiguous()
            verdict = rejection_sample(target, draft_logits, drafts, mapping[:n], temperature, seeds, pos0[:n])
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


# -- plots ------------------------------------------------------------------------------------

def plot_tv_vs_n(proof: Proof, ax=None):
    """TV(p_hat, p) against N on log-log axes: the fixed path follows the exact-sampling curve
    (slope -1/2); the buggy path flattens at TV(p, p_buggy)."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
    else:
        fig = ax.figure
    ns = [n for n, _ in proof.tv_fixed]
    grid = [ns[0] * (ns[-1] / ns[0]) ** (i / 50) for i in range(51)]
    ax.loglog(grid, [expected_tv(proof.setup.p, n) for n in grid], "--", color="0.5",
              label="exact sampling, E[TV] ~ 1/sqrt(N)")
    ax.loglog(ns, [t for _, t in proof.tv_fixed], "o-", color="tab:blue", label="fixed (fill -1 + mask)")
    ax.loglog(ns, [t for _, t in proof.tv_buggy], "s-", color="tab:red", label="buggy (stale slots)")
    ax.axhline(proof.setup.tv_buggy, ls=":", color="tab:red", label="exact TV(p, p_buggy)")
    ax.set_xlabel("requests N (one emitted token each)")
    ax.set_ylabel("TV(empirical, target p)")
    ax.set_title(f"first token after {proof.setup.context!r}")
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_distributions(proof: Proof, tokenizer=None, top: int = 10, ax=None):
    """Bars of p, the fixed path's and the buggy path's empirical distributions on the top tokens."""
    import matplotlib.pyplot as plt

    from labkit.models import CharTokenizer

    tokenizer = tokenizer or CharTokenizer()
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.2, 3.6))
    else:
        fig = ax.figure
    V = proof.setup.p.numel()
    p = proof.setup.p
    fixed = counts_of(proof.fixed.tokens, V) / proof.fixed.n
    buggy = counts_of(proof.buggy.tokens, V) / proof.buggy.n
    order = torch.argsort(torch.maximum(p, buggy), descending=True)[:top].tolist()
    xs = list(range(len(order)))
    width = 0.27
    ax.bar([x - width for x in xs], [float(p[i]) for i in order], width, color="0.35", label="target p (exact)")
    ax.bar(xs, [float(fixed[i]) for i in order], width, color="tab:blue", label="fixed, empirical")
    ax.bar([x + width for x in xs], [float(buggy[i]) for i in order], width, color="tab:red", label="buggy, empirical")
    ax.set_xticks(xs, [repr(tokenizer.decode([i])) if i else "pad" for i in order])
    ax.set_ylabel("probability")
    ax.set_title(f"next character after {proof.setup.context!r}, N = {proof.fixed.n}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
