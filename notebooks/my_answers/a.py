# labkit answer: exercise=a name=copy_idx_mapping variant=torch verdict=solved
def copy_idx_mapping(idx_mapping, slots):
    num_reqs = slots.numel()
    idx_mapping[:num_reqs] = slots
    idx_mapping[num_reqs:] = -1  # "no request": the masked kernel skips these rows
