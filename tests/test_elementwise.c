/* test_elementwise: runtime/rt_elementwise.h's per-element functions, which the CUDA kernels call on the
 * device, compiled here for the host and checked against the double reference kernels (rt_kernels.h's _d
 * instantiation) over a grid of inputs: error |got - ref| / max(|ref|, scale) within 1e-5, the scale being
 * each quantity's size (1 for activations, whose float cancellation in 1 + tanh near -8 is absolute; the
 * moments' own magnitudes for Adam): float's 2^-24 rounding over a dozen operations, and tanhf, expf and
 * sqrtf within their ulp bounds; the largest error seen is printed. Then the products' input rounding (bf16,
 * tf32, fp16 as float values) against exact cases (ties to even, fp16's largest value, overflow and
 * subnormal grid) and, over a sweep, within half a unit of the last kept bit. */
#include <math.h>
#include <stdio.h>

#include "rt_elementwise.h"
#include "rt_kernels.h"
#include "rt_tt.h"

static int failures, checks;
static double worst;

static void expect(const char *what, double got, double ref, double scale)
{
    const double err = fabs(got - ref) / (fabs(ref) > scale ? fabs(ref) : scale);
    checks++;
    worst = err > worst ? err : worst;
    if (err > 1e-5 || isnan(err)) {
        failures++;
        printf("FAIL %s: got %.9g, reference %.9g (error %.2e)\n", what, got, ref, err);
    }
}

int main(void)
{
    for (int i = -800; i <= 800; i++) {
        const double x = i / 100.0;
        double y, dx, one = 1;
        rt_gelu_fwd_d(&x, &y, 1);
        rt_gelu_bwd_d(&x, &one, &dx, 1);
        expect("gelu", rt_gelu_tanh((float)x), y, 1);
        expect("gelu'", rt_gelu_tanh_grad((float)x), dx, 1);
        /* SwiGLU with up = 0.7 and dy = 1.3 */
        const double u[2] = {x, 0.7}, dy = 1.3;
        double s, du[2];
        rt_swiglu_fwd_d(u, &s, 1, 1);
        rt_swiglu_bwd_d(u, &dy, du, 1, 1);
        float dg, dup;
        rt_swiglu_grad((float)x, 0.7f, 1.3f, &dg, &dup);
        expect("swiglu", rt_swiglu((float)x, 0.7f), s, 1);
        expect("swiglu dgate", dg, du[0], 1);
        expect("swiglu dup", dup, du[1], 1);
    }
    /* Adam and AdamW against the formula in double, over gradients and moments of several scales */
    for (int i = 0; i < 200; i++) {
        /* inputs and constants as floats hold them, so the reference sees what the float code sees */
        const double g = (float)(sin(i * 0.37) * pow(10, -(i % 5))), m0 = (float)(0.01 * cos(i));
        const double v0 = (float)(1e-4 * (1 + sin(i * 1.3))), w0 = (float)(0.5 * sin(i * 0.11)),
                     lr = (float)1e-3;
        const double b1 = (float)0.9, b2 = (float)0.999, eps = (float)1e-8, c1 = (float)0.19,
                     c2 = (float)0.02;
        for (int decay = 0; decay < 2; decay++) {
            const double wd = decay ? (float)0.01 : 0, gs = (float)0.8;
            const rt_adam_consts k = rt_adam_make_consts((float)lr, (float)b1, (float)b2, (float)eps,
                                                         (float)c1, (float)c2, (float)gs, (float)wd);
            float m = (float)m0, v = (float)v0;
            const float w = rt_adam_step(&k, (float)w0, (float)g, &m, &v, 1.0f);
            const double gi = gs * g, mr = b1 * m0 + (1 - b1) * gi, vr = b2 * v0 + (1 - b2) * gi * gi;
            const double wr = w0 - lr * ((mr / c1) / (sqrt(vr / c2) + eps) + wd * w0);
            expect("adam w", w, wr, 1e-3);
            expect("adam m", m, mr, 1e-6);
            expect("adam v", v, vr, 1e-9);
        }
    }
    /* rotary pairs against rt_rope_d on one head of two values */
    for (int p = 0; p < 50; p++) {
        double qkv[6] = {0.3, -1.1, 0, 0, 0, 0};
        const int pos = p * 37;
        rt_rope_d(qkv, &pos, 1, 6, 2, 2, 2, 10000.0, 0);
        float a = 0.3f, b = -1.1f;
        rt_rotate_pair(&a, &b, (float)cos(pos), (float)sin(pos));
        expect("rope a", a, qkv[0], 1);
        expect("rope b", b, qkv[1], 1);
    }
    /* the products' input rounding: exact values, ties to even, fp16's range and subnormal grid */
    const struct {
        const char *what;
        float (*round)(float);
        float x, want;
    } cases[] = {
        {"bf16 1", rt_round_bf16, 1.0f, 1.0f},
        {"bf16 tie down to even", rt_round_bf16, 1.0f + 0x1p-8f, 1.0f},
        {"bf16 tie up to even", rt_round_bf16, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-6f},
        {"bf16 above the tie", rt_round_bf16, 1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 0x1p-7f},
        {"bf16 negative", rt_round_bf16, -3.0f - 0x1p-9f, -3.0f},
        {"tf32 tie down to even", rt_round_tf32, 1.0f + 0x1p-11f, 1.0f},
        {"tf32 tie up to even", rt_round_tf32, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-9f},
        {"fp16 largest", rt_round_fp16, 65504.0f, 65504.0f},
        {"fp16 rounds down to the largest", rt_round_fp16, 65519.0f, 65504.0f},
        {"fp16 overflows", rt_round_fp16, 65520.0f, INFINITY},
        {"fp16 overflows negative", rt_round_fp16, -1e6f, -INFINITY},
        {"fp16 smallest subnormal", rt_round_fp16, 0x1p-24f, 0x1p-24f},
        {"fp16 subnormal tie to even 0", rt_round_fp16, 0x1p-25f, 0.0f},
        {"fp16 subnormal tie up to even", rt_round_fp16, 3 * 0x1p-25f, 0x1p-23f},
        {"fp16 mantissa tie to even", rt_round_fp16, 1.0f + 0x1p-11f, 1.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const float got = cases[i].round(cases[i].x);
        checks++;
        if (!(got == cases[i].want)) {
            failures++;
            printf("FAIL %s: %.9g rounds to %.9g, expected %.9g\n", cases[i].what, cases[i].x, got,
                   cases[i].want);
        }
    }
    /* a sweep: within half a unit of the kept last bit, and no bit kept below it */
    for (int i = 0; i < 100000; i++) {
        const float x = (float)(sin(i * 0.7713) * pow(2, (i % 40) - 20));
        if (x == 0) continue; /* ilogbf(0) is INT_MIN */
        const int e = ilogbf(x);
        const float b = rt_round_bf16(x), t = rt_round_tf32(x);
        checks++;
        if (fabsf(b - x) > ldexpf(1, e - 8) || fabsf(t - x) > ldexpf(1, e - 11) ||
            (rt_float_bits(b) & 0xffffu) || (rt_float_bits(t) & 0x1fffu)) {
            failures++;
            printf("FAIL rounding %.9g: bf16 %.9g tf32 %.9g\n", x, b, t);
        }
    }
    /* 16-bit storage (the parameters' shadow): known bit patterns, and over the sweep every value read back
     * equal to its rounding (rt_round_bf16, rt_round_fp16) */
    static const struct {
        float x;
        unsigned short bf16, fp16;
    } bits[] = {{1.0f, 0x3f80, 0x3c00}, {-2.0f, 0xc000, 0xc000},    {65504.0f, 0x4780, 0x7bff},
                {1e6f, 0x4974, 0x7c00}, {0x1p-24f, 0x3380, 0x0001}, {0x1p-14f, 0x3880, 0x0400},
                {0.0f, 0x0000, 0x0000}, {-0.0f, 0x8000, 0x8000},    {INFINITY, 0x7f80, 0x7c00}};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        checks++;
        if (rt_bf16_bits(bits[i].x) != bits[i].bf16 || rt_fp16_bits(bits[i].x) != bits[i].fp16) {
            failures++;
            printf("FAIL 16-bit storage of %g: bf16 0x%04x fp16 0x%04x, expected 0x%04x 0x%04x\n", bits[i].x,
                   rt_bf16_bits(bits[i].x), rt_fp16_bits(bits[i].x), bits[i].bf16, bits[i].fp16);
        }
    }
    checks++;
    if (rt_bf16_value(rt_bf16_bits(NAN)) == rt_bf16_value(rt_bf16_bits(NAN)) ||
        rt_fp16_value(rt_fp16_bits(NAN)) == rt_fp16_value(rt_fp16_bits(NAN))) {
        failures++;
        printf("FAIL 16-bit storage: a NaN read back as a number\n");
    }
    for (int i = 0; i < 100000; i++) {
        const float x = (float)(sin(i * 0.7713) * pow(2, (i % 60) - 30));
        checks++;
        if (rt_bf16_value(rt_bf16_bits(x)) != rt_round_bf16(x) ||
            rt_fp16_value(rt_fp16_bits(x)) != rt_round_fp16(x)) {
            failures++;
            printf("FAIL 16-bit storage of %.9g: bf16 %.9g fp16 %.9g read back\n", x,
                   rt_bf16_value(rt_bf16_bits(x)), rt_fp16_value(rt_fp16_bits(x)));
        }
    }
    /* the device's permuted-copy offsets (tensor-train layers) against the host's loop (rt_tt_host_ops):
     * transpositions of a [2][3][4][5] tensor, copied and added */
    static const int perms[][4] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}, {2, 3, 0, 1},
                                   {0, 2, 1, 3}, {3, 0, 1, 2}, {1, 2, 3, 0}, {0, 3, 2, 1}};
    const size_t size[4] = {2, 3, 4, 5}, stride_of[4] = {60, 20, 5, 1}, n = 120;
    float src[120], dst[120], acc[120];
    for (size_t i = 0; i < n; i++)
        src[i] = (float)i * 0.5f;
    for (size_t p = 0; p < sizeof perms / sizeof perms[0]; p++) {
        size_t dim[4], stride[4];
        unsigned long long dd[4], ds[4];
        for (int i = 0; i < 4; i++) {
            dim[i] = size[perms[p][i]], stride[i] = stride_of[perms[p][i]];
            dd[i] = dim[i], ds[i] = stride[i];
        }
        for (size_t e = 0; e < n; e++)
            acc[e] = 1;
        rt_tt_host_ops.permute(NULL, dst, src, n, 4, dim, stride, false);
        rt_tt_host_ops.permute(NULL, acc, src, n, 4, dim, stride, true);
        int ok = 1;
        for (size_t e = 0; e < n; e++)
            ok &= dst[e] == src[rt_permute_source(e, 4, dd, ds)] && acc[e] == dst[e] + 1;
        checks++;
        if (!ok) {
            failures++;
            printf("FAIL permuted copy %zu: the device's offsets differ from the host's loop\n", p);
        }
    }
    printf("largest error %.2e (bound 1e-5)\n%d passed, %d failed\n", worst, checks - failures, failures);
    return failures ? 1 : 0;
}
