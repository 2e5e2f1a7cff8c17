"""The errors the kit raises on purpose. Nothing in labkit is below this module: it imports none of it.

Each message says what is wrong and what to do, because most of them are met by learners
who are in the middle of changing a kernel.
"""

from __future__ import annotations

from typing import Iterable


class LabkitInputError(ValueError):
    """A caller passed something the kit cannot run correctly."""


class EnvironmentValueError(LabkitInputError):
    """An environment variable holds a value the kit cannot use (LABKIT_BACKEND: not a backend, or one
    this machine cannot run). Its message is one line that names the variable, the value and the choices."""


def one_of(name: str, value, choices):
    """`value` if it is one of `choices`, else a LabkitInputError naming `name`, the choices and the value."""
    if value not in choices:
        raise LabkitInputError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


class PaddedSlotOutOfBoundsError(RuntimeError):
    """A kernel was about to run on a padded row whose slot points outside the buffers (notebook 03 says when)."""


def padded_slot_error(kernel: str, rows: list[int], slots: Iterable[int] | None = None) -> PaddedSlotOutOfBoundsError:
    """The refusal of an unmasked launch whose `rows` hold the negative `slots` (named as they are;
    None: the value the fix pads with)."""
    slots = (-1,) if slots is None else slots
    shown = ", ".join(str(r) for r in rows[:8]) + (" ..." if len(rows) > 8 else "")
    values = sorted(set(int(s) for s in slots), reverse=True)
    which = ", ".join(str(v) for v in values[:4])
    first = values[0] if values else -1
    noun = "slot" if len(values) == 1 else "slots"
    return PaddedSlotOutOfBoundsError(
        f"{kernel}: rows [{shown}] hold {noun} {which} (padding), but the kernel was launched without "
        f"the `slot >= 0` mask. It would read temperature[{first}] and seeds[{first}] and store to "
        f"draft_logits[{first}, ...]: an out-of-bounds access before the start of each buffer "
        "(another tensor's memory on a GPU, heap garbage or a crash on the CPU). Filling the "
        "padded rows with -1 is only half of the fix: also launch the masked kernel "
        "(mask loads with `other`, and store with `mask=in_vocab & ((offs * 0 + slot) >= 0)`)."
    )
