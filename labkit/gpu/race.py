"""Who wins when a padded row and a live row store to the same q, on a real GPU.

The scenario is docs/MECHANICS.md's timeline (:data:`labkit.bench.scenario.MECHANICS_SCHEDULE`): 8 live
requests in slots 0..7, then slot 3 finishes. The graph of 8 rows replays for 7 live rows, so row 6
(live) and padded row 7 (stale: it still says slot 7) both store to ``q[7]``, each program its own
vocab block. Every launch gets fresh logits; the padded row's are shifted by +100 so that the two
candidates never share a value. Afterwards each element of ``q[7]`` is compared with both rows'
scaled logits.

    race_blocks(vocab)   per launch and per vocab block of q: whose values landed (record "race_blocks")
    race_stats(vocab)    per launch only: whole-launch winners and the padded share (record "race")

With ``fixed=True`` the padded row and the kernel are as PR #47066 leaves them: q[7] must be row 6's values
in every launch, whatever the order the programs ran in.
"""

from __future__ import annotations

import torch

from labkit.bench.scenario import MECHANICS_SCHEDULE
from labkit.gpu.timing import graphed
from labkit.kernels.gumbel import kernel_launcher
from labkit.kernels.gumbel_tuning import launch_config
from labkit.kernels.sampling_state import SamplingState

TEMPERATURE = 0.8
PADDED_SHIFT = 100.0  # keeps the padded row's values apart from the live row's
TOY_VOCAB = 30
REAL_VOCAB = 151936


class _Race:
    """The launch of the timeline's second step, with buffers that every launch refills."""

    def __init__(self, vocab: int, *, fixed: bool = False, graph: bool = False, block_v: int | None = None,
                 seed: int = 0, device: str = "cuda"):
        before, live = MECHANICS_SCHEDULE[0], MECHANICS_SCHEDULE[1]
        rows = len(before)
        pad = [-1] * (rows - len(live)) if fixed else list(before[len(live):])
        self.padded_row = len(live)
        self.slot = before[self.padded_row]  # the stale slot the padded row still holds
        self.live_row = live.index(self.slot)  # the live row that owns that slot now
        self.mapping = list(live) + pad
        self.vocab, self.fixed, self.graph = vocab, fixed, graph
        cfg = launch_config(rows, vocab, interpreted=False)
        self.block_v = block_v or cfg["block_v"]
        self.num_warps = cfg["num_warps"] if block_v is None else None
        self.num_blocks = -(-vocab // self.block_v)
        mapping = torch.tensor(self.mapping, dtype=torch.int32, device=device)
        temperature = torch.full((rows,), TEMPERATURE, device=device)
        seeds = torch.arange(rows, device=device, dtype=torch.int64)
        positions = torch.zeros(rows, dtype=torch.int64, device=device)
        self.logits = torch.empty(rows, vocab, device=device)
        self.q = torch.zeros(rows, 1, vocab, device=device)
        state = SamplingState(mapping, temperature, seeds, positions, self.q)
        launch, _ = kernel_launcher(self.logits, state, draft_step=0,
                                    masked=fixed, block_v=self.block_v, num_warps=self.num_warps)
        self.launch = graphed(launch, reps=1) if graph else launch
        self.gen = torch.Generator(device=device).manual_seed(seed)

    def run(self, launches: int) -> tuple[torch.Tensor, int]:
        """([launches, num_blocks] padded elements per block, elements that match neither row)."""
        device = self.logits.device
        padded = torch.zeros(launches, self.num_blocks, dtype=torch.int64, device=device)
        neither = torch.zeros((), dtype=torch.int64, device=device)
        width = self.num_blocks * self.block_v
        for i in range(launches):
            self.logits.normal_(generator=self.gen)
            self.logits[self.padded_row] += PADDED_SHIFT
            self.launch()
            got = self.q[self.slot, 0]
            from_padded = torch.isclose(got, self.logits[self.padded_row] / TEMPERATURE, rtol=1e-6, atol=0)
            from_live = torch.isclose(got, self.logits[self.live_row] / TEMPERATURE, rtol=1e-6, atol=0)
            neither += (~(from_padded | from_live)).sum()
            # A live element equal to the padded candidate would count twice: the shift rules it out.
            blocks = torch.nn.functional.pad(from_padded.to(torch.int64), (0, width - self.vocab))
            padded[i] = blocks.view(self.num_blocks, self.block_v).sum(dim=1)
        return padded.cpu(), int(neither)

    def block_sizes(self) -> torch.Tensor:
        sizes = torch.full((self.num_blocks,), self.block_v, dtype=torch.int64)
        sizes[-1] = self.vocab - (self.num_blocks - 1) * self.block_v
        return sizes


def race_blocks(vocab: int = REAL_VOCAB, launches: int = 200, *, fixed: bool = False, graph: bool = False,
                block_v: int | None = None, device: str = "cuda") -> dict:
    """Which row's values landed in each vocab block of q[7], launch by launch.

    A block counts as the padded row's when more than half of its elements hold the padded row's
    values (``mixed_blocks`` counts the blocks where neither row holds all of them, so a reader can
    see whether that rule ever had to decide). ``neither_elements`` must be 0: an element of q is
    always one candidate's value, never a torn or stale one.

    ``device="cpu"`` runs the same launches in Triton's interpreter, where programs run in grid
    order and the padded row (launched after the live one) wins every block: the reference the
    GPU's race is compared with."""
    race = _Race(vocab, fixed=fixed, graph=graph, block_v=block_v, device=device)
    padded, neither = race.run(launches)
    sizes = race.block_sizes()
    owner = (2 * padded > sizes).to(torch.int64)
    per_launch = padded.sum(dim=1)
    return {
        "vocab": vocab, "block_v": race.block_v, "num_warps": race.num_warps, "num_blocks": race.num_blocks,
        "launches": launches, "graph": graph, "masked": fixed, "mapping": race.mapping, "slot": race.slot,
        "rows": [race.live_row, race.padded_row],
        "padded_share_per_launch": [round(float(x), 6) for x in (per_launch.double() / vocab).tolist()],
        "padded_wins_per_block": owner.sum(dim=0).tolist(),
        "example_owner": owner[0].tolist(),
        "whole_launch_wins": {"padded": int((per_launch == vocab).sum()), "live": int((per_launch == 0).sum())},
        "mixed_blocks": int(((padded > 0) & (padded < sizes)).sum()),
        "neither_elements": neither,
    }


def race_blocks_section(launches: int = 200, toy_launches: int = 1000) -> dict:
    """The record's "race_blocks": one entry per vocabulary, named ``vocab_<V>``."""
    return {f"vocab_{REAL_VOCAB}": race_blocks(REAL_VOCAB, launches),
            f"vocab_{TOY_VOCAB}": race_blocks(TOY_VOCAB, toy_launches)}


def race_stats(launches: int = 500, vocab: int = TOY_VOCAB, graph: bool = False, block_v: int | None = None) -> dict:
    """Whole-launch outcomes: launches where the padded row's values won everywhere in q[7], where the
    live row's did, and where q[7] is a mixture (programs of different vocab blocks, or warps of one
    block, finishing in different orders)."""
    race = _Race(vocab, graph=graph, block_v=block_v)
    padded, neither = race.run(launches)
    per_launch = padded.sum(dim=1)
    won_padded, won_live = int((per_launch == vocab).sum()), int((per_launch == 0).sum())
    return {"launches": launches, "vocab": vocab, "graph": graph, "padded_row_won": won_padded,
            "live_row_won": won_live, "mixed": launches - won_padded - won_live,
            "padded_share_of_elements": float(per_launch.sum()) / (launches * vocab), "neither_elements": neither}


def race_section(quick: bool = False) -> dict:
    toy, real = (200, 20) if quick else (2000, 200)
    return {"toy_vocab": race_stats(toy), "toy_vocab_graph": race_stats(toy, graph=True),
            "vocab_151936": race_stats(real, vocab=REAL_VOCAB),
            "vocab_151936_graph": race_stats(real, vocab=REAL_VOCAB, graph=True)}
