/* rt_vector: what the CPU backend's element-wise loops share to vectorise. RT_VECTOR_CLONES builds a
 * function for AVX-512F, AVX2 and the baseline, picked at load time by CPU feature, not by CPU model
 * (virtual CPUs report models the dispatcher does not know); GCC on x86-64 only, elsewhere it is empty
 * and the baseline vectorises. rt_expf is exp() in float by range reduction and a degree-6
 * polynomial (Cephes expf), relative error under 2e-7 on [-87, 88]: no libm call, so loops over it
 * vectorise. Inputs below -87 return exp(-87) (1.6e-38), above 88 exp(88). */
#ifndef ET_RT_VECTOR_H
#define ET_RT_VECTOR_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(ET_NO_VECTOR_CLONES)
#define RT_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RT_VECTOR_CLONES
#endif
#define RT_VECTOR_INLINE __attribute__((always_inline)) inline

RT_VECTOR_INLINE static float rt_expf(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float k = x * 1.44269504088896341f;
    const float n = (k + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    /* unsigned: no undefined shift when x is NaN (then y is NaN and so is the result, as expf gives) */
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

#endif
