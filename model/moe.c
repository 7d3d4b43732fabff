#include "moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "rng.h"

#define DRAWS 64

double et_moe_rank_loads(const et_scenario *s, double tokens_per_rank, unsigned long long stream,
                         double *load)
{
    const et_moe *moe = &s->model.moe;
    const int x = s->parallel.expert > 1 ? s->parallel.expert : 1, E = moe->experts;
    for (int r = 0; r < x; r++)
        load[r] = 1;
    if (E <= 0 || tokens_per_rank <= 0) return 0;
    const int fixed = moe->capacity_factor > 0;
    if (x <= 1 && !fixed) return 0;
    const double n = tokens_per_rank * moe->top_k * x; /* rows of the group */
    double norm = 0;
    for (int j = 0; j < E; j++)
        norm += moe->routing == ET_ROUTING_ZIPF ? pow(j + 1, -moe->skew) : 1;
    const int per_rank = E / x;
    const double capacity = moe->capacity_factor * n / E;
    double dropped = 0, sum = 0;
    unsigned long long st = stream;
    for (int r = 0; r < x; r++) {
        double rows = 0;
        for (int j = r * per_rank; j < (r + 1) * per_rank; j++) {
            double p = (moe->routing == ET_ROUTING_ZIPF ? pow(j + 1, -moe->skew) : 1) / norm;
            double c = fmax(0, n * p + sqrt(n * p * (1 - p)) * et_rng_normal(&st));
            if (fixed && c > capacity) dropped += c - capacity;
            rows += c;
        }
        load[r] = rows;
        sum += rows;
    }
    for (int r = 0; r < x; r++)
        load[r] = fixed || sum <= 0 ? 1 : load[r] * x / sum;
    return fixed && sum > 0 ? dropped / sum : 0;
}

/* The draws' mean maximum load and dropped fraction, for the last (scenario, tokens) asked on this thread. */
static _Thread_local struct {
    et_moe moe;
    int expert;
    double tokens;
    unsigned long long seed;
    double imbalance, dropped;
    int valid;
} cache;

static void draw(const et_scenario *s, double tokens)
{
    const int x = s->parallel.expert > 1 ? s->parallel.expert : 1;
    if (cache.valid && cache.expert == x && cache.tokens == tokens && cache.seed == s->simulation.seed &&
        memcmp(&cache.moe, &s->model.moe, sizeof cache.moe) == 0)
        return;
    double *load = malloc((size_t)x * sizeof *load), max_sum = 0, dropped = 0;
    for (int k = 0; k < DRAWS && load; k++) {
        dropped += et_moe_rank_loads(s, tokens, et_rng_stream(s->simulation.seed, 0x6d6f65ULL, k), load);
        double max = 0;
        for (int r = 0; r < x; r++)
            max = fmax(max, load[r]);
        max_sum += max;
    }
    memcpy(&cache.moe, &s->model.moe, sizeof cache.moe);
    cache.expert = x;
    cache.tokens = tokens;
    cache.seed = s->simulation.seed;
    /* out of memory: the balanced figures (a bound below the truth, never a crash in a cost function) */
    cache.imbalance = load ? max_sum / DRAWS : 1;
    cache.dropped = load ? dropped / DRAWS : 0;
    cache.valid = 1;
    free(load);
}

double et_moe_imbalance(const et_scenario *s, const et_batch_shape *b)
{
    if (s->model.moe.experts <= 0 || s->parallel.expert <= 1 || s->model.moe.capacity_factor > 0) return 1;
    draw(s, et_moe_routed_tokens(s, b->tokens));
    return cache.imbalance;
}

double et_moe_dropped_fraction(const et_scenario *s, const et_batch_shape *b)
{
    if (s->model.moe.experts <= 0 || s->model.moe.capacity_factor <= 0) return 0;
    draw(s, et_moe_routed_tokens(s, b->tokens));
    return cache.dropped;
}

double et_moe_routed_tokens(const et_scenario *s, double tokens)
{
    return et_scenario_experts_folded(s) ? tokens / s->parallel.tensor : tokens;
}

/* The chance that `held` of E experts include one of a token's k distinct experts, drawn uniformly:
 * 1 - C(E - held, k) / C(E, k). */
static double reached(double E, double held, int k)
{
    double miss = 1;
    for (int j = 0; j < k && miss > 0; j++)
        miss *= fmax(0, E - held - j) / (E - j);
    return 1 - miss;
}

double et_moe_alltoall_copies(const et_scenario *s, double *gpu_copies, double *node_copies)
{
    const et_comm_group g = et_ep_group(s);
    const double E = s->model.moe.experts, x = g.ranks, per_gpu = E / x;
    const int k = s->model.moe.top_k;
    *gpu_copies = (x - 1) * reached(E, per_gpu, k);
    *node_copies = (g.nodes - 1) * reached(E, per_gpu * g.ranks_per_node, k);
    return k * (s->model.moe.capacity_factor > 0 ? s->model.moe.capacity_factor : 1);
}

double et_moe_alltoall_time(const et_scenario *s, double bytes)
{
    et_comm_group g = et_ep_group(s);
    if (!s->software.ep_dedup || s->model.moe.experts <= 0 || s->model.moe.top_k <= 0)
        return et_alltoall_time(&g, bytes);
    double gpu_copies, node_copies;
    const double rows = et_moe_alltoall_copies(s, &gpu_copies, &node_copies);
    return et_alltoall_dedup_time(&g, bytes / rows, gpu_copies, node_copies);
}
