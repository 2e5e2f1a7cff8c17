"""A toy speculative-decoding engine: requests come and go, the drafter runs padded, the target verifies.

Per engine step:

1. admit waiting requests that have arrived, while slots are free (each gets the lowest free
   request-state slot and keeps it for life; a finished request's slot is reused later);
2. the live requests, in admission order, are the batch rows -- rows shift when a request in the
   middle finishes, which is what leaves a live slot in a stale padded row;
3. the speculator drafts k tokens per row (eager on exactly num_reqs rows, or a padded graph);
4. the target model scores the k + 1 prefixes of each row, outside the graph, on num_reqs rows;
5. the rejection sampler decides what to emit; finished requests leave.

All randomness is keyed by (request seed, position), so a request's tokens do not depend on which
row it sat in or which other requests shared its batch: eager and graph runs agree token for token
unless the bug corrupts q. The engine keeps, per step, a :class:`StepRecord` with the mapping
buffer as the kernel saw it and which row wrote which slot.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from labkit import backends
from labkit.checks import check_backend, check_finite_weights, check_int, check_no_nan, same_device
from labkit.config import DrafterConfig
from labkit.errors import LabkitInputError
from labkit.kernels.rejection import rejection_sample
from labkit.kernels.sampling_state import SamplingState
from labkit.models import ToyModels, encode_context
from labkit.speculator import LaunchRecord, Speculator, build_speculator


@dataclass
class Request:
    rid: int
    prompt: list[int]
    max_new_tokens: int
    temperature: float = 1.0
    seed: int = 0
    arrival_step: int = 0
    output: list[int] = field(default_factory=list)
    slot: int | None = None  # the request-state slot, once admitted

    @property
    def done(self) -> bool:
        return len(self.output) >= self.max_new_tokens


class RequestStateTable:
    """Per-slot request state. A request keeps its slot for life; freed slots are reused lowest-first."""

    def __init__(self, max_num_reqs: int, device):
        self.max_num_reqs = max_num_reqs
        self.temperature = torch.zeros(max_num_reqs, dtype=torch.float32, device=device)
        self.seeds = torch.zeros(max_num_reqs, dtype=torch.int64, device=device)
        self._owner: list[Request | None] = [None] * max_num_reqs

    @property
    def num_free(self) -> int:
        return self._owner.count(None)

    def add(self, req: Request) -> int:
        if None not in self._owner:
            raise LabkitInputError(f"all {self.max_num_reqs} request slots are taken: check num_free before add()")
        slot = self._owner.index(None)
        self._owner[slot] = req
        req.slot = slot
        self.temperature[slot] = req.temperature
        self.seeds[slot] = req.seed
        return slot

    def remove(self, req: Request) -> None:
        self._owner[req.slot] = None
        # The slot's temperature and seed stay in the buffer (stale), as in a real engine.


@dataclass
class StepRecord:
    step: int
    rids: list[int]
    slots: list[int]
    launch: LaunchRecord | None
    num_emitted: list[int]
    num_accepted: list[int]


@dataclass
class RunResult:
    outputs: dict[int, list[int]]
    num_engine_steps: int
    num_drafted: int
    num_accepted: int
    num_emitted: int
    target_nll_sum: float
    wall_s: float
    records: list[StepRecord]

    @property
    def acceptance_rate(self) -> float:
        return self.num_accepted / self.num_drafted if self.num_drafted else float("nan")

    @property
    def mean_target_nll(self) -> float:
        return self.target_nll_sum / self.num_emitted if self.num_emitted else float("nan")

    @property
    def tokens_per_s(self) -> float:
        return self.num_emitted / self.wall_s if self.wall_s > 0 else float("nan")


def make_requests(tokenizer, prompts: list[str], seed: int = 0, *, min_new_tokens: int = 24,
                  max_new_tokens: int = 72, arrivals_per_step: float = 1.0,
                  temperatures=(0.8, 1.0)) -> list[Request]:
    """Seeded workload: staggered arrivals, different lengths, per-request seeds and temperatures."""
    if min_new_tokens < 1 or max_new_tokens < min_new_tokens:
        raise LabkitInputError("need 1 <= min_new_tokens <= max_new_tokens")
    rng = random.Random(seed)
    reqs = []
    for rid, prompt in enumerate(prompts):
        reqs.append(Request(
            rid=rid,
            prompt=tokenizer.encode(prompt),
            max_new_tokens=rng.randint(min_new_tokens, max_new_tokens),
            temperature=rng.choice(temperatures),
            seed=rng.getrandbits(62),
            arrival_step=int(rid / arrivals_per_step),
        ))
    return reqs


class Engine:
    """Runs requests to completion with the drafter of `config`, or with a prebuilt `speculator`.

    A prebuilt speculator (the workshop passes one whose sampler is a learner's kernel) brings
    its own configuration and its own `record` setting. `record` keeps a :class:`StepRecord` per
    engine step. Verification is not under test and runs outside the graph: in Triton's CPU
    interpreter the rejection kernel costs about a second per step, so there the engine verifies
    with its torch reference (tested equal to the kernel) unless `verify_backend` says otherwise.
    """

    def __init__(self, models: ToyModels, config: DrafterConfig | None = None, *, record: bool = False,
                 verify_backend: str | None = None, device=None, speculator: Speculator | None = None):
        if models.target.vocab_size != models.draft.vocab_size:
            raise LabkitInputError(
                f"target vocab {models.target.vocab_size} != draft vocab {models.draft.vocab_size}: "
                "speculative decoding compares p and q token by token, so both models need one vocabulary"
            )
        if speculator is not None and (config is not None or record):
            raise LabkitInputError("a prebuilt speculator brings its own config and record setting: pass "
                                   "either speculator= or config/record, not both")
        if speculator is not None and not isinstance(speculator, Speculator):
            raise LabkitInputError(f"speculator must be a labkit Speculator, got {type(speculator).__name__}")
        self.device = torch.device(device) if device is not None else next(models.target.parameters()).device
        for name, model in (("target", models.target), ("draft", models.draft)):
            where = next(model.parameters()).device
            if not same_device(where, self.device):
                raise LabkitInputError(f"the {name} model is on {where} but the engine runs on {self.device}: "
                                       "load the models there (load_toy_models(device))")
        check_finite_weights("the target model", models.target)  # the draft's: when its speculator is built
        if speculator is None:
            speculator = build_speculator(models.draft, config or DrafterConfig(), device=self.device, record=record)
        elif not same_device(speculator.device, self.device):
            raise LabkitInputError(f"the speculator's buffers are on {speculator.device}, the engine runs on "
                                   f"{self.device}")
        self.models = models
        self.speculator = speculator
        self.config = speculator.config
        self.record = speculator.record
        self.pad_id = models.tokenizer.pad_id
        # The scheduler's per-slot state lives on the host, as an engine's does: the speculator checks
        # it there at copy-in, reading nothing back from a GPU.
        self.table = RequestStateTable(self.config.max_num_reqs, "cpu")
        verify = verify_backend
        if verify is None:
            verify = "torch" if backends.backend() == "interpreter" else backends.backend()
        self.verify_backend = check_backend(verify)

    @torch.no_grad()
    def generate(self, requests: list[Request],
                 progress: Callable[[int, int], None] | None = None) -> RunResult:
        """Run all requests to completion. `progress(done, total)` is called as requests finish."""
        self._check_requests(requests)
        waiting = sorted(requests, key=lambda r: (r.arrival_step, r.rid))
        batch: list[Request] = []
        records: list[StepRecord] = []
        totals = dict(drafted=0, accepted=0, emitted=0, nll=0.0)
        finished = 0
        step = 0
        start = time.perf_counter()
        while waiting or batch:
            while waiting and waiting[0].arrival_step <= step and self.table.num_free:
                req = waiting.pop(0)
                self.table.add(req)
                batch.append(req)
            if not batch:
                step = waiting[0].arrival_step
                continue
            verdict, nll = self._step(batch, totals)
            emitted = verdict.num_emitted.tolist()
            tokens = verdict.tokens.tolist()
            for i, req in enumerate(batch):
                room = req.max_new_tokens - len(req.output)
                kept = tokens[i][: min(emitted[i], room)]
                req.output.extend(kept)
                totals["emitted"] += len(kept)
                totals["nll"] += float(nll[i, : len(kept)].sum())
            if self.record:
                records.append(StepRecord(
                    step=step, rids=[r.rid for r in batch], slots=[r.slot for r in batch],
                    launch=self.speculator.last_record, num_emitted=emitted,
                    num_accepted=verdict.num_accepted.tolist(),
                ))
            done = [r for r in batch if r.done]
            for req in done:
                self.table.remove(req)
            batch = [r for r in batch if not r.done]
            finished += len(done)
            if done and progress is not None:
                progress(finished, len(requests))
            step += 1
        wall = time.perf_counter() - start
        return RunResult(
            outputs={r.rid: list(r.output) for r in requests},
            num_engine_steps=len(records) if self.record else step,
            num_drafted=totals["drafted"], num_accepted=totals["accepted"], num_emitted=totals["emitted"],
            target_nll_sum=totals["nll"], wall_s=wall, records=records,
        )

    def _check_requests(self, requests: list[Request]) -> None:
        """Refuse, before anything runs, what would fail (or silently go wrong) deep inside a step."""
        vocab = self.models.target.vocab_size
        seen: set = set()
        for req in requests:
            if req.output or req.slot is not None:
                raise LabkitInputError(f"request {req.rid} was already run; make fresh requests")
            if req.rid in seen:
                raise LabkitInputError(f"two requests have rid {req.rid!r}: outputs are keyed by rid")
            seen.add(req.rid)
            what = f"request {req.rid}"
            check_int(f"{what}: max_new_tokens", req.max_new_tokens, low=1)
            check_int(f"{what}: arrival_step", req.arrival_step, low=0)
            check_int(f"{what}: seed", req.seed, low=-(2**63), high=2**63 - 1)
            t = req.temperature
            if isinstance(t, bool) or not isinstance(t, (int, float)) or math.isnan(t) or t < 0:
                raise LabkitInputError(f"{what}: temperature must be a number >= 0 (0 is greedy), got {t!r}")
            if any(isinstance(tok, bool) or not isinstance(tok, int) or not 0 <= tok < vocab for tok in req.prompt):
                raise LabkitInputError(f"{what}: the prompt must be token ids in [0, vocab={vocab})")

    def _step(self, batch: list[Request], totals: dict):
        k = self.config.k
        histories = [r.prompt + r.output for r in batch]
        slots = [r.slot for r in batch]
        positions = torch.tensor([len(h) for h in histories], dtype=torch.int64)  # on the host, as the table
        contexts = encode_context(histories, self.speculator.window, self.pad_id)
        drafts = self.speculator.propose(slots, self.table.temperature, self.table.seeds, contexts, positions)

        # Target scores every prefix: history + drafts[:j] for j = 0..k (outside the graph).
        draft_lists = drafts.tolist()
        prefixes = [h + d[:j] for h, d in zip(histories, draft_lists, strict=True) for j in range(k + 1)]
        target_ctx = encode_context(prefixes, self.models.target.context_len, self.pad_id).to(self.device)
        target_logits = self.models.target(target_ctx)[:, 0, :].view(len(batch), k + 1, -1)

        # The verification trusts what the engine hands it: slots, temperatures and seeds were
        # checked when the speculator copied them in, the drafts come from it, inside the vocabulary.
        # What enters here is the target's output, checked once.
        check_no_nan("target_logits", target_logits)
        spec = self.speculator
        # The slots' temperatures and seeds as the speculator copied them in, on its device.
        state = SamplingState(spec.idx_mapping, spec.temperature, spec.seeds, positions.to(self.device),
                              spec.draft_logits)
        verdict = rejection_sample(target_logits, drafts, state, validate=False, backend=self.verify_backend)
        totals["drafted"] += len(batch) * k
        totals["accepted"] += int(verdict.num_accepted.sum())
        # Quality measure: NLL of each emitted token under the target at temperature 1.
        logp = torch.log_softmax(target_logits.float(), dim=-1)
        safe_tokens = verdict.tokens.clamp(min=0)
        nll = -logp.gather(2, safe_tokens[:, :, None]).squeeze(2)
        return verdict, nll.cpu()
