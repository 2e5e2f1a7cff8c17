"""The reproduction bench: the same prompts through eager, buggy and fixed modes, compared token by token.

A mode is a drafter (autoregressive or DFlash-style), a draft sampling (probabilistic or greedy),
graphs on or off, and the fix switches (see :mod:`labkit.bench.modes`). Every mode is compared with the
eager run of the same drafter and draft sampling; :data:`LEGEND` says what the counts mean.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import textwrap
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

from labkit import backends
from labkit.bench.modes import DEFAULT_MODES, MODES, resolve_modes
from labkit.config import DrafterConfig
from labkit.corpus import sample_prompts, word_share_in_corpus
from labkit.engine import Engine, RunResult, make_requests
from labkit.errors import LabkitInputError, PaddedSlotOutOfBoundsError
from labkit.models import ToyModels, load_toy_models, one_thread_on_cpu

# What the table's words mean; printed under the table, in `repro --help` and in the JSON record.
LEGEND = {
    "identical": "responses equal, token for token, to the eager run of the same drafter and draft sampling "
                 "(same prompts, same per-request seeds).",
    "corrupted": "responses that differ from that eager run in at least one token. The seeds fix every "
                 "random choice and a toy model's row does not depend on the batch size, so only the "
                 "stale-slot bug (a padded row's q stored over a live request's q) can change a token.",
    "refused": "the mode has the PR's host part without its kernel part: the kit stops before a launch "
               "that would read and write out of bounds, so there are no responses to count.",
}

# Which code produced the numbers, and how to run the Triton source: the footer and the JSON say both.
BACKEND_MEANS = {
    "torch": "the kernels' pure-torch references (same rows, slots and store order as the Triton kernels)",
    "interpreter": "the Triton kernels' source, run on the CPU by Triton's interpreter (programs one after "
                   "another, in grid order)",
    "triton": "the Triton kernels, compiled for the GPU, under real CUDA graphs",
}
TRITON_SOURCE = {
    "torch": "not run here; run it with --backend interpreter (Triton's CPU interpreter, much slower) or, "
             "on a CUDA GPU, --backend triton (compiled)",
    "interpreter": "run here, interpreted; --backend triton compiles it on a CUDA GPU; --backend torch runs "
                   "the torch references instead (the same counts, much faster)",
    "triton": "run here, compiled; --backend interpreter runs it on the CPU; --backend torch runs the torch "
              "references instead",
}

DIFF_MARK = ">>"  # where a response first differs from its eager reference (ASCII: any terminal shows it)


@dataclass
class BenchConfig:
    """The bench's workload, and the shapes every mode runs at (its k, slots and capture sizes;
    each mode brings its own drafter, graphs, fix and draft sampling)."""

    prompts: int = 50
    seed: int = 0
    min_new_tokens: int = 24
    max_new_tokens: int = 64
    arrivals_per_step: float = 0.5
    shapes: DrafterConfig = DrafterConfig()

    def to_json(self) -> dict:
        workload = {k: v for k, v in asdict(self).items() if k != "shapes"}
        s = self.shapes
        return {**workload, "k": s.k, "max_num_reqs": s.max_num_reqs, "capture_sizes": list(s.capture_sizes)}


@dataclass
class ModeResult:
    """One mode's counts. A refused mode has an `error` (the reason) and None for its counts."""

    mode: str
    reference: str
    responses: int = 0
    identical_to_eager: int | None = 0
    corrupted: int | None = 0
    acceptance_rate: float | None = None
    mean_target_nll: float | None = None
    tokens_per_s: float | None = None
    corpus_word_share: float | None = None
    wall_s: float = 0.0
    error: str | None = None
    corrupted_rids: list[int] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return self.error is not None

    def to_json(self) -> dict:
        keys = ("reference", "responses", "identical_to_eager", "corrupted", "acceptance_rate", "mean_target_nll",
                "tokens_per_s", "corpus_word_share", "wall_s")
        record = {k: _finite(getattr(self, k)) for k in keys}
        if self.refused:
            # Nothing ran, so nothing was counted: null, not 0 (which would read as "not corrupted").
            record.update(identical_to_eager=None, corrupted=None)
        return {**record, "refused": self.refused, "error": self.error}


@dataclass
class BenchResult:
    config: BenchConfig
    modes: dict[str, ModeResult]
    texts: dict[str, dict[int, str]]  # mode -> rid -> generated text
    prompts: list[str]
    wall_s: float
    backend: str = field(default_factory=backends.backend)  # the backend the modes ran under

    def to_json(self) -> dict:
        return {
            "modes": {name: r.to_json() for name, r in self.modes.items()},
            "config": {**self.config.to_json(), **backends.describe(), "backend": self.backend,
                       "total_wall_s": round(self.wall_s, 2)},
            "backend": {"name": self.backend, "means": BACKEND_MEANS[self.backend],
                        "triton_source": TRITON_SOURCE[self.backend]},
            "legend": dict(LEGEND),
        }


def _finite(value):
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


# -- running ------------------------------------------------------------------------------------

def bench_requests(cfg: BenchConfig, tokenizer, prompts: list[str] | None = None) -> list:
    """The bench's workload: fresh requests (per-request seeds, lengths, arrival steps) every call."""
    prompts = sample_prompts(cfg.prompts, cfg.seed) if prompts is None else prompts
    return make_requests(tokenizer, prompts, cfg.seed, min_new_tokens=cfg.min_new_tokens,
                         max_new_tokens=cfg.max_new_tokens, arrivals_per_step=cfg.arrivals_per_step)


def run_mode(mode_name: str, cfg: BenchConfig, models: ToyModels, prompts: list[str],
             progress=None, device=None) -> RunResult:
    """One mode over the bench's workload (fresh requests, same seeds every time)."""
    engine = Engine(models, MODES[mode_name].config.at_shapes_of(cfg.shapes), device=device)
    return engine.generate(bench_requests(cfg, models.tokenizer, prompts), progress=progress)


def _checked(cfg: BenchConfig) -> BenchConfig:
    if isinstance(cfg.prompts, bool) or not isinstance(cfg.prompts, int) or cfg.prompts < 1:
        raise LabkitInputError(f"prompts must be a positive integer, got {cfg.prompts!r}")
    if cfg.shapes.max_num_reqs > cfg.shapes.capture_sizes[-1]:
        # More live requests than the largest graph would run eagerly: cap them at the graph.
        cfg = replace(cfg, shapes=replace(cfg.shapes, max_num_reqs=cfg.shapes.capture_sizes[-1]))
    return cfg


def _score(name: str, run: RunResult, reference: RunResult, texts: dict[int, str]) -> ModeResult:
    res = ModeResult(mode=name, reference=MODES[name].reference, responses=len(run.outputs))
    res.corrupted_rids = [rid for rid, toks in run.outputs.items() if toks != reference.outputs[rid]]
    res.corrupted = len(res.corrupted_rids)
    res.identical_to_eager = res.responses - res.corrupted
    res.acceptance_rate = run.acceptance_rate
    res.mean_target_nll = run.mean_target_nll
    res.tokens_per_s = run.tokens_per_s
    res.wall_s = run.wall_s
    res.corpus_word_share = word_share_in_corpus(" ".join(texts.values()))
    return res


def run_bench(cfg: BenchConfig = BenchConfig(), modes=DEFAULT_MODES, *, models: ToyModels | None = None,
              progress: bool | Callable[[str, int, int], None] = True, device=None) -> BenchResult:
    """Run `modes` (plus the eager references they are compared with) over the same workload.

    `progress`: True prints requests finished per mode on stderr; a callable is called as
    ``progress(mode, done, total)`` (e.g. :func:`labkit.viz.progress.progress_bars` in a notebook).
    """
    cfg = _checked(cfg)
    names = resolve_modes(modes)
    if device is None:
        # Given models decide where the run happens (the torch backend runs on CUDA tensors too).
        device = next(models.target.parameters()).device if models is not None else backends.default_device()
    models = models or load_toy_models(device)
    prompts = sample_prompts(cfg.prompts, cfg.seed)
    start, backend = time.perf_counter(), backends.backend()
    runs: dict[str, RunResult] = {}
    results: dict[str, ModeResult] = {}
    texts: dict[str, dict[int, str]] = {}
    for name in names:  # references first: every mode is scored against one already run
        reporter = _reporter(progress, name, cfg.prompts)
        try:
            with one_thread_on_cpu(device):
                runs[name] = run_mode(name, cfg, models, prompts, progress=reporter, device=device)
        except PaddedSlotOutOfBoundsError as err:
            results[name] = ModeResult(name, MODES[name].reference, identical_to_eager=None, corrupted=None,
                                       error=str(err))
            if isinstance(reporter, _Progress):
                reporter.finish("refused (see the table)")
            continue
        if isinstance(reporter, _Progress):
            reporter.finish(f"{runs[name].wall_s:.1f} s")
        texts[name] = {rid: models.tokenizer.decode(t) for rid, t in runs[name].outputs.items()}
        results[name] = _score(name, runs[name], runs[MODES[name].reference], texts[name])
    return BenchResult(cfg, results, texts, prompts, time.perf_counter() - start, backend)


def _reporter(progress, mode: str, total: int):
    if callable(progress):
        return lambda done, total_: progress(mode, done, total_)
    return _Progress(mode, total) if progress else None


class _Progress:
    """Requests finished per mode, on stderr: one updating line on a terminal, a few lines otherwise."""

    def __init__(self, mode: str, total: int):
        self.mode, self.total = mode, total
        self.tty = sys.stderr.isatty()
        self.last_quarter = -1

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

def _table_row(name: str, r: ModeResult) -> list[str]:
    if r.refused:
        return [name, r.reference, "0", "-", "refused", "-", "-", "-", "-"]
    return [name, r.reference, str(r.responses), f"{r.identical_to_eager}/{r.responses}", str(r.corrupted),
            f"{r.acceptance_rate:.3f}", f"{r.mean_target_nll:.3f}", f"{r.corpus_word_share:.1%}",
            f"{r.tokens_per_s:.0f}"]


def format_table(result: BenchResult) -> str:
    """One line per mode; a refused mode reads "refused" (its reason is printed under the table)."""
    head = ["mode", "reference", "responses", "identical", "corrupted", "accept", "target NLL", "words ok", "tok/s"]
    rows = [head] + [_table_row(name, r) for name, r in result.modes.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def first_difference(a: str, b: str) -> int | None:
    """Where `b` first differs from `a` (one ending early counts), or None if they are equal."""
    return None if a == b else len(os.path.commonprefix([a, b]))


def _marked_lines(text: str, at: int | None, width: int) -> list[str]:
    """`text` wrapped on word boundaries, with DIFF_MARK inserted where it first differs."""
    if at is not None:
        text = text[:at] + DIFF_MARK + text[at:]
    text = text.replace("\n", " / ")
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def corrupted_examples(result: BenchResult, mode: str, limit: int = 3) -> list[tuple[int, str, str, str]]:
    """(rid, prompt, reference text, this mode's text) for the first corrupted responses."""
    res = result.modes.get(mode)
    if res is None or res.refused or mode not in result.texts:
        return []
    ref = result.texts[res.reference]
    return [(rid, result.prompts[rid], ref[rid], result.texts[mode][rid]) for rid in res.corrupted_rids[:limit]]


def format_examples(result: BenchResult, mode: str, limit: int = 3, width: int = 44) -> str:
    """The first corrupted responses of `mode` beside its eager reference, `>>` where they part."""
    examples = corrupted_examples(result, mode, limit)
    if not examples:
        return f"{mode}: no corrupted responses to show"
    ref_name = result.modes[mode].reference
    lines = [f"{'':4}{ref_name:<{width}}  {mode}"]
    for rid, prompt, ref, bad in examples:
        at = first_difference(ref, bad)
        lines.append(f"#{rid:<3}prompt: {prompt!r}, first differs at character {at}")
        pairs = itertools.zip_longest(_marked_lines(ref, at, width), _marked_lines(bad, at, width), fillvalue="")
        lines += [f"{'':4}{a:<{width}}  {b}".rstrip() for a, b in pairs]
    return "\n".join(lines)


def _legend_lines(words, width: int = 100) -> list[str]:
    lines = []
    for word in words:
        lines += textwrap.wrap(f"{word}: {LEGEND[word]}", width, subsequent_indent="  ")
    lines += textwrap.wrap("accept: share of draft tokens the target accepted; target NLL: mean negative "
                           "log-likelihood of the emitted tokens under the target model; words ok: share of "
                           "generated words that are corpus words.", width, subsequent_indent="  ")
    return lines


def footer(result: BenchResult) -> list[str]:
    """What the numbers mean, the run's shapes, and which backend produced them."""
    cfg, name = result.config, result.backend
    run = (f"{cfg.prompts} prompts, seed {cfg.seed}, k={cfg.shapes.k}, max_num_reqs={cfg.shapes.max_num_reqs}, "
           f"capture sizes {list(cfg.shapes.capture_sizes)}, {result.wall_s:.1f} s")
    words = ["identical", "corrupted"] + (["refused"] if any(r.refused for r in result.modes.values()) else [])
    return [*_legend_lines(words), run,
            *textwrap.wrap(f"backend {name}: {BACKEND_MEANS[name]}. Triton source: {TRITON_SOURCE[name]}.", 100,
                           subsequent_indent="  ")]


def report(result: BenchResult) -> str:
    """The table, side-by-side samples of the first corrupted mode, refusals, and the footer."""
    parts = [format_table(result)]
    bad = [m for m, r in result.modes.items() if r.corrupted and not r.refused]
    for mode in bad[:1]:
        parts += ["", f"Corrupted responses, {result.modes[mode].reference} vs {mode} "
                  f"('{DIFF_MARK}' marks where each first differs from {result.modes[mode].reference}; "
                  "' / ' is a line break):", format_examples(result, mode)]
    for name, r in result.modes.items():
        if r.refused:
            parts += ["", *textwrap.wrap(f"{name} refused: {r.error}", 100, subsequent_indent="  ")]
    return "\n".join([*parts, "", *footer(result)])
