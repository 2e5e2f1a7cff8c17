"""Tests for the toy corpus and the toy target/draft models (labkit.corpus, labkit.models)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from labkit import corpus
from labkit.models import (
    ALPHABET,
    DATA_DIR,
    DRAFT_PATH,
    TARGET_PATH,
    CharTokenizer,
    RowwiseLinear,
    TinyLM,
    TinyLMConfig,
    _build,
    encode_context,
    load_toy_models,
    sample_text,
)


@pytest.fixture(scope="module")
def toy():
    return load_toy_models()


def _corpus_contexts(context_len: int, n: int, seed: int) -> torch.Tensor:
    """n realistic model inputs: corpus windows, some of them left-padded."""
    tok = CharTokenizer()
    text = corpus.corpus_text()
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(text) - context_len, (n,), generator=gen).tolist()
    lists = [tok.encode(text[s:s + context_len]) for s in starts]
    for i in range(0, n, 4):  # every fourth row: a short, left-padded context
        lists[i] = lists[i][-(1 + i % context_len):]
    return encode_context(lists, context_len, tok.pad_id)


# --------------------------------------------------------------------------
# Tokenizer and input encoding
# --------------------------------------------------------------------------

def test_tokenizer_round_trip():
    tok = CharTokenizer()
    text = corpus.corpus_text()[:2000]
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.pad_id == 0 and tok.pad_id not in ids
    assert tok.vocab_size == len(ALPHABET) + 1
    assert set(corpus.corpus_text()) <= set(tok.alphabet)
    assert tok.decode([0, 0] + tok.encode("the cat.") + [0]) == "the cat."


def test_tokenizer_rejects_unknown_character():
    with pytest.raises(ValueError, match="'X'"):
        CharTokenizer().encode("the Xylophone")


def test_encode_context_left_pads_and_truncates():
    out = encode_context([[5, 6], [], list(range(1, 11))], context_len=4, pad_id=0)
    assert out.dtype == torch.long
    assert out.tolist() == [[0, 0, 5, 6], [0, 0, 0, 0], [7, 8, 9, 10]]


# --------------------------------------------------------------------------
# Model structure and batch invariance
# --------------------------------------------------------------------------

def test_forward_shapes(toy):
    assert toy.target.vocab_size == toy.draft.vocab_size == toy.tokenizer.vocab_size
    assert toy.target.num_future == 1 and toy.draft.num_future == 4
    assert toy.draft.context_len <= 16 < toy.target.context_len
    for model in (toy.target, toy.draft):
        x = _corpus_contexts(model.context_len, 5, seed=0)
        out = model(x)
        assert out.shape == (5, model.num_future, model.vocab_size)
        assert out.dtype == torch.float32
        assert not model.training
        assert not any(p.requires_grad for p in model.parameters())


def test_plain_linear_vs_rowwise_linear():
    """Documents the finding behind RowwiseLinear: on CPU float32, the plain
    GEMM path of nn.Linear gives a row different bits depending on the batch
    it is in; the row-by-row bmm path does not.  (If some torch build makes
    plain linear invariant, only the first assertion is skipped.)"""
    torch.manual_seed(0)
    lin = RowwiseLinear(512, 384)
    x = torch.randn(64, 512)
    with torch.no_grad():
        single = torch.cat([lin(x[i:i + 1]) for i in range(64)])
        assert torch.equal(lin(x), single)
        lin.batch_invariant = False
        plain = torch.cat([lin(x[i:i + 1]) for i in range(64)])
        if torch.equal(lin(x), plain):
            pytest.skip("plain nn.Linear happens to be batch-invariant on this build")


@pytest.mark.parametrize("which", ["target", "draft"])
def test_batch_invariance(toy, which):
    """model(x)[i] is bit-identical to model(x[i:i+1])[0] and to that row in
    any other batch (sizes 1..64, any position)."""
    model = getattr(toy, which)
    x = _corpus_contexts(model.context_len, 64, seed=1)
    with torch.no_grad():
        single = torch.cat([model(x[i:i + 1]) for i in range(64)])
        for size in (1, 2, 3, 5, 8, 13, 16, 31, 32, 33, 48, 63, 64):
            for start in {0, 64 - size, (64 - size) // 2}:
                assert torch.equal(model(x[start:start + size]), single[start:start + size]), \
                    (which, size, start)
        perm = torch.randperm(64, generator=torch.Generator().manual_seed(2))
        assert torch.equal(model(x[perm]), single[perm])
        # A padded batch (rows duplicated to fill it, as a CUDA-graph batch is).
        padded = torch.cat([x[:3], x[:1].expand(13, -1)])
        assert torch.equal(model(padded)[:3], single[:3])


PROBE = Path(__file__).resolve().parent / "probes" / "batch_invariance.py"


def test_batch_invariance_at_every_thread_count():
    """Rows are bit-identical for any batch size at 1, 2, 4 and 8 torch threads, and the thread
    count itself changes no row (each count runs in its own process: torch fixes it at start)."""
    # The kit of this checkout, installed or not (a GPU box runs the tests from a copy of the tree).
    env = {**os.environ, "LABKIT_BACKEND": "torch",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(PROBE.parents[2]), os.environ.get("PYTHONPATH")]))}
    runs = []
    for threads in (1, 2, 4, 8):
        out = subprocess.run([sys.executable, str(PROBE), str(threads)], capture_output=True, text=True,
                             env=env, timeout=300, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for run in runs:
        assert run["mismatches"] == [], run
    assert [r["threads"] for r in runs] == [1, 2, 4, 8]
    assert len({r["digest"] for r in runs}) == 1, runs


def test_fresh_model_is_batch_invariant():
    torch.manual_seed(0)
    model = TinyLM(TinyLMConfig(vocab_size=31, context_len=8, num_future=2, embed_dim=4,
                                hidden_dim=32, num_layers=3)).eval()
    x = torch.randint(0, 31, (20, 8))
    with torch.no_grad():
        single = torch.cat([model(x[i:i + 1]) for i in range(20)])
        assert torch.equal(model(x), single)


# --------------------------------------------------------------------------
# Shipped weights
# --------------------------------------------------------------------------

def test_shipped_weights_load_with_weights_only():
    for path in (TARGET_PATH, DRAFT_PATH):
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        assert set(ckpt) == {"config", "alphabet", "state_dict"}
        assert ckpt["alphabet"] == ALPHABET


def test_load_returns_fresh_modules(toy):
    again = load_toy_models()
    assert again.target is not toy.target and again.draft is not toy.draft
    for a, b in zip(again.target.parameters(), toy.target.parameters(), strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()


def test_vocab_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="alphabet"):
        _build(TARGET_PATH, CharTokenizer("abc"), "cpu")


def test_weight_files_are_small():
    total = sum(p.stat().st_size for p in (TARGET_PATH, DRAFT_PATH))
    assert total <= 10 * 2**20
    assert (DATA_DIR / "MODEL_CARD.md").exists()


def test_target_samples_read_as_corpus_text(toy):
    prompts = corpus.sample_prompts(6, seed=3)
    samples = sample_text(toy.target, toy.tokenizer, prompts, num_chars=200, seed=5)
    assert all(len(s) == 200 for s in samples)
    share = sum(corpus.word_share_in_corpus(s) for s in samples) / len(samples)
    assert share >= 0.9, (share, samples)


@torch.no_grad()
def _val_loss(model: TinyLM, ids: list[int]) -> float:
    """Head-0 cross-entropy (nats/char) of every position of ids."""
    ctx = encode_context([ids[:i] for i in range(len(ids))], model.context_len)
    logits = model(ctx)[:, 0]
    return F.cross_entropy(logits, torch.tensor(ids)).item()


def test_draft_is_weaker_than_target(toy):
    # The last stories of the corpus are the held-out validation split.
    ids = toy.tokenizer.encode(corpus.corpus_text()[-3000:])
    target_loss, draft_loss = _val_loss(toy.target, ids), _val_loss(toy.draft, ids)
    assert target_loss < 0.6
    assert draft_loss > target_loss + 0.2, (target_loss, draft_loss)


# --------------------------------------------------------------------------
# Corpus helpers
# --------------------------------------------------------------------------

def test_generate_corpus_is_seeded():
    a = corpus.generate_corpus(50, seed=3)
    assert a == corpus.generate_corpus(50, seed=3) != corpus.generate_corpus(50, seed=4)
    assert a.count(".") == 50
    assert set(a) <= set(ALPHABET)


def test_word_share_in_corpus():
    assert corpus.word_share_in_corpus("the old fisher walks to the harbor.") == 1.0
    assert corpus.word_share_in_corpus("the qzx fisher") == pytest.approx(2 / 3)
    assert math.isnan(corpus.word_share_in_corpus(""))
    assert math.isnan(corpus.word_share_in_corpus(" ., "))
    assert 150 <= len(corpus.corpus_words()) <= 300


def test_sample_prompts():
    prompts = corpus.sample_prompts(500, seed=0)
    assert len(prompts) == 500
    assert len(set(prompts)) == 500
    assert prompts == corpus.sample_prompts(500, seed=0)
    assert prompts[:20] != corpus.sample_prompts(20, seed=1)
    sentences = set(corpus._sentences())
    for p in prompts:
        assert 10 <= len(p) <= 30 and p.endswith(" ") and not p.startswith(" ")
        assert corpus.word_share_in_corpus(p) == 1.0
    assert all(any(s.startswith(p) for s in sentences) for p in prompts[:50])
