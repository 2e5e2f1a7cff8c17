"""Regenerate the toy corpus and train the toy target and draft models.

Run from the repository root (2-4 minutes on 2 CPU cores):

    python -m labkit train-models

It writes, under labkit/data/:
  corpus.txt   the corpus, from the seeded grammar in labkit/corpus.py
  target.pt    target model (context 32, 1 head)
  draft.pt     draft model (context 16, 4 heads for tokens t+1..t+4)
  MODEL_CARD.md  what the models are and the numbers below

and prints: train/val cross-entropy (nats per character) of each model and
head; the speculative-sampling acceptance rate of draft head 0 against the
target at temperature 1, a = E_pos[sum_x min(p(x), q(x))] over validation
positions; and the share of corpus words in 20 samples of 200 characters drawn
by plain ancestral sampling (temperature 1) from each model.

Everything is seeded; re-running gives the same corpus and (on the same
machine and torch build) the same weights.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F

from labkit import corpus
from labkit.models import (
    ALPHABET,
    DATA_DIR,
    DRAFT_PATH,
    TARGET_PATH,
    CharTokenizer,
    TinyLM,
    TinyLMConfig,
    sample_text,
    save_checkpoint,
)

CORPUS_SEED = 1234
CORPUS_SENTENCES = 12000      # ~400 KB of text
VAL_FRACTION = 0.1            # last 10% of the stories are held out
BATCH_SIZE = 256
TRUNCATE_PROB = 0.3           # share of training contexts cut short and left-padded
SAMPLE_PROMPT_SEED = 7
SAMPLE_SEED = 11
NUM_SAMPLES, SAMPLE_CHARS = 20, 200

# Sizes chosen so that the target samples read as corpus text and the draft is
# clearly weaker but still accepted most of the time (see MODEL_CARD.md).
TARGET = dict(context_len=32, num_future=1, embed_dim=16, hidden_dim=384, num_layers=2,
              dropout=0.1)
DRAFT = dict(context_len=16, num_future=4, embed_dim=8, hidden_dim=128, num_layers=1,
             dropout=0.0)


class Split:
    """Token stream of one split, with every model input precomputed as a view."""

    def __init__(self, ids: torch.Tensor, context_len: int, num_future: int, pad_id: int):
        self.ids = ids
        self.num_future = num_future
        padded = torch.cat([torch.full((context_len,), pad_id, dtype=torch.long), ids])
        # windows[i] = ids[i - context_len : i] (pad before the start): the
        # context for predicting ids[i], ids[i+1], ..., ids[i+num_future-1].
        self.windows = padded.unfold(0, context_len, 1)
        self.num_positions = len(ids) - num_future + 1

    def batch(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ctx = self.windows[positions]
        targets = self.ids[positions[:, None] + torch.arange(self.num_future)]
        return ctx, targets


def _shape(cfg: TinyLMConfig) -> str:
    return f"{cfg.embed_dim} / {cfg.hidden_dim} / {cfg.num_layers}"


def truncate_contexts(ctx: torch.Tensor, gen: torch.Generator, pad_id: int) -> torch.Tensor:
    """Left-pad a random subset of contexts to a random shorter length, so the
    model also learns to continue short prompts that arrive left-padded."""
    batch, context_len = ctx.shape
    chosen = torch.rand(batch, generator=gen) < TRUNCATE_PROB
    keep = torch.randint(1, context_len + 1, (batch,), generator=gen)
    drop = torch.arange(context_len)[None, :] < (context_len - keep)[:, None]
    return ctx.masked_fill(drop & chosen[:, None], pad_id)


@torch.no_grad()
def eval_loss(model: TinyLM, split: Split, positions: torch.Tensor) -> list[float]:
    """Mean cross-entropy per head (nats/char) over the given positions."""
    total = torch.zeros(model.num_future, dtype=torch.float64)
    for chunk in positions.split(4096):
        ctx, targets = split.batch(chunk)
        logits = model(ctx)
        loss = F.cross_entropy(logits.reshape(-1, model.vocab_size), targets.reshape(-1),
                               reduction="none").reshape(len(chunk), model.num_future)
        total += loss.sum(0).double()
    return (total / len(positions)).tolist()


def train(name: str, config: TinyLMConfig, train_ids: torch.Tensor, val_ids: torch.Tensor,
          steps: int, lr: float, seed: int, pad_id: int) -> tuple[TinyLM, dict]:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TinyLM(config).set_batch_invariant(False)  # fast GEMMs while training
    train_split = Split(train_ids, config.context_len, config.num_future, pad_id)
    val_split = Split(val_ids, config.context_len, config.num_future, pad_id)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    warmup = 200
    # Linear warmup, then cosine decay to 2% of the peak rate.
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * (
        0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps)))))
    start = time.time()
    model.train()
    for step in range(steps):
        positions = torch.randint(0, train_split.num_positions, (BATCH_SIZE,), generator=gen)
        ctx, targets = train_split.batch(positions)
        ctx = truncate_contexts(ctx, gen, pad_id)
        logits = model(ctx)
        loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        schedule.step()
        if step % 1000 == 0 or step == steps - 1:
            print(f"  [{name}] step {step:5d}  loss {loss.item():.4f}  "
                  f"{time.time() - start:6.1f}s", flush=True)
    model.eval()
    seconds = time.time() - start
    eval_gen = torch.Generator().manual_seed(0)
    train_pos = torch.randint(0, train_split.num_positions, (30000,), generator=eval_gen)
    val_pos = torch.arange(val_split.num_positions)
    stats = dict(train_loss=eval_loss(model, train_split, train_pos),
                 val_loss=eval_loss(model, val_split, val_pos),
                 seconds=seconds,
                 params=sum(p.numel() for p in model.parameters()))
    model.set_batch_invariant(True).requires_grad_(False)
    return model, stats


@torch.no_grad()
def acceptance_rate(target: TinyLM, draft: TinyLM, ids: torch.Tensor, pad_id: int) -> float:
    """E over positions of sum_x min(p(x), q(x)) for draft head 0 vs the target
    (temperature 1): the probability that speculative sampling accepts a
    token proposed by the draft."""
    t_split = Split(ids, target.context_len, 1, pad_id)
    d_split = Split(ids, draft.context_len, 1, pad_id)
    positions = torch.arange(len(ids))
    total = 0.0
    for chunk in positions.split(4096):
        p = torch.softmax(target(t_split.windows[chunk])[:, 0], dim=-1)
        q = torch.softmax(draft(d_split.windows[chunk])[:, 0], dim=-1)
        total += torch.minimum(p, q).sum(-1).double().sum().item()
    return total / len(positions)


def word_share(model: TinyLM, tokenizer: CharTokenizer) -> tuple[float, float, str]:
    prompts = corpus.sample_prompts(NUM_SAMPLES, seed=SAMPLE_PROMPT_SEED)
    samples = sample_text(model, tokenizer, prompts, SAMPLE_CHARS, seed=SAMPLE_SEED)
    shares = [corpus.word_share_in_corpus(s) for s in samples]
    return sum(shares) / len(shares), min(shares), prompts[0] + samples[0]


PROG = "python -m labkit train-models"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--target-steps", type=int, default=10000)
    parser.add_argument("--draft-steps", type=int, default=6000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.time()

    text = corpus.generate_corpus(CORPUS_SENTENCES, seed=CORPUS_SEED)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    corpus.CORPUS_PATH.write_text(text, encoding="ascii")
    corpus.corpus_text.cache_clear()
    corpus.corpus_words.cache_clear()
    corpus._sentences.cache_clear()

    tokenizer = CharTokenizer(ALPHABET)
    lines = text.splitlines(keepends=True)
    n_val = int(len(lines) * VAL_FRACTION)
    train_ids = torch.tensor(tokenizer.encode("".join(lines[:-n_val])), dtype=torch.long)
    val_ids = torch.tensor(tokenizer.encode("".join(lines[-n_val:])), dtype=torch.long)
    print(f"corpus: {len(text)} chars, {len(corpus.corpus_words())} distinct words, "
          f"{len(lines)} stories; train {len(train_ids)} / val {len(val_ids)} chars")

    pad = tokenizer.pad_id
    target_cfg = TinyLMConfig(vocab_size=tokenizer.vocab_size, **TARGET)
    draft_cfg = TinyLMConfig(vocab_size=tokenizer.vocab_size, **DRAFT)
    target, t_stats = train("target", target_cfg, train_ids, val_ids,
                            args.target_steps, lr=2e-3, seed=1, pad_id=pad)
    draft, d_stats = train("draft", draft_cfg, train_ids, val_ids,
                           args.draft_steps, lr=3e-3, seed=2, pad_id=pad)

    save_checkpoint(target, ALPHABET, TARGET_PATH)
    save_checkpoint(draft, ALPHABET, DRAFT_PATH)

    accept = acceptance_rate(target, draft, val_ids, pad)
    t_share, t_min, t_example = word_share(target, tokenizer)
    d_share, d_min, d_example = word_share(draft, tokenizer)
    total_s = time.time() - t0
    sizes = {p.name: p.stat().st_size for p in (TARGET_PATH, DRAFT_PATH, corpus.CORPUS_PATH)}

    def fmt(losses: list[float]) -> str:
        return ", ".join(f"{x:.4f}" for x in losses)

    share_label = f"word share in corpus, {NUM_SAMPLES} samples x {SAMPLE_CHARS} chars, T=1 (mean / min)"
    summary = f"""\
| | target | draft |
| --- | --- | --- |
| context_len | {target_cfg.context_len} | {draft_cfg.context_len} |
| num_future (heads) | {target_cfg.num_future} | {draft_cfg.num_future} |
| embed / hidden / layers | {_shape(target_cfg)} | {_shape(draft_cfg)} |
| dropout (training only) | {target_cfg.dropout} | {draft_cfg.dropout} |
| parameters | {t_stats['params']:,} | {d_stats['params']:,} |
| weight file | {sizes['target.pt']:,} bytes | {sizes['draft.pt']:,} bytes |
| training steps (batch {BATCH_SIZE}) | {args.target_steps} | {args.draft_steps} |
| training time | {t_stats['seconds']:.0f} s | {d_stats['seconds']:.0f} s |
| train loss per head (nats/char) | {fmt(t_stats['train_loss'])} | {fmt(d_stats['train_loss'])} |
| val loss per head (nats/char) | {fmt(t_stats['val_loss'])} | {fmt(d_stats['val_loss'])} |
| {share_label} | {t_share:.3f} / {t_min:.3f} | {d_share:.3f} / {d_min:.3f} |

Acceptance rate of speculative sampling, draft head 0 vs target, temperature 1,
a = mean over {len(val_ids):,} validation positions of sum_x min(p(x), q(x)): **{accept:.3f}**

Example target sample (prompt + 200 sampled chars):

    {t_example.replace(chr(10), chr(10) + '    ')}

Example draft sample:

    {d_example.replace(chr(10), chr(10) + '    ')}

Total script time: {total_s:.0f} s with {args.threads} threads (torch {torch.__version__}).
"""
    print()
    print(summary)
    (DATA_DIR / "MODEL_CARD.md").write_text(MODEL_CARD.format(
        summary=summary, corpus_chars=len(text), corpus_words=len(corpus.corpus_words()),
        corpus_bytes=sizes["corpus.txt"], stories=len(lines), alphabet=repr(ALPHABET),
        vocab=tokenizer.vocab_size, seed=CORPUS_SEED, sentences=CORPUS_SENTENCES,
        cmd=" ".join([PROG, *argv])))
    print(f"wrote {TARGET_PATH}, {DRAFT_PATH}, {corpus.CORPUS_PATH}, MODEL_CARD.md")
    return 0


MODEL_CARD = """\
# Toy models for speculative decoding

Generated by `python -m labkit train-models`; do not edit by hand.

Two character-level language models over one shared vocabulary, small enough
to run on a CPU, that `labkit` uses as the **target** and the **draft** of
speculative decoding.  Architecture (`labkit.models.TinyLM`): an MLP over the
concatenated embeddings of the last `context_len` characters (left-padded
with the pad id 0), LayerNorm + ReLU hidden layers, and `num_future` output
heads, head h predicting the character h+1 positions ahead.  The draft has 4
heads (t+1..t+4) so a DFlash-style drafter can propose 4 tokens per pass.
All linear layers are computed row by row (`RowwiseLinear`), which makes the
logits of a row bit-identical whatever the batch it is computed in.

## Corpus

`corpus.txt` ({corpus_bytes:,} bytes, {stories:,} mini stories, {corpus_words}
distinct words) is generated by the seeded English-like grammar in
`labkit/corpus.py` (`generate_corpus({sentences}, seed={seed})`): short
lowercase sentences about a small harbour village.  It is synthetic, written
for this kit, and contains no third-party text.  The last 10% of the stories
are held out for validation.

Vocabulary: pad (id 0) + {alphabet} = {vocab} tokens.

## Measured

{summary}
## Reproduce

    {cmd}

Training uses fixed seeds, Adam, batch 256, linear warmup + cosine decay, and
left-pads 30% of the training contexts to a random shorter length so that
short prompts work.
"""

