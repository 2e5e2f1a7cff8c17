"""Before a peer sampler is timed, is it a sampler? Tokens in range, and the right distribution.

    check_peer(sample, device)   {"ok": bool, "tokens_in_range": ..., "chi_square": ..., "why": ...}

A sampler here is ``sample(logits, temperature, seeds, positions) -> tokens``: logits [rows, V]
(row r is an independent draw: it has its own seed), temperature and seeds per row, one token per
row. The check draws 2**16 rows of one small vocabulary whose logits are the same in every row, so
the tokens' histogram must follow softmax(logits / T): Pearson's chi-square (rare bins pooled) must
not reject it at p < 1e-6 -- a sampler that ignores the noise (always the argmax), the temperature,
or draws by row rather than by seed fails by hundreds of standard deviations, while an exact one
fails once in a million runs. Runs on any device: the CPU tests run it on the kit's torch backend.
"""

from __future__ import annotations

from typing import Callable

import torch

from labkit.proofs.stats import chi_square

Sampler = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

CHECK_ROWS = 1 << 16
CHECK_VOCAB = 40
CHECK_TEMPERATURE = 0.8
REJECT_BELOW = 1e-6  # the p-value under which a sampler is taken to draw from another distribution


def check_inputs(rows: int = CHECK_ROWS, vocab: int = CHECK_VOCAB, temperature: float = CHECK_TEMPERATURE,
                 device="cpu", seed: int = 11):
    """(logits [rows, vocab], temperature [rows], seeds [rows] int64, positions [rows] int64, p [vocab])."""
    g = torch.Generator().manual_seed(seed)
    row = 1.5 * torch.randn(vocab, generator=g)
    logits = row.expand(rows, vocab).contiguous().to(device)
    temps = torch.full((rows,), temperature, device=device)
    seeds = (torch.arange(rows, dtype=torch.int64) * 7919 + 12345).to(device)
    positions = torch.randint(0, 4096, (rows,), generator=g, dtype=torch.int64).to(device)
    p = torch.softmax(row.double() / temperature, dim=0)
    return logits, temps, seeds, positions, p


def tokens_in_range(tokens: torch.Tensor, rows: int, vocab: int) -> str | None:
    """Why `tokens` are not one id in [0, vocab) per row, or None."""
    if tokens.numel() != rows:
        return f"{tokens.numel()} tokens for {rows} rows"
    if tokens.is_floating_point():
        return f"tokens of dtype {tokens.dtype}"
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= vocab:
        return f"token ids from {low} to {high}, outside [0, {vocab})"
    return None


def check_peer(sample: Sampler, device="cpu", *, rows: int = CHECK_ROWS, vocab: int = CHECK_VOCAB) -> dict:
    """Run `sample` once on the check's inputs and judge its tokens (see the module's docstring)."""
    logits, temps, seeds, positions, p = check_inputs(rows, vocab, device=device)
    tokens = sample(logits, temps, seeds, positions).reshape(-1)
    why = tokens_in_range(tokens, rows, vocab)
    if why is not None:
        return {"ok": False, "why": why, "rows": rows, "vocab": vocab}
    fit = chi_square(tokens.cpu(), p)
    ok = not fit.rejects(REJECT_BELOW)
    out = {"ok": ok, "rows": rows, "vocab": vocab, "temperature": CHECK_TEMPERATURE,
           "chi_square": {"statistic": fit.stat, "dof": fit.df, "p_value": fit.pvalue}}
    if not ok:
        out["why"] = (f"its tokens do not follow softmax(logits / T): chi-square {fit.stat:.1f} on {fit.df} "
                      f"degrees of freedom, p = {fit.pvalue:.1e} < {REJECT_BELOW:g}")
    return out
