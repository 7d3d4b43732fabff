#include "calib_fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const calib_class_names[] = {"matrix products", "attention", "element-wise", "optimizer", NULL};

calib_class calib_class_of(et_op_kind kind)
{
    switch (kind) {
    case ET_OP_GEMM:
    case ET_OP_TT:
        return CALIB_GEMM;
    case ET_OP_ATTENTION:
        return CALIB_ATTENTION;
    case ET_OP_OPTIMIZER:
        return CALIB_OPTIMIZER;
    default:
        return CALIB_ELEMENTWISE;
    }
}

calib_terms calib_terms_of(const et_device_profile *d, et_precision p)
{
    calib_terms t = {.gemm_rate = et_gemm_peak(d, p) * d->gemm_max_efficiency,
                     .gemm_half = d->gemm_half_dim,
                     .bandwidth = d->memory_bandwidth * d->memory_efficiency,
                     .vector_rate = d->vector_flops * d->memory_efficiency,
                     .overhead = d->kernel_overhead_s,
                     .special_rate = d->special_rate,
                     .attention = d->attention_products_efficiency,
                     .optimizer_rate = d->optimizer_flops * d->memory_efficiency};
    for (int l = 0; l < d->cache_levels; l++)
        t.cache_bandwidth[l] = d->cache_bandwidth[l];
    return t;
}

void calib_terms_apply(const calib_terms *t, et_precision p, et_device_profile *d)
{
    /* a precision with its own term (etcalib fit --only-precision) fits that one: the others keep theirs */
    double *eff = d->gemm_max_by_precision[p] > 0 ? &d->gemm_max_by_precision[p] : &d->gemm_max_efficiency;
    if (t->gemm_rate <= d->peak_flops[p])
        *eff = t->gemm_rate / d->peak_flops[p];
    else
        d->peak_flops[p] = t->gemm_rate, *eff = 1;
    d->gemm_half_dim = t->gemm_half;
    if (t->bandwidth <= d->memory_bandwidth)
        d->memory_efficiency = t->bandwidth / d->memory_bandwidth;
    else
        d->memory_bandwidth = t->bandwidth, d->memory_efficiency = 1;
    d->vector_flops = t->vector_rate / d->memory_efficiency;
    d->optimizer_flops = t->optimizer_rate / d->memory_efficiency;
    d->kernel_overhead_s = t->overhead;
    d->special_rate = t->special_rate;
    for (int l = 0; l < d->cache_levels; l++)
        d->cache_bandwidth[l] = t->cache_bandwidth[l];
    d->attention_products_efficiency = fmin(t->attention, 1);
}

double calib_sample_time(const calib_sample *s, const et_device_profile *d, et_precision p)
{
    if (s->kind == CALIB_SAMPLE_OPTIMIZER) { /* costed as the graph's update op */
        et_op op = {.kind = ET_OP_OPTIMIZER, .kernels = 1, .time_scale = 1};
        et_adam_step_costs(&op, s->values, 4);
        return et_op_time(&op, &(et_batch_shape){0}, d, p);
    }
    return et_kernel_time(d, p, s->kind == CALIB_SAMPLE_MATRIX, s->flops, s->bytes, s->m, s->n, s->k);
}

double calib_objective(const calib_data *data, const et_device_profile *d)
{
    double f = 0;
    for (int u = 0; u < data->n_micro; u++) {
        const calib_micro *m = &data->micro[u];
        double g = 0;
        for (int i = 0; i < m->n_samples; i++) {
            const double e =
                log(calib_sample_time(&m->samples[i], d, data->precision)) - log(m->samples[i].seconds);
            g += e * e;
        }
        f += g / (m->n_samples ? m->n_samples : 1);
    }
    for (int r = 0; r < data->n_runs; r++) {
        const et_measured_run *run = &data->runs[r];
        double *pred = malloc((size_t)run->graph.n_ops * sizeof *pred), total = 0;
        if (!pred) return INFINITY;
        et_measured_run_predict(run, d, pred);
        for (int i = 0; i < run->graph.n_ops; i++)
            total += run->measured[i];
        for (int i = 0; i < run->graph.n_ops; i++) {
            if (run->measured[i] <= 0 || pred[i] <= 0) continue; /* ops the model does not cost (TP comm) */
            const double e = log(pred[i]) - log(run->measured[i]);
            f += run->measured[i] / total * e * e;
        }
        free(pred);
    }
    return f / (data->n_runs + data->n_micro);
}

/* the terms in the fit's vector, in log space: the first nine, then one a cache level after the first */
enum { NT = 8 + ET_CACHE_LEVELS };

/* where cache level l's bandwidth sits in that vector */
static int cache_term(int l)
{
    return l == 0 ? 6 : 8 + l;
}

static void to_terms(const double *x, calib_terms *t)
{
    t->gemm_rate = exp(x[0]), t->gemm_half = exp(x[1]), t->bandwidth = exp(x[2]), t->vector_rate = exp(x[3]);
    t->overhead = exp(x[4]);
    /* a base without special functions or a cache level keeps none */
    t->special_rate = x[5] > -700 ? exp(x[5]) : 0;
    t->attention = exp(x[7]);
    t->optimizer_rate = exp(x[8]);
    for (int l = 0; l < ET_CACHE_LEVELS; l++)
        t->cache_bandwidth[l] = x[cache_term(l)] > -700 ? exp(x[cache_term(l)]) : 0;
}

/* Every term stays within a factor of 1000 of the base profile's (a box in log space): a term the runs do
 * not constrain (GEMMs slowed by a debugging build, say) must not run off to a value no profile holds. */
#define CALIB_FIT_LOG_RANGE 6.907755

static double eval(const double *x, const double *origin, const calib_data *data,
                   const et_device_profile *base, et_precision p)
{
    for (int k = 0; k < NT; k++)
        if (fabs(x[k] - origin[k]) > CALIB_FIT_LOG_RANGE) return HUGE_VAL;
    et_device_profile d = *base;
    calib_terms t;
    to_terms(x, &t);
    calib_terms_apply(&t, p, &d);
    return calib_objective(data, &d);
}

/* Nelder-Mead from `start` (restarted from its best point: the roofline's max() makes the objective kinked,
 * where one run can collapse early); leaves the best point in `start`, returns its objective. */
static double minimise(double *start, const double *origin, const calib_data *data,
                       const et_device_profile *base, int *it)
{
    const et_precision p = data->precision;
    double simplex[NT + 1][NT], f[NT + 1];
    for (int restart = 0; restart < 12; restart++) {
        const double step = restart % 2 ? 0.2 : 0.9;
        for (int v = 0; v <= NT; v++) {
            memcpy(simplex[v], start, sizeof simplex[v]);
            if (v > 0) simplex[v][v - 1] += step;
            f[v] = eval(simplex[v], origin, data, base, p);
        }
        for (int local = 0; local < 1500; local++, (*it)++) {
            int lo = 0, hi = 0, nh;
            for (int v = 1; v <= NT; v++) {
                if (f[v] < f[lo]) lo = v;
                if (f[v] > f[hi]) hi = v;
            }
            nh = lo;
            for (int v = 0; v <= NT; v++)
                if (v != hi && f[v] > f[nh]) nh = v;
            if (f[hi] - f[lo] < 1e-14 * (1 + f[lo])) break;
            double c[NT] = {0}, xr[NT], xe[NT], xc[NT];
            for (int v = 0; v <= NT; v++)
                for (int k = 0; v != hi && k < NT; k++)
                    c[k] += simplex[v][k] / NT;
            for (int k = 0; k < NT; k++)
                xr[k] = c[k] + (c[k] - simplex[hi][k]);
            double fr = eval(xr, origin, data, base, p);
            if (fr < f[lo]) {
                for (int k = 0; k < NT; k++)
                    xe[k] = c[k] + 2 * (c[k] - simplex[hi][k]);
                double fe = eval(xe, origin, data, base, p);
                memcpy(simplex[hi], fe < fr ? xe : xr, sizeof xr);
                f[hi] = fe < fr ? fe : fr;
            } else if (fr < f[nh]) {
                memcpy(simplex[hi], xr, sizeof xr), f[hi] = fr;
            } else {
                for (int k = 0; k < NT; k++)
                    xc[k] = c[k] + 0.5 * (simplex[hi][k] - c[k]);
                double fc = eval(xc, origin, data, base, p);
                if (fc < f[hi]) {
                    memcpy(simplex[hi], xc, sizeof xc), f[hi] = fc;
                } else { /* shrink towards the best */
                    for (int v = 0; v <= NT; v++) {
                        if (v == lo) continue;
                        for (int k = 0; k < NT; k++)
                            simplex[v][k] = simplex[lo][k] + 0.5 * (simplex[v][k] - simplex[lo][k]);
                        f[v] = eval(simplex[v], origin, data, base, p);
                    }
                }
            }
        }
        int b = 0;
        for (int v = 1; v <= NT; v++)
            if (f[v] < f[b]) b = v;
        memcpy(start, simplex[b], sizeof simplex[b]);
    }
    return eval(start, origin, data, base, p);
}

/* Where the fit starts besides the base profile: each term's logarithm moved by these (fixed, so that a fit
 * is reproducible), a factor of about 2.7 either way; a local optimum that explains the data with one term
 * at its box limit (the optimizer's time by its special functions, say) is left for a better one. */
static const double start_offsets[][NT] = {
    {-1, 1, -1, 1, -1, 1, -1, 0, 1, 1},
    {1, -1, 1, -1, 1, -1, 1, 0, -1, -1},
    {-1, -1, 1, 1, 0, -1, 1, 0, 0, -1},
};

const char *const calib_term_names[] = {"GEMM rate",
                                        "GEMM half dimension",
                                        "bandwidth",
                                        "vector rate",
                                        "launch overhead",
                                        "special rate",
                                        "cache level 1",
                                        "attention products",
                                        "optimizer rate",
                                        "cache level 2",
                                        NULL};

double calib_fit(const calib_data *data, const et_device_profile *base, et_device_profile *out,
                 int *iterations, unsigned *pinned)
{
    const et_precision p = data->precision;
    calib_terms t0 = calib_terms_of(base, p);
    if (t0.gemm_half <= 0) t0.gemm_half = 1;
    if (t0.overhead <= 0) t0.overhead = 1e-7;
    double origin[NT] = {log(t0.gemm_rate),
                         log(t0.gemm_half),
                         log(t0.bandwidth),
                         log(t0.vector_rate),
                         log(t0.overhead),
                         t0.special_rate > 0 ? log(t0.special_rate) : -1000,
                         0, /* cache level 0, set below */
                         log(t0.attention),
                         log(t0.optimizer_rate)};
    for (int l = 0; l < ET_CACHE_LEVELS; l++)
        origin[cache_term(l)] = t0.cache_bandwidth[l] > 0 ? log(t0.cache_bandwidth[l]) : -1000;
    int it = 0;
    double best[NT];
    memcpy(best, origin, sizeof best);
    double f_best = minimise(best, origin, data, base, &it);
    for (size_t s = 0; s < sizeof start_offsets / sizeof *start_offsets; s++) {
        double x[NT];
        for (int k = 0; k < NT; k++) /* a term the base does not have (-1000) stays off */
            x[k] = origin[k] + (origin[k] > -700 ? start_offsets[s][k] : 0);
        const double f = minimise(x, origin, data, base, &it);
        if (f < f_best) f_best = f, memcpy(best, x, sizeof best);
    }
    /* a term the data do not constrain (no element-wise samples, say) goes back to the base profile's value
     * when that leaves the objective unchanged to one part in 1e9 */
    for (int k = 0; k < NT; k++) {
        double x[NT];
        memcpy(x, best, sizeof x);
        x[k] = origin[k];
        if (fabs(eval(x, origin, data, base, p) - f_best) <= 1e-9 * (f_best + 1e-30)) best[k] = origin[k];
    }
    f_best = eval(best, origin, data, base, p);
    if (pinned) {
        *pinned = 0;
        for (int k = 0; k < NT; k++) /* within 0.1% of the box's edge: the limit, not the data, set it */
            if (origin[k] > -700 && fabs(best[k] - origin[k]) > CALIB_FIT_LOG_RANGE - 1e-3)
                *pinned |= 1u << k;
    }
    *out = *base;
    calib_terms t;
    to_terms(best, &t);
    calib_terms_apply(&t, p, out);
    if (iterations) *iterations = it;
    return f_best;
}
