"""Every public entry point answers right for any stride it accepts, or refuses with a LabkitInputError
that names the argument and what it must be: kernels, speculator, engine."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
from kernel_cases import DEVICE, KERNEL_BACKEND, Q_TOL, launch_case

from labkit import backends
from labkit.bench.scenario import TIMELINE
from labkit.config import DrafterConfig
from labkit.engine import Engine, Request, RequestStateTable
from labkit.errors import LabkitInputError
from labkit.graphs import GraphRunner
from labkit.kernels import SamplingState, WriteTrace, gumbel_sample, prepare_dflash_sample_mapping, rejection_sample
from labkit.kernels.gumbel import kernel_launcher
from labkit.models import ToyModels, encode_context, load_toy_models
from labkit.speculator import DFlashSpeculator, Speculator

M, K, V = 12, 3, 40
BACKENDS = sorted({KERNEL_BACKEND, "torch"})
UNAVAILABLE = "interpreter" if KERNEL_BACKEND == "triton" else "triton"


@pytest.fixture(scope="module")
def models(models):
    return models if DEVICE.type == "cpu" else load_toy_models(DEVICE)


def strided(t: torch.Tensor) -> torch.Tensor:
    """The same values as 1-D `t`, as every other element of a twice-as-long buffer."""
    buf = torch.full((2 * t.numel(),), 0, dtype=t.dtype, device=t.device)
    buf[::2] = t
    return buf[::2]


# -- gumbel_sample -----------------------------------------------------------------------------

def _launch(**change):
    change = dict(change)
    logits, mapping, temperature, seeds, positions = launch_case(11, 6, V, M, padded=2)
    args = dict(logits=logits, idx_mapping=mapping, temperature=temperature, seeds=seeds, positions=positions,
                draft_logits=torch.zeros(M, K, V, device=DEVICE))
    kwargs = {name: change.pop(name) for name in list(change) if name not in args}
    args.update({name: fn(args[name]) if callable(fn) else fn for name, fn in change.items()})
    logits = args.pop("logits")
    return gumbel_sample(logits, SamplingState(**args), **kwargs)


BAD_LAUNCHES = [
    (dict(backend="cuda"), r"backend must be one of 'triton', 'interpreter', 'torch'"),
    (dict(backend=UNAVAILABLE), rf"backend='{UNAVAILABLE}'.* not available|backend='{UNAVAILABLE}' \(compiled"),
    (dict(block_v=0), r"block_v must be a power of two in \[16, 65536\], got 0"),
    (dict(block_v=3), r"block_v must be a power of two .* got 3"),
    (dict(block_v=1 << 20), r"block_v must be a power of two"),
    (dict(num_warps=3), r"num_warps must be a power of two in \[1, 32\]"),
    (dict(fast_math=3), r"fast_math must be in \[0, 2\]"),
    (dict(draft_step=-1), r"draft_step must be >= 0"),
    (dict(draft_step=1.0), r"draft_step must be an integer"),
    (dict(samples_per_req=0), r"samples_per_req must be >= 1"),
    (dict(early_exit=True, masked=False), r"early_exit .* only the masked kernel"),
    (dict(logits=lambda t: t[:, :0], draft_logits=None), r"logits .* at least 1 token"),
    (dict(logits=lambda t: t.to(torch.int64)), r"logits must be .* floating point"),
    (dict(idx_mapping=lambda t: t[:, None]), r"idx_mapping must be 1-D"),
    (dict(idx_mapping=lambda t: t.float()), r"idx_mapping must be a signed integer"),
    (dict(idx_mapping=lambda t: t.to(torch.uint32)), r"idx_mapping has unsigned dtype.*4294967295"),
    (dict(idx_mapping=lambda t: t[:4]), r"6 rows but idx_mapping has 4"),
    (dict(seeds=lambda t: t.double()), r"seeds must be torch.int64"),
    (dict(seeds=lambda t: t.to(torch.int32)), r"seeds must be torch.int64"),
    (dict(seeds=lambda t: t[:5]), r"temperature and seeds .* same length"),
    (dict(temperature=lambda t: t.double()), r"temperature must be torch.float32"),
    (dict(positions=lambda t: t.float()), r"positions must be torch.int32 or torch.int64"),
    (dict(draft_logits=lambda t: t.double()), r"draft_logits must be torch.float32"),
    (dict(draft_logits=lambda t: t[:, :, :-1]), r"draft_logits must be \[max_num_reqs=12, k, vocab=40\]"),
    (dict(draft_step=3), r"draft steps 3..3 do not fit draft_logits with k=3"),
    (dict(draft_logits=lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)),
     r"draft_logits must have stride 1 along the vocabulary"),
    (dict(draft_logits=lambda t: t[:1].expand(M, K, V)), r"draft_logits is written in place.*overlap|map several"),
    (dict(trace="yes"), r"trace must be a WriteTrace"),
    (dict(trace=WriteTrace.empty(M, 1, DEVICE), draft_step=1), r"trace.writer must be a contiguous"),
    (dict(positions=lambda t: t.to("meta")), r"different devices"),
]


@pytest.mark.parametrize("change,match", BAD_LAUNCHES, ids=[m for _, m in BAD_LAUNCHES])
def test_gumbel_sample_refuses_bad_arguments_by_name(change, match):
    with pytest.raises(LabkitInputError, match=match):
        _launch(**change)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change,match", [
    (dict(idx_mapping=lambda t: torch.tensor([0, 12, 3, 4, -1, -1], dtype=torch.int32, device=DEVICE)),
     r"idx_mapping\[1\] holds slot 12: every slot must be < max_num_reqs=12"),
    (dict(temperature=lambda t: -t), r"temperature\[\d+\] is -[\d.]+: a temperature must be >= 0"),
    (dict(temperature=lambda t: torch.full_like(t, float("nan"))), r"temperature\[\d+\] is nan"),
    (dict(logits=lambda t: t.index_fill(1, torch.tensor([7], device=DEVICE), float("nan"))),
     r"logits holds NaN \(first at index \(0, 7\)\)"),
])
def test_gumbel_sample_refuses_values_it_cannot_sample_from(backend, change, match):
    with pytest.raises(LabkitInputError, match=match):
        _launch(backend=backend, **change)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("poison", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("early_exit", [False, True], ids=["", "early_exit"])
def test_padded_rows_may_hold_nan_or_inf_and_change_no_live_row(backend, poison, early_exit):
    """A padded row's logits (slot -1) are neither refused nor able to change any
    live row's token or q, whatever they hold; a NaN in a live row is still refused (above)."""
    logits, mapping, temperature, seeds, positions = launch_case(11, 6, V, M, padded=2)
    live = 4
    q_clean = torch.full((M, K, V), 3.0, device=DEVICE)
    want = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q_clean), draft_step=1,
                         early_exit=early_exit, backend=backend)
    bad = logits.clone()
    bad[live:, ::3] = poison  # part of each padded row
    bad[live + 1] = poison  # and one padded row whole
    q = torch.full((M, K, V), 3.0, device=DEVICE)
    got = gumbel_sample(bad, SamplingState(mapping, temperature, seeds, positions, q), draft_step=1,
                        early_exit=early_exit, backend=backend)
    assert torch.equal(got[:live], want[:live])
    assert torch.equal(q, q_clean)
    assert bool(((got >= 0) & (got < V)).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nan_in_a_live_row_is_refused_even_when_padded_rows_hold_nan_too(backend):
    logits, mapping, temperature, seeds, positions = launch_case(11, 6, V, M, padded=2)
    logits[4:] = float("nan")
    logits[2, 5] = float("nan")
    with pytest.raises(LabkitInputError, match=r"logits holds NaN \(first at index \(2, 5\)\)"):
        gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions,
                                            torch.zeros(M, K, V, device=DEVICE)), backend=backend)


@pytest.mark.gpu
def test_compiled_kernels_refuse_cpu_tensors_by_name():
    logits, mapping, temperature, seeds, positions = (t.cpu() for t in launch_case(11, 6, V, M))
    with pytest.raises(LabkitInputError, match="must be on CUDA"):
        gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions), backend="triton")


@pytest.mark.parametrize("backend", BACKENDS)
def test_gumbel_sample_gives_the_same_answer_for_any_strides(backend):
    logits, mapping, temperature, seeds, positions = launch_case(12, 6, V, M, padded=2)
    q = torch.full((M, K, V), 3.0, device=DEVICE)
    trace = WriteTrace.empty(M, K, DEVICE)
    want = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), draft_step=1, trace=trace,
                         backend=backend)
    # A draft_logits view with other slot and step strides, inside a bigger buffer that must stay as it was.
    big = torch.full((2 * M, K + 2, V), 3.0, device=DEVICE)
    q_view = big[::2, 1: K + 1]
    trace_b = WriteTrace.empty(M, K, DEVICE)
    got = gumbel_sample(logits.t().contiguous().t(),
                        SamplingState(strided(mapping), strided(temperature), strided(seeds), strided(positions),
                                      q_view),
                        draft_step=1, trace=trace_b, backend=backend)
    assert not logits.t().contiguous().t().is_contiguous() and not q_view.is_contiguous()
    assert torch.equal(got.cpu(), want.cpu())
    torch.testing.assert_close(q_view.cpu(), q.cpu(), **Q_TOL)
    assert torch.equal(trace_b.writes.cpu(), trace.writes.cpu())
    untouched = torch.ones(2 * M, K + 2, dtype=torch.bool)
    untouched[::2, 1: K + 1] = False
    assert bool((big.cpu()[untouched] == 3.0).all()), "nothing stored outside the view"
    # A temperature broadcast from one value (stride 0) is only read: it is fine too.
    one = torch.full((1,), 0.9, device=DEVICE)
    assert torch.equal(
        gumbel_sample(logits, SamplingState(mapping, one.expand(M), seeds, positions), backend=backend).cpu(),
        gumbel_sample(logits, SamplingState(mapping, torch.full((M,), 0.9, device=DEVICE), seeds, positions),
                      backend=backend).cpu())


@pytest.mark.skipif(not backends.HAS_TRITON, reason="the launcher exists with Triton only")
def test_kernel_launcher_refuses_layouts_it_would_misread():
    logits, mapping, temperature, seeds, positions = launch_case(12, 6, V, M)
    with pytest.raises(LabkitInputError, match=r"reads idx_mapping with stride 1.*\.contiguous\(\)"):
        kernel_launcher(logits, SamplingState(strided(mapping), temperature, seeds, positions))
    with pytest.raises(LabkitInputError, match=r"reads logits with stride 1 along dimension 1"):
        kernel_launcher(logits.t().contiguous().t(), SamplingState(mapping, temperature, seeds, positions))
    with pytest.raises(LabkitInputError, match=r"block_v must be a power of two"):
        kernel_launcher(logits, SamplingState(mapping, temperature, seeds, positions), block_v=48)


# -- DFlash preparation ------------------------------------------------------------------------

def _prepare(**change):
    change = dict(change)
    mapping = torch.arange(4, dtype=torch.int32, device=DEVICE)
    args = dict(idx_mapping=mapping, positions=torch.arange(4, device=DEVICE) * 10,
                sample_idx_mapping=torch.zeros(4 * K, dtype=torch.int32, device=DEVICE),
                sample_pos=torch.zeros(4 * K, dtype=torch.int64, device=DEVICE))
    kwargs = dict(num_reqs=2, k=K)
    kwargs.update({name: change.pop(name) for name in list(change) if name not in args})
    args.update({name: fn(args[name]) for name, fn in change.items()})
    prepare_dflash_sample_mapping(*args.values(), **kwargs)
    return args


@pytest.mark.parametrize("change,match", [
    (dict(num_reqs=-1), r"num_reqs must be >= 0, got -1"),
    (dict(num_reqs=5), r"num_reqs=5 requests x k=3 = 15 sample rows do not fit .*room for 4"),
    (dict(num_reqs=2.0), r"num_reqs must be an integer"),
    (dict(k=0), r"k must be >= 1"),
    (dict(pad_value=2**40), r"pad_value=1099511627776 does not fit .*torch.int32.* 2\*\*40 to 0"),
    (dict(pad_value=-2), r"pad_value must be -1 .* got -2"),
    (dict(pad_value=4), r"pad_value must be -1 .* slot in \[0, 4\)"),
    (dict(pad_value=0.0), r"pad_value must be an integer"),
    (dict(backend="gpu"), r"backend must be one of"),
    (dict(idx_mapping=lambda t: t[None]), r"idx_mapping must be 1-D"),
    (dict(positions=lambda t: t.float()), r"positions must be torch.int32 or torch.int64"),
    (dict(sample_pos=lambda t: t[:-1]), r"same length"),
    (dict(sample_idx_mapping=lambda t: t[:1].expand(4 * K)), r"sample_idx_mapping is written in place"),
])
def test_dflash_prepare_refuses_bad_arguments_by_name(change, match):
    with pytest.raises(LabkitInputError, match=match):
        _prepare(**change)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dflash_prepare_writes_through_strided_views_and_nowhere_else(backend):
    want = _prepare(backend=backend, num_reqs=3)
    big_map = torch.full((3 * 4 * K,), 77, dtype=torch.int32, device=DEVICE)
    big_pos = torch.full((2 * 4 * K,), 77, dtype=torch.int64, device=DEVICE)
    got = _prepare(backend=backend, num_reqs=3, idx_mapping=strided, positions=strided,
                   sample_idx_mapping=lambda t: big_map[1::3], sample_pos=lambda t: big_pos[::2])
    assert torch.equal(got["sample_idx_mapping"].cpu(), want["sample_idx_mapping"].cpu())
    assert torch.equal(got["sample_pos"].cpu(), want["sample_pos"].cpu())
    assert bool((big_map[0::3] == 77).all() and (big_map[2::3] == 77).all() and (big_pos[1::2] == 77).all())


# -- rejection_sample --------------------------------------------------------------------------

def _verify_inputs():
    g = torch.Generator().manual_seed(5)
    n = 4
    target = 2 * torch.randn(n, K + 1, V, generator=g)
    q = 2 * torch.randn(M, K, V, generator=g)
    drafts = torch.randint(0, V, (n, K), generator=g)
    mapping = torch.tensor([3, 0, 7, 5], dtype=torch.int32)
    temperature = 0.5 + torch.rand(M, generator=g)
    seeds = torch.randint(0, 2**62, (M,), generator=g)
    positions = torch.randint(0, 500, (n,), generator=g)
    return [t.to(DEVICE) for t in (target, q, drafts, mapping, temperature, seeds, positions)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change,match", [
    (dict(drafts=lambda t: t.index_fill(1, torch.tensor([1], device=DEVICE), V)),
     rf"draft_tokens\[0, 1\] is {V}: every draft token must be in \[0, vocab={V}\)"),
    (dict(drafts=lambda t: t.index_fill(1, torch.tensor([2], device=DEVICE), -1)), r"draft_tokens\[0, 2\] is -1"),
    (dict(drafts=lambda t: t.float()), r"draft_tokens must be torch.int32 or torch.int64"),
    (dict(mapping=lambda t: torch.tensor([3, -1, 7, 5], dtype=torch.int32, device=DEVICE)),
     r"idx_mapping\[1\] holds slot -1: every slot must be \[0, max_num_reqs=12\)"),
    (dict(temperature=lambda t: -t), r"temperature\[3\] is -"),
    (dict(seeds=lambda t: t.double()), r"seeds must be torch.int64"),
    (dict(target=lambda t: t[:, :, :0], q=lambda t: t[:, :, :0]), r"target_logits must be .*vocab >= 1"),
    (dict(target=lambda t: t.index_fill(2, torch.tensor([4], device=DEVICE), float("nan"))),
     r"target_logits holds NaN"),
    (dict(backend="cpu"), r"backend must be one of"),
])
def test_rejection_sample_refuses_bad_arguments_by_name(backend, change, match):
    names = ("target", "q", "drafts", "mapping", "temperature", "seeds", "positions")
    args = dict(zip(names, _verify_inputs(), strict=True))
    change = dict(change)
    backend = change.pop("backend", backend)
    args.update({name: fn(args[name]) for name, fn in change.items()})
    with pytest.raises(LabkitInputError, match=match):
        rejection_sample(args["target"], args["drafts"], SamplingState(args["mapping"], args["temperature"],
                         args["seeds"], args["positions"], args["q"]), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rejection_sample_gives_the_same_verdict_for_any_strides(backend):
    target, q, drafts, mapping, temperature, seeds, positions = _verify_inputs()
    want = rejection_sample(target, drafts, SamplingState(mapping, temperature, seeds, positions, q), backend=backend)
    strided_state = SamplingState(strided(mapping), strided(temperature), strided(seeds), strided(positions),
                                  q.transpose(1, 2).contiguous().transpose(1, 2))
    got = rejection_sample(target.transpose(0, 2).contiguous().transpose(0, 2), drafts.t().contiguous().t(),
                           strided_state, backend=backend)
    assert torch.equal(got.tokens.cpu(), want.tokens.cpu())
    assert torch.equal(got.num_accepted.cpu(), want.num_accepted.cpu())


# -- Speculator --------------------------------------------------------------------------------

def _step_inputs(models, slots, spec_m=8):
    g = torch.Generator().manual_seed(3)
    histories = [torch.randint(1, models.draft.vocab_size, (20,), generator=g).tolist() for _ in slots]
    return dict(slots=torch.tensor(slots, dtype=torch.int32, device=DEVICE),
                temperature=torch.linspace(0.6, 1.0, spec_m, device=DEVICE),
                seeds=torch.arange(spec_m, dtype=torch.int64, device=DEVICE) * 1000 + 7,
                contexts=encode_context(histories, models.draft.context_len).to(DEVICE),
                positions=torch.full((len(slots),), 20, dtype=torch.int64, device=DEVICE))


@pytest.mark.parametrize("change,match", [
    (dict(slots=[2, 2, 5]), r"live slots must be distinct, got \[2, 2, 5\]: rows 0 and 1 both hold slot 2.*"
                            r"store into the same q and one would overwrite the other"),
    (dict(slots=[0, -5, 3]), r"row 1 holds slot -5"),
    (dict(slots=[0, 8]), r"live slots must lie in \[0, 8\); row 1 holds slot 8"),
    (dict(slots=[0.5, 1.0]), r"slots must be a 1-D list or tensor of integer"),
    (dict(slots=[[0, 1]]), r"slots must be a 1-D"),
    (dict(temperature=lambda t: t[:4]), r"temperature must be a floating tensor of shape \[8\]"),
    (dict(temperature=lambda t: t.index_fill(0, torch.tensor([1], device=DEVICE), -1.0)),
     r"temperature\[1\] is -1.0: a temperature must be >= 0"),
    (dict(temperature=lambda t: t.index_fill(0, torch.tensor([2], device=DEVICE), float("nan"))),
     r"temperature\[2\] is nan"),
    (dict(seeds=lambda t: t.double()), r"seeds must be a integer tensor"),
    (dict(contexts=lambda t: t + 1000), r"contexts must hold token ids in \[0, vocab="),
    (dict(contexts=lambda t: t.float()), r"contexts must be a integer tensor"),
    (dict(positions=lambda t: t.float()), r"positions must be a integer tensor"),
    (dict(positions=lambda t: t.to("meta")), r"different devices"),
])
def test_propose_refuses_bad_step_inputs_by_name(models, change, match):
    spec = Speculator(models.draft, TIMELINE)
    inputs = _step_inputs(models, [0, 1, 2])
    inputs.update({name: fn(inputs[name]) if callable(fn) else fn for name, fn in change.items()})
    with pytest.raises(LabkitInputError, match=match):
        spec.propose(*inputs.values())


def test_propose_refuses_rows_the_buffers_do_not_have(models):
    spec = Speculator(models.draft, DrafterConfig(max_num_reqs=4, k=2, capture_sizes=(1, 8)))
    with pytest.raises(LabkitInputError, match=r"pad to the capture size 8, but the buffers have max_num_reqs=4"):
        spec.propose(*_step_inputs(models, [0, 1], spec_m=4).values())
    for rows in (0, 5, 2.0):
        with pytest.raises(LabkitInputError, match=r"rows must be an integer in \[1, max_num_reqs=4\]"):
            spec.run_rows(rows)


@pytest.mark.parametrize("cls", [Speculator, DFlashSpeculator])
def test_propose_gives_the_same_drafts_for_any_strides(models, cls):
    def spec():
        return cls(models.draft, replace(TIMELINE, drafter=cls.drafter).with_pr_fix())

    inputs = _step_inputs(models, [5, 0, 3])
    want = spec().propose(*inputs.values())
    odd = dict(slots=strided(inputs["slots"]), temperature=strided(inputs["temperature"]),
               seeds=strided(inputs["seeds"]), contexts=inputs["contexts"].t().contiguous().t(),
               positions=strided(inputs["positions"]))
    assert torch.equal(spec().propose(*odd.values()).cpu(), want.cpu())
    assert torch.equal(spec().propose([5, 0, 3], *list(inputs.values())[1:]).cpu(), want.cpu()), "a list of slots"


def _nan_model(model):
    broken = copy.deepcopy(model)
    with torch.no_grad():
        next(broken.parameters()).fill_(float("nan"))
    return broken


def test_nan_weights_are_refused_by_name_or_still_give_tokens_inside_the_vocabulary(models):
    broken = _nan_model(models.draft)
    inputs = _step_inputs(models, [0, 1, 2])
    first = next(name for name, _ in broken.named_parameters())
    with pytest.raises(LabkitInputError, match=rf"the draft model's weights hold NaN or inf \(first in {first}\).*"
                                               "damaged weight file"):
        Speculator(broken, TIMELINE)
    unchecked = Speculator(broken, TIMELINE, validate=False)
    drafts = unchecked.propose(*inputs.values())
    assert bool(((drafts >= 0) & (drafts < models.draft.vocab_size)).all())


# -- Engine ------------------------------------------------------------------------------------

SMALL = DrafterConfig(k=2, max_num_reqs=4, capture_sizes=(1, 2, 4))


@pytest.mark.parametrize("change,match", [
    (dict(temperature=-1.0), r"request 0: temperature must be a number >= 0"),
    (dict(temperature=float("nan")), r"request 0: temperature must be a number >= 0"),
    (dict(prompt=[1, 10_000]), r"request 0: the prompt must be token ids in \[0, vocab="),
    (dict(max_new_tokens=0), r"request 0: max_new_tokens must be >= 1"),
    (dict(seed=1.5), r"request 0: seed must be an integer"),
    (dict(rid=1), r"two requests have rid 1"),
])
def test_engine_refuses_bad_requests_before_running_them(models, change, match):
    reqs = [Request(rid=0, prompt=[1, 2, 3], max_new_tokens=3), Request(rid=1, prompt=[4, 5], max_new_tokens=3)]
    for name, value in change.items():
        setattr(reqs[0], name, value)
    with pytest.raises(LabkitInputError, match=match):
        Engine(models, SMALL).generate(reqs)


def test_engine_refuses_bad_configurations_by_name(models):
    with pytest.raises(LabkitInputError, match=r"backend must be one of"):
        Engine(models, SMALL, verify_backend="fast")
    with pytest.raises(LabkitInputError, match=r"the target model is on .* but the engine runs on meta"):
        Engine(models, SMALL, device="meta")


@pytest.mark.parametrize("which", ["draft", "target"])
def test_engine_with_nan_weights_refuses_by_name_instead_of_crashing(models, which):
    parts = dict(tokenizer=models.tokenizer, target=models.target, draft=models.draft)
    parts[which] = _nan_model(parts[which])
    with pytest.raises(LabkitInputError, match=rf"the {which} model's weights hold NaN or inf"):
        Engine(ToyModels(**parts), SMALL)


def test_sizes_and_counts_must_be_integers(models):
    with pytest.raises(LabkitInputError, match=r"num_reqs must be an integer, got 2.5"):
        GraphRunner([1, 2, 4]).rows_for(2.5)
    with pytest.raises(LabkitInputError, match=r"max_num_reqs must be an integer, got 8.0"):
        Speculator(models.draft, DrafterConfig(max_num_reqs=8.0))
    with pytest.raises(LabkitInputError, match=r"k must be >= 1, got 0"):
        Speculator(models.draft, DrafterConfig(k=0))
    with pytest.raises(LabkitInputError, match=r"device=meta but the draft model is on"):
        Speculator(models.draft, device="meta")
    table = RequestStateTable(1, DEVICE)
    table.add(Request(rid=0, prompt=[1], max_new_tokens=1))
    with pytest.raises(LabkitInputError, match=r"all 1 request slots are taken"):
        table.add(Request(rid=1, prompt=[1], max_new_tokens=1))
