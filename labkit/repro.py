"""The reproduction bench: the same prompts through eager, buggy and fixed modes, compared token by token.

A mode is a drafter (autoregressive or DFlash-style), a draft sampling (probabilistic or greedy),
graphs on or off, and the fix switches. Every mode is compared with the eager run of the same
drafter and draft sampling: with per-request seeds, a response that differs from it by a single
token can only have been changed by the stale-slot bug. "corrupted" counts those responses.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace

from labkit import backends
from labkit.checks import LabkitInputError, PaddedSlotOutOfBoundsError
from labkit.corpus import sample_prompts, word_share_in_corpus
from labkit.engine import Engine, RunResult, make_requests
from labkit.models import ToyModels, load_toy_models
from labkit.modes import DEFAULT_MODES, MODES, engine_config_for, resolve_modes


@dataclass
class BenchConfig:
    prompts: int = 50
    seed: int = 0
    num_steps: int = 4
    max_num_reqs: int = 16
    capture_sizes: tuple = (1, 2, 4, 8, 16)
    min_new_tokens: int = 24
    max_new_tokens: int = 64
    arrivals_per_step: float = 0.5


@dataclass
class ModeResult:
    mode: str
    reference: str
    responses: int = 0
    identical_to_eager: int = 0
    corrupted: int = 0
    acceptance_rate: float | None = None
    mean_target_nll: float | None = None
    tokens_per_s: float | None = None
    corpus_word_share: float | None = None
    wall_s: float = 0.0
    error: str | None = None
    corrupted_rids: list[int] = field(default_factory=list)


@dataclass
class BenchResult:
    config: BenchConfig
    modes: dict[str, ModeResult]
    texts: dict[str, dict[int, str]]  # mode -> rid -> generated text
    prompts: list[str]
    wall_s: float

    def to_json(self) -> dict:
        keys = ("responses", "identical_to_eager", "corrupted", "acceptance_rate", "mean_target_nll",
                "tokens_per_s", "corpus_word_share", "wall_s", "reference", "error")
        return {
            "modes": {name: {k: _finite(getattr(r, k)) for k in keys} for name, r in self.modes.items()},
            "config": {**asdict(self.config), "capture_sizes": list(self.config.capture_sizes),
                       **backends.describe(), "total_wall_s": round(self.wall_s, 2)},
        }


def _finite(value):
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


def bench_requests(cfg: BenchConfig, tokenizer, prompts: list[str] | None = None) -> list:
    """The bench's workload: fresh requests (per-request seeds, lengths, arrival steps) every call."""
    prompts = sample_prompts(cfg.prompts, cfg.seed) if prompts is None else prompts
    return make_requests(tokenizer, prompts, cfg.seed, min_new_tokens=cfg.min_new_tokens,
                         max_new_tokens=cfg.max_new_tokens, arrivals_per_step=cfg.arrivals_per_step)


def run_mode(mode_name: str, cfg: BenchConfig, models: ToyModels, prompts: list[str],
             progress=None, device=None) -> RunResult:
    """One mode over the bench's workload (fresh requests, same seeds every time)."""
    config = engine_config_for(mode_name, max_num_reqs=cfg.max_num_reqs, num_steps=cfg.num_steps,
                               capture_sizes=cfg.capture_sizes)
    engine = Engine(models, config, device=device)
    return engine.generate(bench_requests(cfg, models.tokenizer, prompts), progress=progress)


def run_bench(cfg: BenchConfig = BenchConfig(), modes=DEFAULT_MODES, *, models: ToyModels | None = None,
              progress: bool = True, device=None) -> BenchResult:
    if cfg.prompts < 1:
        raise LabkitInputError(f"--prompts must be at least 1, got {cfg.prompts}")
    if cfg.max_num_reqs > cfg.capture_sizes[-1]:
        cfg = replace(cfg, max_num_reqs=cfg.capture_sizes[-1])
    names = resolve_modes(modes)
    device = device or backends.default_device()
    models = models or load_toy_models(device)
    prompts = sample_prompts(cfg.prompts, cfg.seed)
    start = time.perf_counter()
    runs: dict[str, RunResult] = {}
    results: dict[str, ModeResult] = {}
    texts: dict[str, dict[int, str]] = {}
    for name in names:
        mode = MODES[name]
        res = ModeResult(mode=name, reference=mode.reference)
        reporter = _Progress(name, cfg.prompts) if progress else None
        try:
            run = run_mode(name, cfg, models, prompts, progress=reporter, device=device)
        except PaddedSlotOutOfBoundsError as err:
            res.error = str(err)
            results[name] = res
            if reporter:
                reporter.finish("refused (see the table)")
            continue
        if reporter:
            reporter.finish(f"{run.wall_s:.1f} s")
        runs[name] = run
        ref = runs[mode.reference].outputs
        res.responses = len(run.outputs)
        res.corrupted_rids = [rid for rid, toks in run.outputs.items() if toks != ref[rid]]
        res.corrupted = len(res.corrupted_rids)
        res.identical_to_eager = res.responses - res.corrupted
        res.acceptance_rate = run.acceptance_rate
        res.mean_target_nll = run.mean_target_nll
        res.tokens_per_s = run.tokens_per_s
        res.wall_s = run.wall_s
        texts[name] = {rid: models.tokenizer.decode(t) for rid, t in run.outputs.items()}
        res.corpus_word_share = word_share_in_corpus(" ".join(texts[name].values()))
        results[name] = res
    return BenchResult(cfg, results, texts, prompts, time.perf_counter() - start)


class _Progress:
    """Requests finished per mode, on stderr: one updating line on a terminal, a few lines otherwise."""

    def __init__(self, mode: str, total: int):
        self.mode, self.total = mode, total
        self.tty = sys.stderr.isatty()
        self.last_quarter = -1
        self.start = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        msg = f"labkit repro: {self.mode:<20} {done:>4}/{total} requests"
        if self.tty:
            print("\r" + msg, end="", file=sys.stderr, flush=True)
        elif 4 * done // total > self.last_quarter:
            self.last_quarter = 4 * done // total
            print(msg, file=sys.stderr, flush=True)

    def finish(self, note: str) -> None:
        msg = f"labkit repro: {self.mode:<20} done, {note}"
        print(("\r" if self.tty else "") + msg, file=sys.stderr, flush=True)


# -- presentation -------------------------------------------------------------------------------

def format_table(result: BenchResult) -> str:
    head = ["mode", "responses", "identical", "corrupted", "accept", "target NLL", "words ok", "tok/s"]
    rows = []
    for name, r in result.modes.items():
        if r.error:
            rows.append([name, "-", "-", "-", "-", "-", "-", "refused: unmasked kernel met slot -1"])
            continue
        rows.append([
            name, str(r.responses), f"{r.identical_to_eager}/{r.responses}", str(r.corrupted),
            f"{r.acceptance_rate:.3f}", f"{r.mean_target_nll:.3f}", f"{r.corpus_word_share:.1%}",
            f"{r.tokens_per_s:.0f}",
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head[:-1])]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=False)) + "  " + head[-1]]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1])
    return "\n".join(lines)


def corrupted_examples(result: BenchResult, mode: str, limit: int = 3) -> list[tuple[int, str, str, str]]:
    """(rid, prompt, reference text, this mode's text) for the first corrupted responses."""
    res = result.modes.get(mode)
    if res is None or res.error or mode not in result.texts:
        return []
    ref = result.texts[res.reference]
    return [(rid, result.prompts[rid], ref[rid], result.texts[mode][rid]) for rid in res.corrupted_rids[:limit]]


def format_examples(result: BenchResult, mode: str, limit: int = 3, width: int = 44) -> str:
    examples = corrupted_examples(result, mode, limit)
    if not examples:
        return f"{mode}: no corrupted responses to show"
    ref_name = result.modes[mode].reference
    lines = [f"{'':4}{ref_name:<{width}}  {mode}"]
    for rid, prompt, ref, bad in examples:
        lines.append(f"#{rid:<3}prompt: {prompt!r}")
        for a, b in itertools.zip_longest(_wrap(ref, width), _wrap(bad, width), fillvalue=""):
            lines.append(f"{'':4}{a:<{width}}  {b}")
    return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    text = text.replace("\n", " / ")
    return [text[i:i + width] for i in range(0, len(text), width)] or [""]


def report(result: BenchResult) -> str:
    parts = [format_table(result)]
    bad = [m for m, r in result.modes.items() if r.corrupted and not r.error]
    for mode in bad[:1]:
        parts += ["", f"Corrupted responses, {result.modes[mode].reference} vs {mode}:",
                  format_examples(result, mode)]
    for name, r in result.modes.items():
        if r.error:
            parts += ["", f"{name}: {r.error}"]
    cfg = result.config
    parts += ["", f"{cfg.prompts} prompts, seed {cfg.seed}, k={cfg.num_steps}, max_num_reqs="
              f"{cfg.max_num_reqs}, capture sizes {list(cfg.capture_sizes)}, backend {backends.backend()}, "
              f"{result.wall_s:.1f} s"]
    return "\n".join(parts)
