"""Run in a fresh process at a given torch thread count: are the toy models' rows batch-invariant?

Usage: python tests/probes/batch_invariance.py THREADS
Prints one JSON line: the thread count, how many (model, batch size, start) cases differ from the
rows computed one at a time, and a digest of every row's logits (to compare thread counts).
The thread count must be set before torch does any work, hence a process per count.
"""

from __future__ import annotations

import hashlib
import json
import sys

import torch


def main(threads: int) -> None:
    torch.set_num_threads(threads)
    from labkit import corpus
    from labkit.models import CharTokenizer, encode_context, load_toy_models

    models, tok, text = load_toy_models(), CharTokenizer(), corpus.corpus_text()
    mismatches, digest = [], hashlib.sha256()
    with torch.no_grad():
        for name in ("target", "draft"):
            model = getattr(models, name)
            gen = torch.Generator().manual_seed(1)
            starts = torch.randint(0, len(text) - model.context_len, (64,), generator=gen).tolist()
            x = encode_context([tok.encode(text[s:s + model.context_len]) for s in starts], model.context_len)
            single = torch.cat([model(x[i:i + 1]) for i in range(64)])
            digest.update(single.numpy().tobytes())
            for size in (1, 2, 3, 5, 7, 8, 16, 33, 64):
                for start in sorted({0, 64 - size}):
                    if not torch.equal(model(x[start:start + size]), single[start:start + size]):
                        mismatches.append([name, size, start])
    print(json.dumps({"threads": torch.get_num_threads(), "mismatches": mismatches,
                      "digest": digest.hexdigest()}))


if __name__ == "__main__":
    main(int(sys.argv[1]))
