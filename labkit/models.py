"""Toy character-level target and draft models for speculative decoding.

Both models share one tiny vocabulary (:class:`CharTokenizer`) and one
architecture (:class:`TinyLM`): an MLP over the concatenated embeddings of the
last ``context_len`` tokens (Bengio et al. 2003 / "makemore" style) with
``num_future`` output heads, head ``h`` predicting the token ``h + 1``
positions ahead.  The target has one head; the draft has four, so a
"DFlash-style" drafter can propose four tokens in a single forward pass.

Weights are trained by ``python -m labkit train-models`` and ship in
``labkit/data`` (see ``MODEL_CARD.md`` there); :func:`load_toy_models` loads
them, so nothing is trained or downloaded at run time.

Batch invariance
----------------
The kit compares runs in which the same sequence is computed in batches of
different sizes (an eager step vs. a padded CUDA-graph batch) and expects
bit-identical logits, so that "identical to eager" means "untouched by the
bug".  Two things can break that on the CPU:

* Plain ``torch.nn.functional.linear`` takes a matrix-vector path for one row
  and a blocked GEMM for more, with reduction orders that depend on the batch.
  :class:`RowwiseLinear` computes each row as its own 1 x K by K x N product
  (``torch.bmm`` against a stride-0 expanded weight), so every row meets the
  same kernel with the same shapes.
* With several threads, MKL may split one small product across threads, and
  how it splits depends on the batch size and even on the machine's load
  (seen with 2 threads on a busy 2-core AVX-512 machine: a batch of 1 differed
  from batches of 2+ in the last bits).  So the forward pass runs on one CPU
  thread (:func:`one_thread_on_cpu`); the toy models are small enough that this
  costs nothing measurable, and a row's result is then the same for any batch
  size, row position and torch thread count.

Every other op is exact (embedding gather, ReLU, additions, reshapes) or
reduces within a single row (LayerNorm).  On CUDA the linear layers use a
fixed-order Triton kernel (:mod:`labkit.kernels.rowwise_linear`), because
cuBLAS is not batch-invariant either.  ``tests/test_models.py`` checks batch
sizes 1..64 at 1, 2, 4 and 8 threads, and that all thread counts agree.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from labkit import paths
from labkit.checks import resolved_device
from labkit.kernels.rowwise_linear import available_for as rowwise_linear_available
from labkit.kernels.rowwise_linear import rowwise_linear

DATA_DIR = paths.DATA
TARGET_PATH = DATA_DIR / "target.pt"
DRAFT_PATH = DATA_DIR / "draft.pt"

# Everything the corpus grammar can emit.  Id 0 is reserved for padding.
ALPHABET = "\n ,.abcdefghijklmnopqrstuvwxyz"


class CharTokenizer:
    """Characters <-> ids.  Id 0 is ``pad_id``, a padding / begin-of-text token
    that never appears in text; character ``alphabet[i]`` has id ``i + 1``."""

    pad_id = 0

    def __init__(self, alphabet: str = ALPHABET):
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("alphabet has duplicate characters")
        self.alphabet = alphabet
        self.vocab_size = len(alphabet) + 1
        self._char_to_id = {c: i + 1 for i, c in enumerate(alphabet)}

    def encode(self, text: str) -> list[int]:
        try:
            return [self._char_to_id[c] for c in text]
        except KeyError as err:
            raise ValueError(
                f"character {err.args[0]!r} is not in the tokenizer alphabet "
                f"{self.alphabet!r}") from None

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.alphabet[i - 1] for i in (int(t) for t in ids) if i != self.pad_id)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


@contextlib.contextmanager
def one_thread_on_cpu(device: torch.device | str):
    """Run the enclosed CPU work on one intra-op thread (see "Batch invariance" above).

    The kit's tensors are tiny (rows x a 31-token vocabulary): intra-op threads only add
    synchronisation, and on a busy 2-core machine a 2-thread pool made each small op ~1000x slower.
    """
    if torch.device(device).type != "cpu":
        yield
        return
    previous = torch.get_num_threads()
    if previous == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class RowwiseLinear(nn.Linear):
    """``nn.Linear`` whose output row i depends only on input row i, bit for bit.

    Same parameters and state_dict keys as ``nn.Linear``.  The batch-invariant
    path (default) runs one 1 x K @ K x N product per row through ``bmm``; see
    the module docstring for why.  Training may switch ``batch_invariant`` off
    to use the much faster plain GEMM: the results differ only in rounding.
    The switch is a plain attribute read, not data-dependent control flow, so
    CUDA-graph capture sees a static graph either way.
    """

    batch_invariant: bool = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.batch_invariant:
            return F.linear(x, self.weight, self.bias)
        if rowwise_linear_available(x):
            # cuBLAS is not batch-invariant even through bmm; a fixed-order Triton kernel is.
            return rowwise_linear(x, self.weight, self.bias)
        batch = x.shape[0]
        weight_t = self.weight.t().unsqueeze(0).expand(batch, -1, -1)
        out = torch.bmm(x.unsqueeze(1), weight_t).squeeze(1)
        return out + self.bias


@dataclass(frozen=True)
class TinyLMConfig:
    vocab_size: int
    context_len: int
    num_future: int
    embed_dim: int
    hidden_dim: int
    num_layers: int  # hidden layers; the first maps the context, the rest are residual
    dropout: float = 0.0  # training only (identity in eval mode)


class TinyLM(nn.Module):
    """MLP language model over a fixed window of the last ``context_len`` tokens.

    ``forward(tokens[B, context_len]) -> logits[B, num_future, vocab_size]``
    (float32).  Shorter contexts are left-padded with the pad id (see
    :func:`encode_context`); the model was trained with such padding.
    Static shapes only and no data-dependent Python control flow, so the
    forward pass can be captured into CUDA graphs.
    """

    def __init__(self, config: TinyLMConfig):
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        self.context_len = config.context_len
        self.num_future = config.num_future
        self.embed = nn.Embedding(config.vocab_size, config.embed_dim)
        # The corpus is small; dropout on the hidden layers keeps the target
        # from memorising it.  (Not on the input: dropping parts of the most
        # recent characters teaches the model to guess words from older
        # context and to ignore the letter it just wrote.)
        self.dropout = nn.Dropout(config.dropout)
        self.inp = RowwiseLinear(config.context_len * config.embed_dim, config.hidden_dim)
        self.inp_norm = nn.LayerNorm(config.hidden_dim)
        self.blocks = nn.ModuleList(
            RowwiseLinear(config.hidden_dim, config.hidden_dim) for _ in range(config.num_layers - 1))
        self.block_norms = nn.ModuleList(
            nn.LayerNorm(config.hidden_dim) for _ in range(config.num_layers - 1))
        self.head = RowwiseLinear(config.hidden_dim, config.num_future * config.vocab_size)

    def set_batch_invariant(self, enabled: bool) -> "TinyLM":
        """Switch every linear layer between the batch-invariant and fast path."""
        for module in self.modules():
            if isinstance(module, RowwiseLinear):
                module.batch_invariant = enabled
        return self

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        with one_thread_on_cpu(tokens.device):
            return self._forward(tokens)

    def _forward(self, tokens: torch.Tensor) -> torch.Tensor:
        batch = tokens.shape[0]
        x = self.embed(tokens).reshape(batch, self.context_len * self.config.embed_dim)
        # ReLU rather than GELU/tanh: it is exact, so vectorised and scalar
        # code paths (which may split a batch differently) agree bit for bit.
        h = torch.relu(self.inp_norm(self.inp(x)))
        for lin, norm in zip(self.blocks, self.block_norms, strict=True):
            h = h + torch.relu(norm(lin(self.dropout(h))))
        logits = self.head(self.dropout(h))
        return logits.reshape(batch, self.num_future, self.vocab_size)


def encode_context(token_lists: Sequence[Sequence[int]], context_len: int,
                   pad_id: int = CharTokenizer.pad_id) -> torch.Tensor:
    """Stack token lists into a ``LongTensor[B, context_len]`` model input.

    Each list keeps its last ``context_len`` tokens and is left-padded with
    ``pad_id`` when shorter (an empty list gives an all-pad row).
    """
    out = torch.full((len(token_lists), context_len), pad_id, dtype=torch.long)
    for row, tokens in enumerate(token_lists):
        tail = list(tokens)[-context_len:] if context_len > 0 else []
        if tail:
            out[row, context_len - len(tail):] = torch.tensor(tail, dtype=torch.long)
    return out


# --------------------------------------------------------------------------
# Shipped weights
# --------------------------------------------------------------------------

@dataclass
class ToyModels:
    tokenizer: CharTokenizer
    target: TinyLM
    draft: TinyLM


def save_checkpoint(model: TinyLM, alphabet: str, path: Path) -> None:
    """Write ``{"config", "alphabet", "state_dict"}`` (loadable with weights_only)."""
    state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    torch.save({"config": dict(model.config.__dict__), "alphabet": alphabet,
                "state_dict": state}, path)


@functools.lru_cache(maxsize=None)
def _read_checkpoint(path: str) -> dict:
    # Cached: repeated load_toy_models() calls only rebuild the small modules.
    return torch.load(path, map_location="cpu", weights_only=True)


def _build(path: Path, tokenizer: CharTokenizer, device: str | torch.device) -> TinyLM:
    ckpt = _read_checkpoint(str(path))
    config = TinyLMConfig(**ckpt["config"])
    if ckpt["alphabet"] != tokenizer.alphabet or config.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"{path.name} was trained for alphabet {ckpt['alphabet']!r} "
            f"(vocab_size {config.vocab_size}), but the tokenizer has "
            f"{tokenizer.alphabet!r} (vocab_size {tokenizer.vocab_size}); "
            "re-run python -m labkit train-models")
    model = TinyLM(config)
    model.load_state_dict(ckpt["state_dict"])  # copies: the cache stays untouched
    model.eval().requires_grad_(False)
    return model.to(device)


def load_toy_models(device: str | torch.device = "cpu") -> ToyModels:
    """Load the shipped tokenizer, target and draft models.

    Both models are in eval mode with ``requires_grad`` off and on ``device``.
    The checkpoint files are read once per process and cached on the CPU;
    every call builds *fresh* module objects (a few milliseconds), so callers
    may move or modify their copy without affecting anyone else.
    """
    tokenizer = CharTokenizer()
    target = _build(TARGET_PATH, tokenizer, device)
    draft = _build(DRAFT_PATH, tokenizer, device)
    if target.vocab_size != draft.vocab_size:
        raise ValueError(f"target vocab_size {target.vocab_size} != draft vocab_size "
                         f"{draft.vocab_size}")
    return ToyModels(tokenizer=tokenizer, target=target, draft=draft)


def shared_toy_models(device: str | torch.device = "cpu") -> ToyModels:
    """One :func:`load_toy_models` per device for the whole process: read it, do not modify it.

    Keyed by the device itself: "cuda", "cuda:0" and torch.device("cuda") (on device 0) share one."""
    device = resolved_device(device)
    return _shared_toy_models(device.type, device.index)


@functools.lru_cache(maxsize=4)
def _shared_toy_models(device_type: str, index: int | None) -> ToyModels:
    return load_toy_models(torch.device(device_type, index))


# --------------------------------------------------------------------------
# Plain sampling, used by the training script and tests as a quality check
# --------------------------------------------------------------------------

@torch.no_grad()
def sample_text(model: TinyLM, tokenizer: CharTokenizer, prompts: Sequence[str],
                num_chars: int, seed: int, temperature: float = 1.0) -> list[str]:
    """Ancestral sampling from head 0: ``num_chars`` new characters per prompt.

    Returns only the generated continuations (not the prompts).  The pad id is
    masked out (a trained model gives it ~zero probability anyway) so every
    continuation is exactly ``num_chars`` characters long.
    """
    device = next(model.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    histories = [tokenizer.encode(p) for p in prompts]
    new_tokens: list[list[int]] = [[] for _ in prompts]
    for _ in range(num_chars):
        ctx = encode_context(histories, model.context_len, tokenizer.pad_id).to(device)
        logits = model(ctx)[:, 0, :].float().cpu() / temperature
        logits[:, tokenizer.pad_id] = float("-inf")
        nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=gen)[:, 0]
        for row, tok in enumerate(nxt.tolist()):
            histories[row].append(tok)
            new_tokens[row].append(tok)
    return [tokenizer.decode(t) for t in new_tokens]
