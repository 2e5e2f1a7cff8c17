"""Case 2, vLLM #43810: a paged hidden-state cache stored through a padded slot mapping.

A drafter that extracts hidden states stores each token's hidden state into a paged cache: token
row i goes to ``cache[slot_mapping[i]]``, its slot being ``block * BLOCK_SIZE + offset``. Before each
replay the host copies the live tokens' slots into the front of the persistent ``slot_mapping`` and
pads the rest with ``PADDING_SLOT``, as the host half of PR #47066's fix does (notebook 09 says with what). The store is
torch indexing, one line, no mask. The miniature: four requests of 16 tokens in blocks 1 to 4 of a
cache of :data:`NUM_BLOCKS` blocks (block 0 is the null block, given to no request), 64 live
tokens, graphs of :data:`CAPTURE_SIZES` token rows.

Forms: ``"buggy"`` stores through the mapping as it is; ``"null block"`` first sends every padded
row to slot 0, in the null block.
"""

from __future__ import annotations

import torch

from labkit.errors import one_of
from labkit.family.symptom import Symptom, differs, largest_difference
from labkit.graphs import GraphRunner
from labkit.proofs.audit import Buffer, audit_step
from labkit.proofs.audit_report import AuditReport

BLOCK_SIZE = 16
NUM_BLOCKS = 5
NUM_SLOTS = BLOCK_SIZE * NUM_BLOCKS
HIDDEN = 8
# Private, read through the module's __getattr__: `?` on a public constant would show its value, the
# host half of PR #47066's fix, before the exercises of notebook 07.
_PADDING_SLOT = -1
CAPTURE_SIZES = (8, 32, 128)
# Requests' blocks, in row order: four requests, one block each, 16 tokens each (a prefill).
REQUEST_BLOCKS = (1, 2, 3, 4)
FORMS = ("buggy", "null block")
READER = "the hidden-state connector"


def live_slots() -> list[int]:
    """Each live token row's slot, in row order."""
    return [block * BLOCK_SIZE + offset for block in REQUEST_BLOCKS for offset in range(BLOCK_SIZE)]


class HiddenStateCache:
    """The persistent buffers of the store, its host copy and the captured store; ``form`` as above."""

    def __init__(self, form: str = "buggy", *, device="cpu", use_graphs: bool = True, seed: int = 0):
        one_of("form", form, FORMS)
        self.form = form
        self.device = torch.device(device)
        rows = CAPTURE_SIZES[-1]
        self.slot_mapping = torch.zeros(rows, dtype=torch.int64, device=self.device)
        self.hidden = torch.zeros(rows, HIDDEN, dtype=torch.float32, device=self.device)
        self.cache = torch.zeros(NUM_SLOTS, HIDDEN, dtype=torch.float32, device=self.device)
        self.slots = torch.tensor(live_slots(), dtype=torch.int64, device=self.device)
        gen = torch.Generator().manual_seed(seed)
        # The target's hidden states of the live tokens this step; padded rows keep what an earlier,
        # larger step left in the persistent buffer.
        self.fresh = torch.randn(len(live_slots()), HIDDEN, generator=gen).to(self.device)
        self.hidden[len(live_slots()):] = torch.randn(rows - len(live_slots()), HIDDEN, generator=gen).to(self.device)
        self.runner = GraphRunner(CAPTURE_SIZES, mode="full" if use_graphs else "eager", device=self.device)

    @property
    def num_tokens(self) -> int:
        return int(self.slots.numel())

    def copy_inputs(self) -> None:
        """The host side, before each replay: the live tokens' slots and hidden states, then the padding."""
        n = self.num_tokens
        self.slot_mapping[:n].copy_(self.slots)
        self.slot_mapping[n:].fill_(_PADDING_SLOT)
        self.hidden[:n].copy_(self.fresh)

    def store(self, rows: int) -> None:
        """The captured work: each of `rows` token rows stores its hidden state at its slot."""
        slots = self.slot_mapping[:rows]
        if self.form == "null block":
            slots = slots.clamp(min=0)
        self.cache[slots] = self.hidden[:rows]

    def step(self, rows: int) -> None:
        self.copy_inputs()
        self.store(rows)

    def run(self) -> torch.Tensor:
        """One step as the engine runs it (padded under graphs); the cache afterwards."""
        self.copy_inputs()
        self.runner.run(self.num_tokens, self.store)
        return self.cache

    def buffers(self) -> list[Buffer]:
        """The step's buffers for the audit: the padded rows' slots are poisoned with the requests'
        own (blocks 1 on), which the host's padding then overwrites."""
        rows = range(self.num_tokens)
        return [
            Buffer("hidden", self.hidden, "row", rows),
            Buffer("slot_mapping", self.slot_mapping, "row", rows, "mapping", values=(BLOCK_SIZE, NUM_SLOTS)),
            Buffer("cache", self.cache, "slot", self.slots.tolist(), "output", read_by=READER),
        ]


def symptom(form: str = "buggy", *, device="cpu") -> Symptom:
    """The live tokens' cache slots that the graph run leaves different from the eager run."""
    graphed = HiddenStateCache(form, device=device).run().clone()
    eager = HiddenStateCache(form, device=device, use_graphs=False).run().clone()
    corrupted, largest = [], 0.0
    for slot in live_slots():
        if differs(graphed[slot], eager[slot]):
            corrupted.append(slot)
            largest = max(largest, largest_difference(graphed[slot], eager[slot]))
    return Symptom("cache slots", tuple(corrupted), len(live_slots()), largest)


def owner_of(slot: int) -> int:
    """The live token row that owns cache slot `slot`."""
    return live_slots().index(slot)


def audit(form: str = "buggy", *, device="cpu", **kwargs) -> AuditReport:
    """The padding-invariance audit of one step of the store in `form` (64 live rows run as 128)."""
    case = HiddenStateCache(form, device=device)
    n = case.num_tokens
    return audit_step(case.step, case.buffers(), live_rows=n, padded_rows=case.runner.rows_for(n),
                      name=f"hidden-state store, {form}", **kwargs)


def __getattr__(name: str):
    if name == "PADDING_SLOT":  # the name notebook 09 and the tests use; not offered by Tab
        return _PADDING_SLOT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
