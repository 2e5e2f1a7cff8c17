"""Fast math for the compiled sampling kernel: the same tokens, fewer instructions per element.

On a GPU the Gumbel sampling kernel pays, per vocabulary element, a 32-bit hash, two logs and a
division, as well as its bytes. These helpers make that arithmetic cheaper where it cannot change
the answer that matters. Levels (the kernel's ``FAST_MATH``, chosen by
:func:`labkit.kernels.gumbel_tuning.launch_config`):

    0  libdevice logf for both logs of -log(-log(u)), a division per element (the interpreter's
       level, and the torch reference's arithmetic bit for bit)
    1  the outer log on the hardware lg2 unit (MUFU), a reciprocal per program
    2  as 1, and the inner log without libdevice's special cases (the same values for u >= 2**-24)

Levels 1 and 2 use inline PTX and bit casts, which Triton's interpreter cannot run. What they buy
on an H200 is recorded in the ``sweep`` and ``kernel`` sections of labkit/data/gpu/runs.json.
"""

from __future__ import annotations

from labkit.kernels.noise import index_hash, uniform
from labkit.kernels.triton_import import tl, triton


@triton.jit
def divide_by_temperature(logits, temp, FAST_MATH: tl.constexpr):
    """logits / temp. Fast: one correctly rounded reciprocal per program and a multiply per element,
    within 1.5 ulp of the division (the compiled `/` is itself a 2-ulp division)."""
    if FAST_MATH:
        return logits * tl.math.div_rn(1.0, temp)
    return logits / temp


@triton.jit
def gumbel(key, index, FAST_MATH: tl.constexpr):
    """Gumbel noise -log(-log(u)) per element of `index`, u = uniform(key, index).

    E = -log(u) must be accurate *relative* to E: the largest Gumbel values (the likely winners)
    come from u near 1, where E is tiny. So the inner log stays an accurate one at every level;
    only the outer log may be the fast hardware one."""
    if FAST_MATH >= 2:
        log_u = log_uniform(key, index)
    else:
        log_u = tl.log(uniform(key, index))
    if FAST_MATH >= 1:
        return -0.6931471805599453 * lg2_of_negated(log_u)  # ln 2: log(x) = ln 2 * lg2(x)
    return -tl.log(-log_u)


@triton.jit
def lg2_of_negated(x):
    # lg2(-x) in one MUFU.LG2 instruction: ptxas folds the negation into its operand, where a
    # negation before a plain lg2 costs an instruction per element of its own. The absolute error is
    # about 2**-22 near -x = 1, so it serves only where an absolute error that small is harmless (the
    # outer log of the Gumbel transform).
    return tl.inline_asm_elementwise("{ .reg .f32 t; neg.f32 t, $1; lg2.approx.ftz.f32 $0, t; }", "=f,f", [x],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def log_uniform(key, index):
    """log(uniform(key, index)), bit for bit log_unit_interval(uniform(key, index)), in fewer instructions.

    uniform() builds u = (m + 0.5) / 2**24, rounded (m: the hash's top 24 bits), from bit tricks and
    a multiply-add. Here one int-to-float conversion does it: 2 * m + 1 is odd, so converting it to
    float32 rounds it as float(m) + 0.5 rounds (the same ties, to even), giving 2**25 * u exactly;
    the log takes the 25 back off the exponent it finds anyway. Scaling by a power of two is exact,
    so the log sees the same mantissa and returns the same value. tests/test_kernels.py checks all
    2**24 m.
    """
    h = index_hash(key, index)
    u_times_2_25 = tl.minimum(((h >> 7) | 1).to(tl.float32), 33554430.0)  # (h >> 7) | 1 = 2m + 1; 2**25 * U_MAX
    return log_unit_interval(u_times_2_25, 25)


@triton.jit
def log_unit_interval(u, SCALE_LOG2: tl.constexpr = 0):
    """log(u / 2**SCALE_LOG2) for normal floats u / 2**SCALE_LOG2 in (0, 1]: libdevice's logf without
    its special cases.

    The same range reduction, polynomial and fused multiply-adds as `__nv_logf`, so the value is
    the same for every input the noise can produce (u >= 2**-24: no zero, denormal, negative, inf
    or NaN to handle). Dropping those checks saves about a third of the function's instructions.
    A power-of-two scale changes only the exponent the range reduction finds, so it is subtracted
    there, exactly.
    """
    bits = u.to(tl.int32, bitcast=True)
    e_bits = (bits - 0x3F2AAAAB) & -8388608  # 0xFF800000: the exponent of u / (2/3 .. 4/3)
    t = (bits - e_bits).to(tl.float32, bitcast=True) - 1.0
    p = tl.fma(t, -0.13018856942653656, 0.14084610342979431)
    p = tl.fma(t, p, -0.12148627638816834)
    p = tl.fma(t, p, 0.13980610668659210)
    p = tl.fma(t, p, -0.16684235632419586)
    p = tl.fma(t, p, 0.20012299716472626)
    p = tl.fma(t, p, -0.24999669194221497)
    p = tl.fma(t, p, 0.33333182334899902)
    p = tl.fma(t, p, -0.5)
    r = tl.fma(t, t * p, t)
    # The exponent (-25..0 once the scale is off) as a float without an int-to-float conversion: the
    # same value as e_bits.to(float32) / 2**23 - SCALE_LOG2, through the 1.5 * 2**23 trick.
    e = ((e_bits >> 23) + 0x4B400000).to(tl.float32, bitcast=True) - (12582912.0 + SCALE_LOG2)
    return tl.fma(e, 0.69314718246459961, r)
