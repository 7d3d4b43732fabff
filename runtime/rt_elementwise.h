/* rt_elementwise: the per-element math of etrun's kernels, written once for the host and the device
 * (llm.c's habit): every function is `__host__ __device__` under nvcc and `static inline` in C, so the CUDA
 * kernels (runtime/cuda/) call exactly what tests/test_elementwise.c checks on the CPU against the double
 * reference kernels (rt_kernels.h's _d instantiation). Float arithmetic throughout; the constants are the
 * reference's (GELU's tanh approximation, Hendrycks and Gimpel 2016; SiLU, Elfwing et al. 2018; Adam,
 * Kingma and Ba 2015, with decoupled decay, Loshchilov and Hutter 2019; LAMB's direction, You et al.
 * 2020). */
#ifndef ET_RT_ELEMENTWISE_H
#define ET_RT_ELEMENTWISE_H

#include <math.h>
#include <string.h>

#ifdef __CUDACC__
#define RT_HD __host__ __device__ static inline
#else
#define RT_HD static inline
#endif

#define RT_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define RT_GELU_C 0.044715f

/* GELU(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
RT_HD float rt_gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(RT_GELU_K * (x + RT_GELU_C * x * x * x)));
}

/* d GELU(x) / dx */
RT_HD float rt_gelu_tanh_grad(float x)
{
    const float th = tanhf(RT_GELU_K * (x + RT_GELU_C * x * x * x));
    const float du = RT_GELU_K * (1.0f + 3.0f * RT_GELU_C * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

RT_HD float rt_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* SwiGLU's output silu(gate) * up, and its gradients into gate and up given dy */
RT_HD float rt_swiglu(float gate, float up)
{
    return gate * rt_sigmoid(gate) * up;
}

RT_HD void rt_swiglu_grad(float gate, float up, float dy, float *dgate, float *dup)
{
    const float sig = rt_sigmoid(gate), silu = gate * sig;
    *dgate = dy * up * (sig + silu * (1.0f - sig));
    *dup = dy * silu;
}

/* One Adam step's constants (rt_adam_args made ready for the loop: reciprocals taken once). */
typedef struct rt_adam_consts {
    float b1, b2, ob1, ob2, eps, ic1, isc2, lr, gs, wd;
} rt_adam_consts;

/* wd: the decoupled decay for Adam's update (AdamW; 0 for Adam), LAMB's decay for its direction */
RT_HD rt_adam_consts rt_adam_make_consts(float lr, float beta1, float beta2, float eps, float c1, float c2,
                                         float grad_scale, float wd)
{
    rt_adam_consts k;
    k.b1 = beta1, k.b2 = beta2, k.ob1 = 1.0f - beta1, k.ob2 = 1.0f - beta2, k.eps = eps;
    k.ic1 = 1.0f / c1, k.isc2 = 1.0f / sqrtf(c2), k.lr = lr, k.gs = grad_scale, k.wd = wd;
    return k;
}

/* Moments updated from gradient g; returns the direction (m/c1) / (sqrt(v/c2) + eps) + wd w */
RT_HD float rt_adam_direction(const rt_adam_consts *k, float w, float g, float *m, float *v)
{
    const float gi = k->gs * g, mi = k->b1 * *m + k->ob1 * gi, vi = k->b2 * *v + k->ob2 * gi * gi;
    *m = mi, *v = vi;
    return (mi * k->ic1) / (sqrtf(vi) * k->isc2 + k->eps) + k->wd * w;
}

/* Adam/AdamW on one value: w -= lr * mask * direction */
RT_HD float rt_adam_step(const rt_adam_consts *k, float w, float g, float *m, float *v, float mask)
{
    return w - k->lr * mask * rt_adam_direction(k, w, g, m, v);
}

/* Clipping's factor for a gradient norm (fp16's loss scale divided out): max_norm / (norm + 1e-6) when the
 * norm exceeds max_norm (max_norm < 0: no clipping), else 1 */
RT_HD float rt_clip_factor(double norm, double max_norm)
{
    return max_norm >= 0 && norm > max_norm ? (float)(max_norm / (norm + 1e-6)) : 1.0f;
}

/* The optimizer's gate, taken where the step's scalars live: gate[0] multiplies every gradient in the
 * update (the global clip over fp16's loss scale `scale`), gate[1] is 1 when the update is skipped: the
 * gradients' squared norm sq non-finite (an fp16 overflow, or a diverged step) where have_sq, or the loss
 * non-finite where have_loss */
RT_HD void rt_clip_gate(double sq, int have_sq, double loss, int have_loss, double max_norm, double scale,
                        float *gate)
{
    float clip = 1.0f, skip = 0.0f;
    if (have_sq) {
        const double norm = sqrt(sq) / scale;
        if (isfinite(norm))
            clip = rt_clip_factor(norm, max_norm);
        else
            skip = 1.0f;
    }
    if (have_loss && !isfinite(loss)) skip = 1.0f;
    gate[0] = (float)(clip / scale);
    gate[1] = skip;
}

/* LAMB's step size for one tensor: lr times the trust ratio ||w|| / ||u|| (1 when either is 0) */
RT_HD float rt_lamb_rate(double w_sq, double u_sq, float lr)
{
    double rate = lr;
    if (w_sq > 0 && u_sq > 0) rate *= sqrt(w_sq) / sqrt(u_sq);
    return (float)rate;
}

/* Rotary positions: the pair (a, b) turned by the angle whose cosine and sine are c and s */
RT_HD void rt_rotate_pair(float *a, float *b, float c, float s)
{
    const float x = *a, y = *b;
    *a = x * c - y * s;
    *b = x * s + y * c;
}

/* ---- the products' 16-bit and tf32 inputs, as float values: round to nearest, ties to even ---- */

RT_HD unsigned rt_float_bits(float x)
{
    unsigned u;
    memcpy(&u, &x, sizeof u);
    return u;
}

RT_HD float rt_bits_float(unsigned u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x with its mantissa rounded to `keep` of its 23 bits (NaN and infinity unchanged; a carry into the
 * exponent is the correct rounding, up to infinity) */
RT_HD float rt_round_mantissa(float x, int keep)
{
    const unsigned u = rt_float_bits(x), drop = 23u - (unsigned)keep;
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    const unsigned half = (1u << (drop - 1)) - 1u + ((u >> drop) & 1u);
    return rt_bits_float((u + half) & ~((1u << drop) - 1u));
}

/* bfloat16: 8 bits of exponent, 7 of mantissa */
RT_HD float rt_round_bf16(float x)
{
    return rt_round_mantissa(x, 7);
}

/* tf32 as the tensor cores read fp32: 10 bits of mantissa */
RT_HD float rt_round_tf32(float x)
{
    return rt_round_mantissa(x, 10);
}

/* IEEE half: 10 bits of mantissa, 5 of exponent: above 65504 (after rounding) infinity, below 2^-14
 * multiples of 2^-24 (subnormals) */
RT_HD float rt_round_fp16(float x)
{
    const float a = fabsf(x);
    if (!(a < 65520.0f)) return a != a ? x : (x < 0 ? -INFINITY : INFINITY); /* NaN stays; overflow */
    if (a < 6.103515625e-05f) {                                              /* 2^-14: the subnormal grid */
        const float q = 5.9604644775390625e-08f;                             /* 2^-24 */
        return rintf(x / q) * q;
    }
    return rt_round_mantissa(x, 10);
}

/* 16-bit storage of a value rounded as above: bfloat16's top 16 bits of rt_round_bf16(x), IEEE half's bits
 * of rt_round_fp16(x) (exact in half); NaN stays a NaN; and back to float, exactly */
RT_HD unsigned short rt_bf16_bits(float x)
{
    if (x != x) return 0x7fc0u;
    return (unsigned short)(rt_float_bits(rt_round_bf16(x)) >> 16);
}

RT_HD float rt_bf16_value(unsigned short h)
{
    return rt_bits_float((unsigned)h << 16);
}

RT_HD unsigned short rt_fp16_bits(float x)
{
    const float r = rt_round_fp16(x), a = fabsf(r);
    const unsigned u = rt_float_bits(r), sign = (u >> 16) & 0x8000u;
    if (r != r) return (unsigned short)(sign | 0x7e00u);
    if (a == INFINITY) return (unsigned short)(sign | 0x7c00u);
    if (a < 6.103515625e-05f) return (unsigned short)(sign | (unsigned)(a * 16777216.0f)); /* a / 2^-24 */
    return (unsigned short)(sign | ((((u >> 23) & 0xffu) - 112u) << 10) | ((u >> 13) & 0x3ffu));
}

RT_HD float rt_fp16_value(unsigned short h)
{
    const unsigned sign = ((unsigned)h & 0x8000u) << 16, e = ((unsigned)h >> 10) & 0x1fu,
                   m = (unsigned)h & 0x3ffu;
    if (e == 0) return rt_bits_float(sign | rt_float_bits((float)m * 5.9604644775390625e-08f)); /* m 2^-24 */
    if (e == 31) return rt_bits_float(sign | 0x7f800000u | (m << 13));
    return rt_bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/* A permuted copy's source offset for output e (rt_tt.h's permute contract): sum_i idx_i(e) stride[i], idx(e)
 * the row-major index of e over dims dim[0 .. nd) */
RT_HD unsigned long long rt_permute_source(unsigned long long e, int nd, const unsigned long long *dim,
                                           const unsigned long long *stride)
{
    unsigned long long off = 0;
    for (int i = nd - 1; i >= 0; i--) {
        off += e % dim[i] * stride[i];
        e /= dim[i];
    }
    return off;
}

#endif
