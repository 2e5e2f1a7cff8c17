"""Each exercise's checker, found by the name its record gives (``"module:function"``).

The record (:mod:`labkit.workshop.exercises.record`) is data that every checker reads for its
learner's names; it names its checker but never imports it. The lookup is here, above both, so
that no checker imports a module that imports it back.
"""

from __future__ import annotations

import importlib
from typing import Callable

from labkit.workshop.exercises.record import Exercise


def checker(exercise: Exercise) -> Callable:
    """The checker of `exercise` (its module is imported on first use)."""
    module, _, name = exercise.checker.partition(":")
    return getattr(importlib.import_module(module), name)
