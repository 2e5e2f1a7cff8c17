# labkit answer: exercise=b name=gumbel_kernel variant=triton verdict=solved
@triton.jit
def gumbel_kernel(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                  vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    is_valid = slot >= 0
    offs = tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
    temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
    seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
    scaled = logits
    if temp != 0.0:
        scaled = logits / temp
    store_mask = in_vocab & ((offs * 0 + slot) >= 0)  # broadcast first: portable across Tritons
    tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=store_mask)
    scores = scaled
    if temp != 0.0:
        key = row_key(seed, tl.load(pos_ptr + row), salt)
        scores = scaled - tl.log(-tl.log(uniform(key, offs)))
    tl.store(token_ptr + row, tl.argmax(scores, axis=0))
