"""q used vs q drawn: the distribution a draft token was drawn from, and the one verification divided by.

    q_pair(launch, slot, step)        -> QPair    both q of one (slot, draft step), from a LaunchRecord
    timeline_q_pair(run, ...)         -> QPair    the same for a step of a timeline run (default:
                                                  docs/MECHANICS.md's), with the drafted token and the target's p
    q_used_vs_drawn(launch, slot, step) -> Figure bars over the vocabulary
    distribution_bars(target, empirical) -> Figure a target distribution next to sampled ones

The rejection sampler accepts a draft token x with probability min(1, p(x) / q(x)). Before the fix
a padded row can overwrite q after the token was drawn, so q(x) is not the probability x was
drawn with, and the accepted tokens no longer follow p.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from labkit.errors import LabkitInputError
from labkit.models import ALPHABET
from labkit.proofs.stats import total_variation
from labkit.viz.style import BAD_COLOR, OK_COLOR, P_COLOR, QUIET_COLOR, ROW_COLOR, add_caption, legible, run_caption


def token_labels(alphabet: str = ALPHABET) -> list[str]:
    """Tick labels for the toy vocabulary (ASCII only, so every font has the glyphs)."""
    names = {"\n": "nl", " ": "sp"}
    return ["pad"] + [names.get(c, c) for c in alphabet]


@dataclass
class QPair:
    slot: int
    step: int
    live_row: int  # the request's batch row
    own_row: int  # the (sample) row that drew the draft token: LaunchRecord.own_sample_row(live_row, step)
    writer: int  # the row whose store is in draft_logits[slot, step] (-1: none)
    q_drawn: np.ndarray  # softmax(row_logits[own_row] / T): what the token was sampled from
    q_used: np.ndarray  # softmax(draft_logits[slot, step]): what the rejection sampler reads
    samples_per_req: int = 1
    token: int | None = None  # the draft token the live row drew, when known
    p: np.ndarray | None = None  # the target's distribution at that position (same temperature), when known

    @property
    def total_variation(self) -> float:
        return total_variation(torch.from_numpy(self.q_drawn), torch.from_numpy(self.q_used))

    def acceptance(self, q: np.ndarray) -> float | None:
        """min(1, p(x) / q(x)) for the drafted token x: the chance the verifier keeps it, under `q`."""
        if self.token is None or self.p is None:
            return None
        return float(min(1.0, self.p[self.token] / q[self.token])) if q[self.token] > 0 else 1.0


def _softmax(logits: torch.Tensor, temp: float) -> np.ndarray:
    logits = logits.detach().to("cpu", torch.float64)
    return torch.softmax(logits / temp if temp != 0.0 else logits, dim=-1).numpy()


def q_pair(launch, slot: int, step: int, *, token: int | None = None, p: np.ndarray | None = None) -> QPair:
    """The two distributions for one (slot, draft step) of a launch (AR or DFlash-style).

    `token` and `p` (the drafted token, the target's distribution) are kept for the figure if given.
    """
    if launch.draft_logits is None or launch.row_logits is None:
        raise LabkitInputError("this launch kept no q (greedy drafting) or no row logits (record=False)")
    if slot not in launch.live_slots:
        raise LabkitInputError(f"slot {slot} is not live in this launch (live slots: {launch.live_slots})")
    live_row = launch.live_slots.index(slot)
    temp = float(launch.temperature[slot])
    drawn = _softmax(launch.row_logits[live_row, step], temp)
    used = _softmax(launch.draft_logits[slot, step], 1.0)  # the kernel stores logits / T already
    writer = int(launch.writer[slot, step]) if launch.writer is not None else -1
    return QPair(slot, step, live_row, launch.own_sample_row(live_row, step), writer, drawn, used,
                 launch.samples_per_req, token, None if p is None else np.asarray(p, dtype=np.float64))


def _target_p(models, context: torch.Tensor, drafted: list[int], temp: float) -> np.ndarray:
    """The target's distribution after `context` (the drafter's window, padding dropped) + `drafted`."""
    from labkit.models import encode_context

    pad = models.tokenizer.pad_id
    history = [int(t) for t in context.tolist() if int(t) != pad] + drafted
    target_in = encode_context([history], models.target.context_len, pad).to(next(models.target.parameters()).device)
    with torch.no_grad():
        return _softmax(models.target(target_in)[0, 0], temp)


def _first_shared_slot(record) -> int:
    """The first live slot a padded row also points at (whoever wins the race), else the first live slot."""
    spr = record.samples_per_req
    padded = record.mapping[record.num_reqs * spr: record.rows * spr].tolist()
    return next((int(s) for s in padded if int(s) in record.live_slots), record.live_slots[0])


def timeline_q_pair(run=None, *, launch: int | None = None, slot: int | None = None, step: int = 0) -> QPair:
    """q used vs drawn at one launch of a timeline run (default: docs/MECHANICS.md's, before the fix).

    `run` is a :func:`labkit.bench.runs.timeline_run`, which keeps each step's inputs and drafted tokens;
    `launch` indexes its launches (default: the last).
    `p` is the target model's distribution given the same characters the drafter saw (its
    16-character window) plus the tokens drafted before `step`. `slot` defaults to the first live
    slot a padded row also stores to.
    """
    if run is None:
        from labkit.bench.runs import timeline_run

        run = timeline_run()
    if run.error or not run.drafts:
        raise LabkitInputError("timeline_q_pair reads a timeline_run that ran (it keeps inputs and drafts)")
    from labkit.backends import default_device
    from labkit.models import shared_toy_models

    launch = len(run.launches) - 1 if launch is None else launch
    record, inputs, drafts = run.launches[launch], run.inputs[launch], run.drafts[launch]
    slot = slot if slot is not None else _first_shared_slot(record)
    if slot not in record.live_slots:
        raise LabkitInputError(f"slot {slot} is not live in this launch (live slots: {record.live_slots})")
    live_row = record.live_slots.index(slot)
    p = _target_p(shared_toy_models(default_device()), inputs.contexts[live_row].cpu(),
                  drafts[live_row, :step].tolist(), float(inputs.temperature[slot]))
    return q_pair(record, slot, step, token=int(drafts[live_row, step]), p=p)


def _verdict(pair: QPair) -> str:
    if not np.array_equal(pair.q_drawn, pair.q_used):
        return f"total variation distance {pair.total_variation:.2f}"
    if pair.writer >= 0 and pair.writer != pair.own_row:
        return "identical: the padded row's stale input matched this request's"
    return "identical"


def _mark_token(ax, pair: QPair, labels: list[str], same: bool, top: float) -> None:
    """Shade the drafted token's column and say, next to it, how likely the verifier keeps it under each q."""
    x = pair.token
    ax.axvspan(x - 0.5, x + 0.5, color="#ffe08a", alpha=0.6, zorder=0, label=f"drafted token '{labels[x]}'")
    if pair.p is None:
        return
    used, drawn = pair.acceptance(pair.q_used), pair.acceptance(pair.q_drawn)
    text = (f"drafted '{labels[x]}': the verifier keeps it\nwith probability min(1, p/q) = {used:.2f}"
            + ("" if same else f"\n(with the q it was drawn from: {drawn:.2f})"))
    right_half = x > len(pair.q_drawn) / 2
    ax.annotate(text, xy=(x, top), xytext=(-10 if right_half else 10, 0), textcoords="offset points",
                ha="right" if right_half else "left", va="top", fontsize=legible(8, ax.figure),
                color="black" if same else BAD_COLOR)


def draw_q(ax, pair: QPair, *, labels: list[str] | None = None, title: str | None = None) -> None:
    """Bars per token: p (if known), the q the draft was drawn from, the q verification used."""
    vocab = len(pair.q_drawn)
    labels = labels or (token_labels() if vocab == len(ALPHABET) + 1 else [str(i) for i in range(vocab)])
    same = np.array_equal(pair.q_drawn, pair.q_used)
    row_word = "sample row" if pair.samples_per_req > 1 else "row"
    series = [] if pair.p is None else [(pair.p, P_COLOR, "p: the target's distribution")]
    series.append((pair.q_drawn, ROW_COLOR, f"q the draft was drawn from ({row_word} {pair.own_row}'s logits)"))
    writer = "nobody" if pair.writer < 0 else f"{row_word} {pair.writer}"
    series.append((pair.q_used, OK_COLOR if same else BAD_COLOR, f"q the rejection sampler used (stored by {writer})"))
    width = 0.8 / len(series)
    x = np.arange(vocab)
    for i, (values, color, label) in enumerate(series):
        ax.bar(x - 0.4 + width * (i + 0.5), values, width=width, color=color, label=label)
    top = 1.3 * max(float(v.max()) for v, _, _ in series)
    if pair.token is not None:
        _mark_token(ax, pair, labels, same, top)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=legible(7, ax.figure))
    ax.set_xlabel("token of the toy vocabulary (sp: space, nl: line break, pad: padding)")
    ax.set_ylabel("probability")
    ax.set_xlim(-0.7, vocab - 0.3)
    ax.set_ylim(0, top)
    ax.set_title(title or f"slot {pair.slot}, draft step {pair.step}: {_verdict(pair)}",
                 fontsize=legible(9, ax.figure))
    token_right = pair.token is not None and pair.token > vocab / 2
    ax.legend(fontsize=legible(7, ax.figure), loc="upper left" if token_right else "upper right", frameon=False)


def q_used_vs_drawn(launch_or_pair, slot: int | None = None, step: int | None = None, *, title: str | None = None,
                    source: str | None = None) -> Figure:
    """Bars over the vocabulary: the q the token was drawn from vs the q verification used.

    Pass a LaunchRecord with `slot` and `step`, or a :class:`QPair` (e.g. from :func:`timeline_q_pair`,
    which adds the drafted token and p). `source`: the provenance line (default: backend in use).
    """
    pair = launch_or_pair if isinstance(launch_or_pair, QPair) else q_pair(launch_or_pair, slot, step)
    fig = Figure(figsize=(10.0, 3.9), layout="constrained")
    draw_q(fig.add_subplot(), pair, title=title)
    return add_caption(fig, source or run_caption())


def distribution_bars(target: np.ndarray, empirical: dict[str, np.ndarray], *, labels=None,
                      title: str | None = None, xlabel: str = "token", source: str | None = None) -> Figure:
    """A target distribution next to one or more empirical ones (e.g. correct vs shared noise).

    Colours in order: grey for the target, then green, red, blue, ...: put the right sampler first
    and the wrong one (whose law is corrupted) second.
    """
    target = np.asarray(target, dtype=float)
    x = np.arange(len(target))
    series = [("target p", target)] + [(k, np.asarray(v, dtype=float)) for k, v in empirical.items()]
    width = 0.8 / len(series)
    colors = [P_COLOR, OK_COLOR, BAD_COLOR, ROW_COLOR, QUIET_COLOR]
    fig = Figure(figsize=(8.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for i, (name, values) in enumerate(series):
        ax.bar(x - 0.4 + width * (i + 0.5), values, width=width, color=colors[i % len(colors)], label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(labels or [str(i) for i in x])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("probability")
    ax.legend(fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return add_caption(fig, source or run_caption())
