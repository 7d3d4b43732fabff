/* rng: the seeded random streams of ET (splitmix64): platform-independent, so a scenario and seed give
 * the same draws everywhere. et_rng_stream() derives an independent stream per (seed, a, b), e.g. per
 * (step, rank), so results do not depend on the order in which ranks draw. Header-only. */
#ifndef ET_RNG_H
#define ET_RNG_H

#include <math.h>

static inline unsigned long long et_rng_mix(unsigned long long x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline unsigned long long et_rng_stream(unsigned long long seed, unsigned long long a,
                                               unsigned long long b)
{
    return et_rng_mix(seed ^ et_rng_mix(a * 1000003ULL + et_rng_mix(b)));
}

/* Uniform in (0, 1). */
static inline double et_rng_uniform(unsigned long long *state)
{
    *state = et_rng_mix(*state);
    return ((double)(*state >> 11) + 0.5) / 9007199254740992.0;
}

/* Standard normal (Box-Muller). */
static inline double et_rng_normal(unsigned long long *state)
{
    double u1 = et_rng_uniform(state), u2 = et_rng_uniform(state);
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
