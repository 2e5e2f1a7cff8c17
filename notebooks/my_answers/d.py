# labkit answer: exercise=d name=q_offset variant=triton verdict=solved
@triton.jit
def q_offset(slot, step, stride_slot, stride_step):
    return slot.to(tl.int64) * stride_slot + step * stride_step  # widen before the multiply
