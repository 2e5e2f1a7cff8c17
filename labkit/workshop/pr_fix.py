"""The PR's answer to each exercise, as the kit's own source lines (numbered as in the file).

    pr_fix("a")               the fill of idx_mapping's padded rows (Speculator.copy_request_inputs)
    pr_fix("b", "triton")     the sampling kernel's loads and store (labkit/kernels/gumbel.py)
    pr_fix("b", "torch")      ... its torch reference, for the torch version of the exercise
    pr_fix("c")               the pad of DFlash's sample mapping (labkit/kernels/dflash_prep.py)
    pr_fix("d")               the int64 offset of the store into q (labkit/kernels/gumbel.py)

Lines are found by markers in the source, not by line numbers, so that an edit elsewhere in a file
moves nothing. Each excerpt shows only its own exercise's answer: (b)'s stops short of the offset
line, which is (d)'s. If a marker is gone (the source changed), the excerpt says where to look.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from labkit.viz.html_views import source_excerpt


@dataclass(frozen=True)
class Piece:
    """Lines from `start` to `stop` of `owner` ("module" or "module:Qualified.name"); `mark`: the fix lines."""

    owner: str
    start: str
    stop: str | None = None
    mark: str | None = None


@dataclass(frozen=True)
class FixSource:
    """The PR's fix for one exercise: where it lives, and the lines (numbered, fix lines marked '>')."""

    exercise: str
    where: str
    text: str


PIECES: dict[str, tuple[str, tuple[Piece, ...]]] = {
    "a": ("labkit/speculator.py, Speculator.copy_request_inputs", (
        Piece("labkit.speculator:Speculator.copy_request_inputs", "self.idx_mapping[:num_reqs].copy_(slots)",
              "fill_(-1)", mark=r"fill_\(-1\)"),)),
    "b-triton": ("labkit/kernels/gumbel.py, gumbel_sample_kernel", (
        Piece("labkit.kernels.gumbel", "if MASK_PADDING:", "store_mask = in_vocab", mark=r"mask=|other=|>= 0"),
        Piece("labkit.kernels.gumbel", "tl.store(q_row + offs", mark=r"mask=")),),
    "b-torch": ("labkit/kernels/gumbel.py, _sample_torch (the kernel's torch reference behind gumbel_sample_torch)", (
        Piece("labkit.kernels.gumbel:_sample_torch", "valid = slots >= 0", "seed = torch.where(valid",
              mark=r">= 0|valid,"),
        Piece("labkit.kernels.gumbel:_sample_torch", "if not bool(valid[row])", "continue",
              mark=r"valid\[row\]")),),
    "c": ("labkit/kernels/dflash_prep.py, prepare_dflash_sample_mapping_torch; labkit/config.py, FixSwitches", (
        Piece("labkit.kernels.dflash_prep:prepare_dflash_sample_mapping_torch", "live = num_reqs * k",
              "sample_idx_mapping[live:] = pad_value", mark=r"pad_value"),
        Piece("labkit.config:FixSwitches", "dflash_pad: int", mark=r"dflash_pad")),),
    "d": ("labkit/kernels/gumbel.py, gumbel_sample_kernel", (
        Piece("labkit.kernels.gumbel", "if STORE_Q:", "tl.store(q_row + offs", mark=r"int64\)"),)),
}


def fix_key(exercise: str, variant: str) -> str:
    """The key of :data:`PIECES`: (b) has a Triton and a torch answer; (d)'s torch answer is the kernel's line."""
    return f"b-{variant}" if exercise == "b" else exercise


def _owner(spec: str):
    module_name, _, qualname = spec.partition(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split(".") if qualname else []:
        obj = getattr(obj, part)
    return obj


def _excerpt(piece: Piece) -> str:
    return source_excerpt(_owner(piece.owner), piece.start, piece.stop, mark=piece.mark)


def pr_fix(exercise: str, variant: str = "torch") -> FixSource:
    """The kit's lines that answer `exercise` ('a'..'d'); variant 'triton' or 'torch' picks (b)'s version."""
    where, pieces = PIECES[fix_key(exercise, variant)]
    try:
        text = "\n     ...\n".join(_excerpt(p) for p in pieces)
    except (OSError, TypeError, ValueError, AttributeError) as err:  # the source moved: say where to look
        text = f"(the kit's source has changed since this excerpt was written: {err}; see {where})"
    return FixSource(exercise, where, text)

