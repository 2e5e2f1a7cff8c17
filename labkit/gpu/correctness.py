"""Is the fast compiled kernel still exact, and are the toy models batch-invariant on the GPU?

    exactness()          the kernel's sampling distribution per fast-math level (chi-square)
    layer_invariance()   which layers change a row's bits with the batch size
    batch_invariance()   whole models: a row alone vs inside batches of every size, eager and graphed
"""

from __future__ import annotations

import torch

from labkit.gpu.timing import graphed
from labkit.kernels.gumbel import gumbel_sample
from labkit.kernels.sampling_state import SamplingState


def _chi_square(counts: torch.Tensor, expected: torch.Tensor) -> tuple[float, int]:
    keep = expected >= 5
    chi2 = float((((counts - expected) ** 2) / expected)[keep].sum())
    return chi2, int(keep.sum()) - 1


def small_vocab_distribution(fast_math: int, n: int = 1 << 20, vocab: int = 64, temp: float = 0.7) -> dict:
    """Token frequencies over 2**20 seeds against softmax(logits / T)."""
    g = torch.Generator(device="cuda").manual_seed(5)
    row = 2.0 * torch.randn(vocab, device="cuda", generator=g)
    logits = row.expand(n, vocab).contiguous()
    mapping = torch.arange(n, dtype=torch.int32, device="cuda")
    state = SamplingState(mapping, torch.full((n,), temp, device="cuda"), torch.arange(n, device="cuda") * 7919 + 1,
                          torch.zeros(n, dtype=torch.int64, device="cuda"))
    tokens = gumbel_sample(logits, state, fast_math=fast_math, backend="triton")
    counts = torch.bincount(tokens, minlength=vocab).double()
    chi2, dof = _chi_square(counts, torch.softmax(row.double() / temp, dim=0) * n)
    return {"draws": n, "vocab": vocab, "chi2": chi2, "dof": dof, "z": (chi2 - dof) / (2 * dof) ** 0.5}


def real_vocab_distribution(rows: int = 2048, vocab: int = 151936, launches: int = 32) -> dict:
    """Tokens in 4 classes (index % 4) with logits 0, .5, 1, 1.5, where the winners' Gumbel values
    come from u within ~1e-5 of 1; and how often fast math picks another token than exact math."""
    cls_logit = torch.tensor([0.0, 0.5, 1.0, 1.5], device="cuda")
    logits = cls_logit[torch.arange(vocab, device="cuda") % 4].expand(rows, vocab).contiguous()
    mapping = torch.arange(rows, dtype=torch.int32, device="cuda")
    ones = torch.ones(rows, device="cuda")
    zeros = torch.zeros(rows, dtype=torch.int64, device="cuda")
    counts = {fm: torch.zeros(4, dtype=torch.float64, device="cuda") for fm in (0, 2)}
    differ = 0
    for i in range(launches):
        seeds = torch.arange(rows, device="cuda") + i * rows + 11
        state = SamplingState(mapping, ones, seeds, zeros)
        toks = {fm: gumbel_sample(logits, state, fast_math=fm, backend="triton") for fm in (0, 2)}
        differ += int((toks[0] != toks[2]).sum())
        for fm in (0, 2):
            counts[fm] += torch.bincount(toks[fm] % 4, minlength=4).double()
    expected = torch.softmax(cls_logit.double(), dim=0) * rows * launches
    out = {}
    for fm in (0, 2):
        chi2 = float(((counts[fm] - expected) ** 2 / expected).sum())
        out[f"vocab_{vocab}_fast{fm}"] = {"draws": rows * launches, "class_counts": counts[fm].tolist(),
                                          "expected": expected.tolist(), "chi2": chi2, "dof": 3}
    out[f"vocab_{vocab}_tokens_fast2_vs_fast0_differ"] = differ
    return out


def exactness(log=print) -> dict:
    """The sampling distribution of the compiled kernel, per fast-math level."""
    out = {f"small_vocab_fast{fm}": small_vocab_distribution(fm) for fm in (0, 1, 2)}
    out.update(real_vocab_distribution())
    log("  " + "; ".join(f"{k}: chi2 {v['chi2']:.1f} on {v['dof']} dof" for k, v in out.items() if isinstance(v, dict))
        + f"; fast vs exact tokens differ: {out['vocab_151936_tokens_fast2_vs_fast0_differ']}")
    return out


def layer_invariance(sizes=(1, 2, 3, 5, 8, 16, 33, 64)) -> dict:
    """Which layers change a row's bits with the batch size: each layer on random inputs."""
    from labkit.models import RowwiseLinear, load_toy_models

    models = load_toy_models("cuda")
    out = {}
    g = torch.Generator(device="cuda").manual_seed(3)
    with torch.no_grad():
        for name in ("draft", "target"):
            for lname, mod in getattr(models, name).named_modules():
                if not isinstance(mod, (RowwiseLinear, torch.nn.LayerNorm)):
                    continue
                width = mod.in_features if isinstance(mod, RowwiseLinear) else mod.normalized_shape[0]
                x = torch.randn(max(sizes), width, device="cuda", generator=g)
                alone = torch.cat([mod(x[i:i + 1]) for i in range(x.shape[0])])
                bad = [n for n in sizes if not torch.equal(mod(x[:n]), alone[:n])]
                out[f"{name}.{lname}"] = {"type": type(mod).__name__, "mismatched_sizes": bad}
    return out


def _graphed_forward(model, tokens: torch.Tensor) -> torch.Tensor:
    """The model's output on `tokens`, from a CUDA graph captured at that batch size."""
    buf = tokens.clone()
    static = {}

    def step():
        static["out"] = model(buf)

    graphed(step, reps=1)()
    torch.cuda.synchronize()
    return static["out"]


def _model_invariance(model, sizes, graphs: bool) -> dict:
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randint(0, model.vocab_size, (max(sizes), model.context_len), device="cuda", generator=g)
    alone = torch.cat([model(x[i:i + 1]) for i in range(x.shape[0])])
    bad = {"eager": [], "graph": []}
    worst = 0.0
    for n in sizes:
        outputs = {"eager": model(x[:n])}
        if graphs:
            outputs["graph"] = _graphed_forward(model, x[:n])
        for how, out in outputs.items():
            if not torch.equal(out, alone[:n]):
                bad[how].append(n)
                worst = max(worst, float((out - alone[:n]).abs().max()))
    return {"sizes": list(sizes), "mismatched_sizes_eager": bad["eager"], "mismatched_sizes_graph": bad["graph"],
            "max_abs_diff": worst}


def batch_invariance(sizes=(1, 2, 3, 5, 7, 8, 16, 33, 64), graphs: bool = True) -> dict:
    """Do the toy models give a row the same logits, bit for bit, whatever the batch around it?

    Each row computed alone is the reference; it is compared with the same row inside batches of
    every size, eagerly and replayed from a CUDA graph captured at that size (the padded case)."""
    from labkit.models import load_toy_models

    models = load_toy_models("cuda")
    with torch.no_grad():
        return {name: _model_invariance(getattr(models, name), sizes, graphs) for name in ("draft", "target")}


def invariance_section() -> dict:
    return {"models": batch_invariance(), "layers": layer_invariance()}
