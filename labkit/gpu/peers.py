"""The kit's sampling call beside the samplers an engineer would pick instead.

    bench_peers(shapes=PEER_SHAPES)   each peer checked, then timed beside the kit and two references

Timed, per (rows, vocab), each as a CUDA graph holding one call, L2 flushed before every replay,
interleaved (labkit.gpu.timing), medians:

    kit_q        the kit's whole call (gumbel_sample, masked): scales by temperature, stores q by slot, samples
    kit_no_q     the same call without q (read the logits, sample): the work of a plain sampler
    vllm_q       vLLM's own gumbel_sample, loaded from a vLLM tree by the upstream audit's loader
                 (``LABKIT_VLLM=PATH``, else the installed vllm), as its drafter calls it: storing its
                 slot-indexed q (or logits cache)
    vllm_no_q    the same without the slot-indexed store
    flashinfer   FlashInfer's one-pass SamplingFromLogits (labkit.gpu.flashinfer_peer says where it
                 comes from); logits scaled beforehand, outside the timed call
    read_only    a Triton pass that only reads the logits, on the kit's grid: the floor of a no-q sampler
    copy         torch's copy of the same bytes as kit_q moves (read the logits, write q): its floor

Every peer is first checked (labkit.gpu.peer_checks: tokens in range, the right distribution);
one that fails its check, or cannot be had here, is listed under ``skipped`` with the reason and
not timed. The ratios the appendix prints are all taken within one run.
"""

from __future__ import annotations

import os
from dataclasses import replace

import torch
import triton
import triton.language as tl

from labkit.gpu.kernel import STEP, bytes_moved, kernel_case
from labkit.gpu.peer_checks import check_peer, tokens_in_range
from labkit.gpu.sizes import PEER_SHAPES
from labkit.gpu.timing import graphed, measure
from labkit.kernels.gumbel import gumbel_sample
from labkit.kernels.gumbel_tuning import launch_config, program_row_and_block
from labkit.kernels.sampling_state import SamplingState

VLLM_ENV = "LABKIT_VLLM"


@triton.jit
def _read_kernel(src_ptr, out_ptr, vocab, num_blocks, BLOCK_V: tl.constexpr):
    """Read a block of logits and keep only its max (one float per program): the sampling kernel's
    reads on its grid, and nothing else."""
    row, blk = program_row_and_block(0, False)
    offs = blk * BLOCK_V + tl.arange(0, BLOCK_V)
    x = tl.load(src_ptr + row.to(tl.int64) * vocab + offs, mask=offs < vocab, other=float("-inf"))
    tl.store(out_ptr + row * num_blocks + blk, tl.max(x, axis=0))


def read_only_pass(logits: torch.Tensor):
    rows, vocab = logits.shape
    cfg = launch_config(rows, vocab, interpreted=False)
    blocks = triton.cdiv(vocab, cfg["block_v"])
    out = torch.empty(rows, blocks, device=logits.device)

    def read() -> None:
        _read_kernel[(blocks, rows)](logits, out, vocab, blocks, BLOCK_V=cfg["block_v"], num_warps=cfg["num_warps"])

    read.keep_alive = (logits, out)
    return read


# -- the kit, as a checked sampler and as the timed calls ---------------------------------------------

def _kit_sampler(store_q: bool):
    def sample(logits, temperature, seeds, positions):
        rows, vocab = logits.shape
        slots = torch.arange(rows, dtype=torch.int32, device=logits.device)
        q = torch.empty(rows, 2, vocab, device=logits.device) if store_q else None
        return gumbel_sample(logits, SamplingState(slots, temperature, seeds, positions, q), draft_step=STEP,
                             backend="triton")
    return sample


def _kit_calls(case) -> dict:
    logits, state = case
    greedy = replace(state.with_q(None), temperature=torch.zeros_like(state.temperature))
    return {"kit_q": lambda: gumbel_sample(logits, state, draft_step=STEP, validate=False, backend="triton"),
            "kit_no_q": lambda: gumbel_sample(logits, state.with_q(None), draft_step=STEP, validate=False,
                                              backend="triton"),
            # Not a peer: the no-q call with every temperature 0 (no hash, no logs), what the
            # structure alone costs -- the difference to kit_no_q is the noise's work.
            "kit_no_q_no_noise": lambda: gumbel_sample(logits, greedy, draft_step=STEP, validate=False,
                                                       backend="triton")}


# -- vLLM ---------------------------------------------------------------------------------------------

def vllm_peer(log=print):
    """(module, api, provenance) of vLLM's sampling file, or (None, None, why not)."""
    try:
        from labkit.upstream.kernel_api import identify
        from labkit.upstream.loader import find_tree, load_vllm_sampling, tree_provenance
    except ImportError as err:
        return None, None, f"the kit's vLLM loader is missing ({err}); {VLLM_ENV}=PATH names a vLLM tree"
    try:
        tree = find_tree(os.environ.get(VLLM_ENV) or None)
        module = load_vllm_sampling(tree)
        api = identify(module)
    except Exception as err:  # no vLLM here, or a file the kit does not know: skipped by name
        return None, None, f"{type(err).__name__}: {err}"[:400] + f" (point {VLLM_ENV}=PATH at a vLLM tree)"
    prov = tree_provenance(tree)
    prov["api"] = api.name
    log(f"  vLLM {prov.get('version')} (commit {prov.get('commit')}, {api.name} API) from {tree}")
    return module, api, prov


def _vllm_call(module, api, logits, state: SamplingState, store_q: bool):
    from labkit.upstream.kernel_api import sample

    col = torch.tensor(STEP, dtype=torch.int64, device=logits.device)
    q = state.draft_logits if store_q else None
    mapping, positions = state.idx_mapping.to(torch.int32), state.positions.to(torch.int64)

    def call():  # q=None: the same launch without the slot-indexed store
        return sample(module, api, logits=logits, mapping=mapping, temperature=state.temperature,
                      seeds=state.seeds, positions=positions, q=q, col=col)
    return call


def _vllm_sampler(module, api, store_q: bool):
    def sample(logits, temperature, seeds, positions):
        rows, vocab = logits.shape
        slots = torch.arange(rows, dtype=torch.int32, device=logits.device)
        q = torch.empty(rows, 2, vocab, device=logits.device)
        return _vllm_call(module, api, logits, SamplingState(slots, temperature, seeds, positions, q), store_q)()
    return sample


# -- the section ----------------------------------------------------------------------------------------

def _available_peers(log) -> tuple[dict, dict, dict]:
    """(samplers by peer name, provenance, skipped: name -> reason), each sampler checked."""
    samplers, prov, skipped = {"kit_q": _kit_sampler(True), "kit_no_q": _kit_sampler(False)}, {}, {}
    module, api, vprov = vllm_peer(log)
    if module is None:
        skipped["vllm_q"] = skipped["vllm_no_q"] = vprov
    else:
        samplers["vllm_q"], samplers["vllm_no_q"] = _vllm_sampler(module, api, True), _vllm_sampler(module, api, False)
        prov["vllm"] = vprov
    from labkit.gpu.flashinfer_peer import flashinfer_sampler

    fi, fprov = flashinfer_sampler(log)
    if fi is None:
        skipped["flashinfer"] = fprov
    else:
        samplers["flashinfer"], prov["flashinfer"] = fi, fprov
    checks = {}
    for name in list(samplers):
        try:
            checks[name] = check_peer(samplers[name], "cuda")
        except Exception as err:
            checks[name] = {"ok": False, "why": f"{type(err).__name__}: {err}"[:400]}
        if not checks[name]["ok"]:
            skipped[name] = "failed its check: " + checks[name]["why"]
            del samplers[name]
        log(f"  check {name}: {'ok' if checks[name]['ok'] else checks[name]['why']}")
    for name, why in skipped.items():
        log(f"  skipped {name}: {why}")
    return {"samplers": samplers, "module": module, "api": api, "flashinfer": fi}, {**prov, "checks": checks}, skipped


def _timed_calls(rows: int, vocab: int, have: dict) -> dict:
    case = kernel_case(rows, vocab)
    logits, state = case
    kit = _kit_calls(case)
    calls = {"kit_no_q_no_noise": kit["kit_no_q_no_noise"]} if "kit_no_q" in have["samplers"] else {}
    for name in have["samplers"]:
        if name.startswith("kit"):
            calls[name] = kit[name]
        elif name.startswith("vllm"):
            calls[name] = _vllm_call(have["module"], have["api"], logits, state, name == "vllm_q")
    if "flashinfer" in have["samplers"]:
        scaled = logits / state.temperature[state.idx_mapping.long()][:, None]
        seeds = state.seeds[state.idx_mapping.long()].contiguous()
        offsets = state.positions.to(torch.int64).contiguous()
        out = torch.empty(rows, dtype=torch.int32, device="cuda")
        prescaled = have["flashinfer"].prescaled
        calls["flashinfer"] = lambda: prescaled(scaled, seeds, offsets, out)
    # Each call once eagerly: tokens in range at the timed shape too, before anything is timed.
    bad = {}
    for name, fn in calls.items():
        why = tokens_in_range(fn().reshape(-1), rows, vocab)
        if why:
            bad[name] = why
    src = torch.empty(rows * vocab, device="cuda").normal_()
    dst = torch.empty_like(src)
    refs = {"read_only": read_only_pass(logits), "copy": lambda: dst.copy_(src)}
    graphs = {name: graphed(fn, 1) for name, fn in {**calls, **refs}.items() if name not in bad}
    return {"ms": measure(graphs), "bad_at_shape": bad}


def bench_peers(shapes=PEER_SHAPES, log=print) -> dict:
    have, prov, skipped = _available_peers(log)
    sizes = []
    for rows, vocab in shapes:
        timed = _timed_calls(rows, vocab, have)
        ms = timed["ms"]
        entry = {"rows": rows, "vocab": vocab, "ms": ms,
                 "bytes": {"kit_q": bytes_moved(rows, rows, vocab), "read_only": bytes_moved(rows, rows, vocab, False)}}
        if timed["bad_at_shape"]:
            entry["bad_at_shape"] = timed["bad_at_shape"]
        entry["ratios"] = peer_ratios(ms)
        log(f"  {rows:>3} x {vocab:>6}: " + "  ".join(f"{n} {t * 1e3:7.1f} us" for n, t in ms.items()))
        log("      " + "  ".join(f"{n} {v:.2f}" for n, v in entry["ratios"].items()))
        sizes.append(entry)
        torch.cuda.empty_cache()
    return {"shapes": [list(s) for s in shapes], "sizes": sizes, "peers": prov, "skipped": skipped,
            "calls": {"kit_q": "labkit gumbel_sample, masked, storing q by slot (validate=False)",
                      "kit_no_q": "the same call with draft_logits=None",
                      "vllm_q": "vLLM gumbel_sample as its drafter calls it, storing q by slot (or its logits cache)",
                      "vllm_no_q": "vLLM gumbel_sample without the slot-indexed store",
                      "flashinfer": "FlashInfer SamplingFromLogits on logits scaled beforehand (not timed)",
                      "kit_no_q_no_noise": "kit_no_q with every temperature 0: no hash, no logs (a diagnostic)",
                      "read_only": "a Triton pass reading the logits on the kit's grid, one max per program",
                      "copy": "torch copy of the bytes kit_q moves (read logits, write q)"}}


def peer_ratios(ms: dict) -> dict:
    """The comparisons the appendix teaches, as time ratios within one run (absent peers left out):
    kit_q_over_vllm_q < 1 means the kit is faster; *_of_copy / *_of_read_only are the fraction of
    a reference's speed a call reaches (reference time / call time)."""
    pairs = {"kit_q_over_vllm_q": ("kit_q", "vllm_q"), "kit_no_q_over_vllm_no_q": ("kit_no_q", "vllm_no_q"),
             "kit_no_q_over_flashinfer": ("kit_no_q", "flashinfer")}
    out = {name: ms[a] / ms[b] for name, (a, b) in pairs.items() if a in ms and b in ms}
    for call, ref in (("kit_q", "copy"), ("vllm_q", "copy"), ("kit_no_q", "read_only"), ("vllm_no_q", "read_only"),
                      ("flashinfer", "read_only"), ("kit_no_q_no_noise", "read_only")):
        if call in ms and ref in ms:
            out[f"{call}_of_{ref}"] = ms[ref] / ms[call]
    return out
