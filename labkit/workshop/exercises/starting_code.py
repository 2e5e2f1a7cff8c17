"""The code each exercise of notebook 07 starts from: a checker run on it says "not attempted yet".

A learner who runs the notebook top to bottom (Run All) meets every checker before writing anything.
Judging the starting code would draw its launch and name what is wrong with it, which is the
exercise's answer (or a later one's) shown before the learner tried. So a checker first asks whether
the function is still the starting code (the same syntax tree: comments, blank lines and docstrings
aside) and, if so, says only that. ``tests/test_workshop_gaps.py`` keeps these texts equal to the
skeleton cells of notebook 07.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Callable

STARTING_CODE: dict[str, str] = {
    "copy_idx_mapping": '''\
def copy_idx_mapping(idx_mapping, slots):
    """Write this step's row -> slot mapping into the persistent buffer, in place.

    idx_mapping: int32 [max_num_reqs], read by the padded graph; slots: int32 [num_reqs].
    """
    num_reqs = slots.numel()
    idx_mapping[:num_reqs] = slots
    # TODO: what do rows num_reqs: hold now?
''',
    "gumbel_kernel": '''\
@triton.jit
def gumbel_kernel(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                  vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot)
    seed = tl.load(seeds_ptr + slot)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab)  # q, indexed by slot
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))  # + Gumbel noise
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))
''',
    "gumbel_rows": '''\
def gumbel_rows(logits, idx_mapping, temperature, seeds, positions, q, salt):
    """The torch version of gumbel_kernel, for machines without Triton: one loop turn per row."""
    tokens = torch.zeros(logits.shape[0], dtype=torch.int64)
    vocab_index = torch.arange(logits.shape[1])
    for row in range(logits.shape[0]):
        slot = int(idx_mapping[row])
        temp, seed = float(temperature[slot]), seeds[slot]
        scaled = logits[row] / temp if temp != 0.0 else logits[row]
        q[slot] = scaled  # q, indexed by slot
        scores = scaled
        if temp != 0.0:
            scores = scaled + gumbel_torch(row_key_torch(seed, positions[row], salt), vocab_index)
        tokens[row] = scores.argmax()
    return tokens
''',
    "build_sample_mapping": '''\
def build_sample_mapping(idx_mapping, num_reqs, k, sample_idx_mapping):
    """Fill the persistent int32 buffer sample_idx_mapping [max_num_reqs * k], in place."""
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:] = 0  # padding: "a harmless, valid index"
''',
    "q_offset": '''\
@triton.jit
def q_offset(slot, step, stride_slot, stride_step):
    """Element offset of draft_logits[slot, step, 0]; slot is int32, loaded from idx_mapping."""
    return slot * stride_slot + step * stride_step
''',
}


def _shape(source: str) -> str | None:
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def is_starting_code(name: str, source: str | None) -> bool:
    """Whether `source` (the learner's function `name`) is still the code its exercise started from."""
    start = STARTING_CODE.get(name)
    return start is not None and source is not None and _shape(source) == _shape(start)


def not_attempted_message(ex: str, name: str) -> str:
    return (f"Exercise ({ex}) not solved yet: not attempted yet. `{name}` is still the code the exercise "
            "starts from; edit it in its cell above, run that cell, then run this checker again.")


def starting_code_of(fn: Callable) -> str | None:
    """The name of the exercise function `fn` is the starting code of, or None."""
    from labkit.workshop.exercises.kept_code import learner_source
    from labkit.workshop.feedback import python_function

    inner = python_function(fn) or fn
    name = getattr(inner, "__name__", None)
    return name if name and is_starting_code(name, learner_source(fn)) else None
