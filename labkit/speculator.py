"""The padded speculator: persistent buffers, the input copy, and two drafters.

This is a miniature of vLLM model runner v2's speculative-decoding path, small enough for a laptop:

    idx_mapping    int32   [max_num_reqs]           batch row -> request-state slot
    temperature    float32 [max_num_reqs]           by slot, copied whole each step
    seeds          int64   [max_num_reqs]           by slot, copied whole each step
    input_tokens   int64   [max_num_reqs, window]   by row: the draft model's context
    positions      int64   [max_num_reqs]           by row: position of the token being drafted
    draft_tokens   int64   [max_num_reqs, k]        by row: the proposals
    draft_logits   float32 [max_num_reqs, k, V]     by slot: q, only for probabilistic drafting

Each step :meth:`Speculator.copy_request_inputs` writes the live part; what the padded part holds
is what notebook 02 shows and notebook 07's first exercise asks about. Then the
drafter runs on ``num_reqs_padded`` rows (graph mode) or ``num_reqs`` rows (eager), through
:class:`~labkit.graphs.GraphRunner`.

What runs is one :class:`~labkit.config.DrafterConfig`: the drafter, k, the slots, the capture
sizes, graphs or eager, and which parts of the PR's fix are on (:class:`~labkit.config.FixSwitches`;
notebook 03 turns each on alone).

Upstream this is ``DraftModelSpeculator`` in ``vllm/v1/worker/gpu/spec_decode/speculator.py`` (its
``_copy_request_inputs`` holds the host side) and ``DFlashSpeculator`` in
``vllm/v1/worker/gpu/spec_decode/dflash/speculator.py``; docs/VLLM_MAP.md maps and compares them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch

from labkit.checks import (
    check_finite_weights,
    check_mapping_dtype,
    check_num_reqs,
    check_same_device,
    check_temperatures,
    same_device,
)
from labkit.config import DrafterConfig, dflash_pad
from labkit.errors import LabkitInputError, padded_slot_error
from labkit.graphs import GraphRunner
from labkit.kernels.dflash_prep import prepare_dflash_sample_mapping
from labkit.kernels.gumbel import WriteTrace, gumbel_sample
from labkit.kernels.sampling_state import SamplingState


@dataclass
class LaunchRecord:
    """What one propose call looked like from inside, for the notebooks and the audit."""

    num_reqs: int
    rows: int  # rows the kernels processed (num_reqs_padded in graph mode)
    live_slots: list[int]
    mapping: torch.Tensor  # the row -> slot mapping the sampling kernel read, all of it (CPU copy)
    samples_per_req: int  # 1 for autoregressive drafting; k for DFlash (mapping has a row per sample)
    writer: torch.Tensor | None  # [max_num_reqs, k]: row whose store landed last (-1: none)
    writes: torch.Tensor | None  # [max_num_reqs, k]: how many rows stored there
    row_logits: torch.Tensor | None  # [rows, k, V] raw draft logits each row computed
    temperature: torch.Tensor  # [max_num_reqs] as copied this step
    draft_logits: torch.Tensor | None  # [max_num_reqs, k, V] q after the launch (by slot)

    def __repr__(self) -> str:
        # What a notebook shows for `launch` at the prompt: the launch in one line, not its tensors.
        return (f"LaunchRecord({self.num_reqs} live rows in a graph of {self.rows} rows, live slots "
                f"{self.live_slots}, mapping read {self.mapping.tolist()}, {len(self.collisions())} q overwritten)")

    def own_sample_row(self, live_row: int, step: int) -> int:
        """The sample row whose store into q[slot of `live_row`, `step`] is the right one.

        Autoregressive drafting samples every step in the live row itself; DFlash-style drafting
        has one sample row per (request, step), row ``live_row * k + step``.
        """
        if self.samples_per_req > 1:
            return live_row * self.samples_per_req + step
        return live_row

    def collisions(self) -> list[tuple[int, int, int, int]]:
        """(slot, step, padded row that wrote last, live row that owned it) for overwritten q."""
        if self.writer is None:
            return []
        owner = {slot: row for row, slot in enumerate(self.live_slots)}
        found = []
        for slot, live_row in owner.items():
            for step in range(self.writer.shape[1]):
                w = int(self.writer[slot, step])
                if w >= 0 and w != self.own_sample_row(live_row, step):
                    found.append((slot, step, w, live_row))
        return found


class Speculator:
    """Autoregressive drafter (EAGLE/MTP style): k draft steps, each a forward and a sampling launch.

    `config` says what runs (:class:`~labkit.config.DrafterConfig`); `record` keeps a
    :class:`LaunchRecord` of every propose call (`last_record`).
    The step's inputs are checked once, when :meth:`copy_request_inputs` copies them in (slots,
    temperatures, seeds, contexts, positions), where they are: inputs from the host (as an engine
    hands them over) are checked on the host and read nothing back from a GPU; the k sampling
    launches of a step trust them and read nothing back either, so a step on a GPU never waits for
    it. `validate` checks the draft model's weights once, here: NaN or inf weights would give NaN
    logits (benchmarks turn it off). `sampler`, if given, replaces
    :func:`~labkit.kernels.gumbel.gumbel_sample`: it is called as ``sampler(logits, state, *,
    draft_step, samples_per_req, masked, trace)`` with the speculator's
    :class:`~labkit.kernels.sampling_state.SamplingState`, which both gumbel_sample and
    gumbel_sample_torch accept (the workshop plugs a learner's kernel in here).
    """

    drafter = "autoregressive"

    def __init__(
        self,
        draft_model: torch.nn.Module,
        config: DrafterConfig = DrafterConfig(),
        *,
        device: torch.device | str | None = None,
        mapping_dtype: torch.dtype = torch.int32,
        record: bool = False,
        validate: bool = True,
        sampler: Callable[..., torch.Tensor] | None = None,
    ):
        if not isinstance(config, DrafterConfig) or config.drafter != self.drafter:
            raise LabkitInputError(f"{type(self).__name__} runs a DrafterConfig with drafter={self.drafter!r}, "
                                   f"got {config!r}; build_speculator picks the class for a config")
        if sampler is not None and not callable(sampler):
            raise LabkitInputError(f"sampler must be a function with gumbel_sample's signature, got {sampler!r}")
        model_device = next(draft_model.parameters()).device
        device = torch.device(device) if device is not None else model_device
        if not same_device(device, model_device):
            raise LabkitInputError(f"device={device} but the draft model is on {model_device}: the buffers and "
                                   "the model must share a device")
        self.model = draft_model
        self.device = device
        self.config = config
        self.max_num_reqs = config.max_num_reqs
        self.k = config.k
        self.fix = config.fix
        self.probabilistic = config.probabilistic
        self.record = record
        self.validate = validate
        if validate:
            check_finite_weights("the draft model", draft_model)
        self.sampler = sampler if sampler is not None else functools.partial(gumbel_sample, validate=False)
        self.vocab_size = draft_model.vocab_size
        self.window = draft_model.context_len
        self._allocate_buffers(mapping_dtype)
        self.runner = GraphRunner(config.capture_sizes, mode="full" if config.use_graphs else "eager", device=device)
        self.last_record: LaunchRecord | None = None

    def _allocate_buffers(self, mapping_dtype: torch.dtype) -> None:
        M, k, V, device = self.max_num_reqs, self.k, self.vocab_size, self.device
        # NOTE: idx_mapping is signed on purpose: -1 marks a padded row.
        self.idx_mapping = torch.zeros(M, dtype=mapping_dtype, device=device)
        check_mapping_dtype(self.idx_mapping)
        self.temperature = torch.zeros(M, dtype=torch.float32, device=device)
        self.seeds = torch.zeros(M, dtype=torch.int64, device=device)
        self.input_tokens = torch.zeros(M, self.window, dtype=torch.int64, device=device)
        self.positions = torch.zeros(M, dtype=torch.int64, device=device)
        self.draft_tokens = torch.zeros(M, k, dtype=torch.int64, device=device)
        self.draft_logits = torch.zeros(M, k, V, dtype=torch.float32, device=device) if self.probabilistic else None
        self.trace = WriteTrace.empty(M, k, device) if self.record else None
        self.row_logits = torch.zeros(M * self.samples_per_req, k if self.samples_per_req == 1 else 1, V,
                                      dtype=torch.float32, device=device) if self.record else None

    samples_per_req = 1

    # -- the step's inputs --------------------------------------------------------------------

    def copy_request_inputs(self, slots, temperature: torch.Tensor, seeds: torch.Tensor,
                            contexts: torch.Tensor, positions: torch.Tensor, *, check_inputs: bool = True) -> int:
        """Write this step's live rows into the persistent buffers; returns num_reqs.

        slots: the live rows' request slots, distinct, in [0, max_num_reqs) (a list or an integer
        tensor); temperature (floating, >= 0, not NaN for live slots) and seeds (integer):
        [max_num_reqs], by slot; contexts: [num_reqs, window] token ids in [0, vocab); positions:
        [num_reqs] integers. Any strides. Anything else is refused with a LabkitInputError.
        `check_inputs=False` copies without looking (the GPU benchmark's floor for what the checks
        cost: labkit/gpu/drafter.py); the caller vouches for the inputs.
        """
        if check_inputs:
            slots = self._live_slots(slots)
            self._check_step_inputs(int(slots.numel()), temperature, seeds, contexts, positions)
            self._check_step_values(temperature, slots, contexts)
        else:
            slots = torch.as_tensor(slots).to(dtype=self.idx_mapping.dtype)
        num_reqs = int(slots.numel())
        # From the host, the copies need not wait for the GPU (they are staged); nothing here reads
        # the GPU back.
        self.temperature.copy_(temperature, non_blocking=True)
        self.seeds.copy_(seeds, non_blocking=True)
        self.copy_idx_mapping(slots.to(self.device, non_blocking=True))
        self.input_tokens[:num_reqs].copy_(contexts, non_blocking=True)
        self.positions[:num_reqs].copy_(positions, non_blocking=True)
        return num_reqs

    def copy_idx_mapping(self, slots: torch.Tensor) -> None:
        """Write this step's row -> slot mapping into the persistent buffer the padded graph reads.

        slots: the live rows' slots, already checked, of the buffer's dtype and device. Rows past
        them are the padding: before the fix they keep whatever earlier steps left there."""
        num_reqs = slots.numel()
        self.idx_mapping[:num_reqs].copy_(slots)
        if self.fix.host:
            # Part 1 of the fix: padded rows say "no request" instead of keeping stale slots.
            self.idx_mapping[num_reqs:].fill_(-1)

    def _live_slots(self, slots) -> torch.Tensor:
        """The live slots as a tensor of the mapping's dtype where they came from, or a refusal that says why."""
        if isinstance(slots, list) and all(type(v) is int for v in slots):
            # The engine's form, a list of ints: checked as it is, one tensor made at the end.
            t, values = None, slots
        else:
            t = slots if isinstance(slots, torch.Tensor) else torch.as_tensor(slots)
            if t.numel() == 0:
                t = t.to(torch.int64)
            if t.dim() != 1 or t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
                raise LabkitInputError(f"slots must be a 1-D list or tensor of integer slot numbers, got "
                                       f"{t.dtype} of shape {tuple(t.shape)}")
            values = [int(v) for v in t.tolist()]
        check_num_reqs(len(values), self.max_num_reqs)
        for row, slot in enumerate(values):
            if not 0 <= slot < self.max_num_reqs:
                raise LabkitInputError(f"live slots must lie in [0, {self.max_num_reqs}); row {row} holds "
                                       f"slot {slot} (slots {values})")
        seen: dict[int, int] = {}
        for row, slot in enumerate(values):
            if slot in seen:
                raise LabkitInputError(
                    f"live slots must be distinct, got {values}: rows {seen[slot]} and {row} both hold slot "
                    f"{slot}. Each row stores its draft distribution q into draft_logits[slot], so two live "
                    "rows with one slot would store into the same q and one would overwrite the other -- "
                    "the corruption that PR #47066 fixes for padded rows"
                )
            seen[slot] = row
        if t is None:
            return torch.tensor(values, dtype=self.idx_mapping.dtype)
        return t.to(dtype=self.idx_mapping.dtype)

    def _check_step_inputs(self, num_reqs, temperature, seeds, contexts, positions) -> None:
        M = self.max_num_reqs
        for name, t, shape, kind in (("temperature", temperature, (M,), "floating"),
                                     ("seeds", seeds, (M,), "integer"),
                                     ("contexts", contexts, (num_reqs, self.window), "integer"),
                                     ("positions", positions, (num_reqs,), "integer")):
            if not isinstance(t, torch.Tensor):
                raise LabkitInputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            right_kind = t.is_floating_point() if kind == "floating" else (
                not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool)
            if tuple(t.shape) != shape or not right_kind:
                raise LabkitInputError(f"{name} must be a {kind} tensor of shape {list(shape)} "
                                       f"(max_num_reqs={M}, num_reqs={num_reqs}), got {t.dtype} {list(t.shape)}")
        where = check_same_device(temperature=temperature, seeds=seeds, contexts=contexts, positions=positions)
        if where.type != "cpu" and not same_device(where, self.device):
            raise LabkitInputError(f"the step's inputs are on {where}; give them from the host (CPU) or on the "
                                   f"speculator's device, {self.device}")

    def _check_step_values(self, temperature, slots, contexts) -> None:
        """The values the step reads: context token ids inside the vocabulary, the live slots'
        temperatures >= 0 and not NaN. Checked where the inputs are: on the host, no GPU is read
        (inputs handed over on the GPU cost one read-back, at this public edge); the checks that
        name what is wrong run only when something is."""
        if temperature.device.type == "cpu" and contexts.device.type == "cpu":
            # From the host (the engine's way): two reads and a few comparisons in Python, instead of a
            # dozen small torch ops, whose dispatch is most of a small draft step's check time.
            temps = temperature.tolist()
            bad = not all(temps[s] >= 0 for s in slots.tolist())  # False for NaN too
            if contexts.numel() and not bad:
                low, high = torch.aminmax(contexts)
                bad = int(low) < 0 or int(high) >= self.vocab_size
        else:  # on the GPU: one read-back, of the combined answer
            used = temperature[slots.to(device=temperature.device, dtype=torch.int64)]
            bad = ((used < 0) | used.isnan()).any()
            if contexts.numel():
                bad = bad | ((contexts < 0) | (contexts >= self.vocab_size)).any()
        if not bool(bad):
            return
        if contexts.numel() and (int(contexts.min()) < 0 or int(contexts.max()) >= self.vocab_size):
            raise LabkitInputError(f"contexts must hold token ids in [0, vocab={self.vocab_size}), got values "
                                   f"from {int(contexts.min())} to {int(contexts.max())}")
        check_temperatures(temperature, slots.to(device=temperature.device, dtype=torch.int64))

    # -- proposing ----------------------------------------------------------------------------

    def propose(self, slots, temperature, seeds, contexts, positions, *, check_inputs: bool = True) -> torch.Tensor:
        """Draft k tokens for each live row; returns [num_reqs, k] (a copy). `check_inputs`: as in
        :meth:`copy_request_inputs`."""
        num_reqs = self.copy_request_inputs(slots, temperature, seeds, contexts, positions,
                                            check_inputs=check_inputs)
        self._prepare_sample_rows(num_reqs)
        rows = self.runner.rows_for(num_reqs)
        if rows > self.max_num_reqs:
            raise LabkitInputError(
                f"{num_reqs} requests pad to the capture size {rows}, but the buffers have max_num_reqs="
                f"{self.max_num_reqs} rows: give a capture size between {num_reqs} and {self.max_num_reqs}"
            )
        self._refuse_unmasked_negative_slots(num_reqs, rows)
        if self.trace is not None:
            self.trace.reset()
        self.runner.run(num_reqs, self.run_rows)
        if self.record:
            self.last_record = self._make_record(num_reqs, rows)
        return self.draft_tokens[:num_reqs].clone()

    def _prepare_sample_rows(self, num_reqs: int) -> None:
        """Autoregressive drafting samples one row per request: nothing to prepare."""

    def _padding_is_negative(self) -> bool:
        return self.fix.host

    def _refuse_unmasked_negative_slots(self, num_reqs: int, rows: int) -> None:
        # Checked on the host, before the launch or the replay, without reading the GPU: the
        # configuration alone says whether padded rows hold -1 and the kernel lacks the mask.
        if rows > num_reqs and self._padding_is_negative() and not self.fix.kernel and self.probabilistic:
            first = num_reqs * self.samples_per_req
            raise padded_slot_error(f"{type(self).__name__} (graph of {rows} rows)",
                                    list(range(first, rows * self.samples_per_req)))

    @property
    def sampling_state(self) -> SamplingState:
        """What the sampling launches read by row and by slot: the persistent buffers, by name."""
        return SamplingState(self._sampling_mapping(), self.temperature, self.seeds, self._sampling_positions(),
                             self.draft_logits)

    def _sample(self, logits, draft_step, samples_per_req=1) -> torch.Tensor:
        if not self.probabilistic:
            # Greedy drafting: an argmax, no q kept, nothing stored by slot -- immune to the bug.
            return logits.argmax(dim=-1)
        return self.sampler(logits, self.sampling_state, draft_step=draft_step, samples_per_req=samples_per_req,
                            masked=self.fix.kernel, trace=self.trace)

    def run_rows(self, rows: int) -> None:
        """The captured work: k x (draft forward + sampling) on `rows` rows of the buffers.

        `rows` is num_reqs (eager) or a capture size; the buffers' rows past num_reqs are padding.
        """
        self._check_rows(rows)
        for step in range(self.k):
            logits = self.model(self.input_tokens[:rows])[:, 0, :]
            if self.row_logits is not None:
                self.row_logits[:rows, step].copy_(logits)
            tokens = self._sample(logits, step)
            self.draft_tokens[:rows, step].copy_(tokens)
            if step + 1 < self.k:
                # The next step's context is this one's, shifted by the token just drafted.
                self.input_tokens[:rows].copy_(torch.cat([self.input_tokens[:rows, 1:], tokens[:, None]], dim=1))
                self.positions[:rows].add_(1)

    def _sampling_mapping(self) -> torch.Tensor:
        return self.idx_mapping

    def _sampling_positions(self) -> torch.Tensor:
        return self.positions

    def _check_rows(self, rows) -> None:
        # A slice past the buffers' end would silently run fewer rows than asked for.
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= self.max_num_reqs:
            raise LabkitInputError(f"rows must be an integer in [1, max_num_reqs={self.max_num_reqs}], got {rows!r}")

    def _make_record(self, num_reqs: int, rows: int) -> LaunchRecord:
        k, V = self.k, self.vocab_size
        row_logits = self.row_logits[: rows * self.samples_per_req].reshape(rows, k, V).cpu().clone()
        return LaunchRecord(
            num_reqs=num_reqs,
            rows=rows,
            live_slots=[int(s) for s in self.idx_mapping[:num_reqs].tolist()],
            mapping=self._sampling_mapping().cpu().clone(),
            samples_per_req=self.samples_per_req,
            writer=self.trace.writer.cpu().clone() if self.trace is not None else None,
            writes=self.trace.writes.cpu().clone() if self.trace is not None else None,
            row_logits=row_logits,
            temperature=self.temperature.cpu().clone(),
            draft_logits=self.draft_logits.cpu().clone() if self.draft_logits is not None else None,
        )


class DFlashSpeculator(Speculator):
    """DFlash-style drafter: one forward proposes all k tokens; one sample row per (request, step).

    The draft model's heads 0..k-1 predict tokens t+1..t+k from the same context. Sampling runs
    over ``rows * k`` sample rows with the per-sample mapping built by
    :func:`~labkit.kernels.dflash_prep.prepare_dflash_sample_mapping`, outside the graph, for the
    real ``num_reqs``. The eager path processes only the live rows (the PR's small optimisation).
    """

    drafter = "dflash"

    def __init__(self, draft_model, config: DrafterConfig = DrafterConfig(drafter="dflash"), **kwargs):
        if config.k > draft_model.num_future:
            raise LabkitInputError(
                f"a DFlash-style drafter proposes k={config.k} tokens in one pass, but the draft "
                f"model has only {draft_model.num_future} future-token heads"
            )
        self.samples_per_req = config.k
        super().__init__(draft_model, config, **kwargs)
        M, k = self.max_num_reqs, self.k
        # The later hardening: start the buffer as "no request" rather than slot 0.
        self.sample_idx_mapping = torch.full((M * k,), dflash_pad(self.fix), dtype=self.idx_mapping.dtype,
                                             device=self.device)
        self.sample_pos = torch.zeros(M * k, dtype=torch.int64, device=self.device)

    def _prepare_sample_rows(self, num_reqs: int) -> None:
        prepare_dflash_sample_mapping(self.idx_mapping, self.positions, self.sample_idx_mapping, self.sample_pos,
                                      num_reqs=num_reqs, k=self.k, pad_value=dflash_pad(self.fix))

    def _padding_is_negative(self) -> bool:
        return dflash_pad(self.fix) < 0

    def run_rows(self, rows: int) -> None:
        self._check_rows(rows)
        k = self.k
        logits = self.model(self.input_tokens[:rows])[:, :k, :].reshape(rows * k, self.vocab_size)
        if self.row_logits is not None:
            self.row_logits[: rows * k, 0].copy_(logits)
        tokens = self._sample(logits, 0, samples_per_req=k)
        self.draft_tokens[:rows].copy_(tokens.view(rows, k))

    def _sampling_mapping(self) -> torch.Tensor:
        return self.sample_idx_mapping

    def _sampling_positions(self) -> torch.Tensor:
        return self.sample_pos


def build_speculator(draft_model, config: DrafterConfig = DrafterConfig(), **kwargs) -> Speculator:
    """The speculator that runs `config` (its class follows config.drafter); kwargs as for Speculator."""
    cls = DFlashSpeculator if config.drafter == "dflash" else Speculator
    return cls(draft_model, config, **kwargs)
