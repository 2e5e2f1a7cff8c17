# labkit answer: exercise=c name=build_sample_mapping variant=torch verdict=solved
def build_sample_mapping(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:] = -1  # "no request": the masked kernel skips these sample rows
