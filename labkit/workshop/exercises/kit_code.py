"""The PR's answer to each exercise, as the kit's own functions (lines numbered as in the file).

    pr_fix("a")               the fill of idx_mapping's padded rows (Speculator.copy_idx_mapping)
    pr_fix("b", "triton")     the sampling kernel's masked loads and store (labkit/kernels/gumbel.py)
    pr_fix("b", "torch")      ... the same in its torch reference, for the torch version of the exercise
    pr_fix("c")               the pad of DFlash's sample mapping (labkit/kernels/dflash_prep.py)
    pr_fix("d")               the int64 offset of the store into q (labkit/kernels/gumbel.py)

Each answer is one or two whole functions, so an edit elsewhere in a file moves nothing, and each
shows only its own exercise's answer: the kernel's three slot-indexed accesses are three functions,
and (b)'s two leave out the offset, which is (d)'s. If a function is gone (the source changed),
the excerpt says where to look.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from labkit.viz.html_views import function_source


@dataclass(frozen=True)
class Piece:
    """The function `owner` ("module:Qualified.name"), whole; `mark`: a regex of the fix's lines."""

    owner: str
    mark: str


@dataclass(frozen=True)
class FixSource:
    """The PR's fix for one exercise: where it lives, and the lines (numbered, fix lines marked '>')."""

    exercise: str
    where: str
    text: str


PIECES: dict[str, tuple[str, tuple[Piece, ...]]] = {
    "a": ("labkit/speculator.py, Speculator.copy_idx_mapping", (
        Piece("labkit.speculator:Speculator.copy_idx_mapping", r"fill_\(-1\)"),)),
    "b-triton": ("labkit/kernels/gumbel.py, slot_temperature_and_seed and q_store_mask "
                 "(called by gumbel_sample_kernel)", (
        Piece("labkit.kernels.gumbel:slot_temperature_and_seed", r"mask=|other=|>= 0"),
        Piece("labkit.kernels.gumbel:q_store_mask", r">= 0"))),
    "b-torch": ("labkit/kernels/gumbel.py, _slot_temperature_and_seed_torch and _store_q_torch (the kernel's "
                "torch reference, behind gumbel_sample_torch)", (
        Piece("labkit.kernels.gumbel:_slot_temperature_and_seed_torch", r">= 0|where\(valid,"),
        Piece("labkit.kernels.gumbel:_store_q_torch", r"valid\[row\]"))),
    "c": ("labkit/kernels/dflash_prep.py, prepare_dflash_sample_mapping_torch", (
        Piece("labkit.kernels.dflash_prep:prepare_dflash_sample_mapping_torch", r"pad_value"),)),
    "d": ("labkit/kernels/gumbel.py, q_row_start (called by gumbel_sample_kernel)", (
        Piece("labkit.kernels.gumbel:q_row_start", r"int64\)"),)),
}


def fix_key(exercise: str, variant: str) -> str:
    """The key of :data:`PIECES`: (b) has a Triton and a torch answer; (d)'s torch answer is the kernel's line."""
    return f"b-{variant}" if exercise == "b" else exercise


def _owner(spec: str):
    module_name, _, qualname = spec.partition(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _excerpt(piece: Piece) -> str:
    return function_source(_owner(piece.owner), mark=piece.mark)


def pr_fix(exercise: str, variant: str = "torch") -> FixSource:
    """The kit's lines that answer `exercise` ('a'..'d'); variant 'triton' or 'torch' picks (b)'s version."""
    where, pieces = PIECES[fix_key(exercise, variant)]
    try:
        text = "\n     ...\n".join(_excerpt(p) for p in pieces)
    except (OSError, TypeError, ValueError, AttributeError) as err:  # the source moved: say where to look
        text = f"(the kit's source has changed since this excerpt was written: {err}; see {where})"
    return FixSource(exercise, where, text)

