#include "calib_runs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"

void calib_runs_free(calib_runs *r)
{
    for (int i = 0; i < r->n; i++)
        et_scenario_free(&r->runs[i].s);
    free(r->runs);
    r->runs = NULL, r->n = 0;
}

/* The directory part of a path ("." for none), into out. */
static void dir_of(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, size, ".");
        return;
    }
    snprintf(out, size, "%.*s", (int)(slash - path), path);
}

int calib_runs_load(const char *published_csv, const char *device, calib_runs *out, et_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(published_csv, "r");
    if (!f) {
        et_error_set(err, published_csv, 0, 0, NULL, "cannot read file: %s", strerror(errno));
        return -1;
    }
    char dir[512], line[1024];
    dir_of(published_csv, dir, sizeof dir);
    int line_no = 0, cap = 0, bad = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        line_no++;
        if (line_no == 1) continue; /* header: name,metric,published,source,judged */
        line[strcspn(line, "\r\n")] = '\0';
        char *name = strtok(line, ","), *metric = strtok(NULL, ","), *figure = strtok(NULL, ",");
        char *end = NULL;
        const double value = figure ? strtod(figure, &end) : 0;
        if (!name || !metric || !figure || end == figure || !(value > 0) ||
            (strcmp(metric, "step_s") && strcmp(metric, "samples_per_s"))) {
            et_error_set(err, published_csv, line_no, 1, NULL,
                         "expected name,metric (step_s or samples_per_s),a positive published figure");
            bad = 1;
            break;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.json", dir, name);
        if (cap == out->n) {
            cap = cap ? 2 * cap : 64;
            calib_run *grown = realloc(out->runs, (size_t)cap * sizeof *grown);
            if (!grown) {
                et_error_set_code(err, ET_ERROR_MEMORY, published_csv, line_no, 0, NULL, "out of memory");
                bad = 1;
                break;
            }
            out->runs = grown;
        }
        calib_run *run = &out->runs[out->n];
        if (et_scenario_load(path, &run->s, err)) {
            bad = 1;
            break;
        }
        if (strcmp(run->s.cluster.device.name, device)) {
            et_scenario_free(&run->s);
            continue;
        }
        snprintf(run->name, sizeof run->name, "%s", name);
        run->published_s = strcmp(metric, "samples_per_s") ? value : run->s.batch.global / value;
        out->n++;
    }
    if (!bad && ferror(f)) {
        et_error_set_code(err, ET_ERROR_IO, published_csv, line_no, 0, NULL, "read error");
        bad = 1;
    }
    fclose(f);
    if (bad) {
        calib_runs_free(out);
        return -1;
    }
    if (out->n == 0) {
        et_error_set(err, published_csv, 0, 0, NULL, "no published run names the device profile \"%s\"",
                     device);
        return -1;
    }
    return 0;
}

/* cuDNN's fused-attention efficiency a fit starts from: the base's own, else FlashAttention 2's */
static double cudnn_start(const et_device_profile *base)
{
    return base->cudnn_attention_efficiency > 0 ? base->cudnn_attention_efficiency
                                                : base->flash_attention_efficiency;
}

et_device_profile calib_runs_scaled(const et_device_profile *base, const double f[CALIB_TERMS])
{
    et_device_profile d = *base;
    d.gemm_half_dim = base->gemm_half_dim * f[2];
    d.gemm_max_efficiency = fmin(1, base->gemm_max_efficiency * f[0]);
    for (int p = 0; p < ET_PRECISION_COUNT; p++)
        if (base->gemm_max_by_precision[p] > 0)
            d.gemm_max_by_precision[p] = fmin(1, base->gemm_max_by_precision[p] * f[0]);
    d.flash_attention_efficiency = fmin(1, base->flash_attention_efficiency * f[1]);
    if (base->cudnn_attention_efficiency > 0 || f[3] != 1)
        d.cudnn_attention_efficiency = fmin(1, cudnn_start(base) * f[3]);
    return d;
}

double calib_runs_predict(const calib_runs *r, int i, const et_device_profile *d)
{
    et_scenario *s = &r->runs[i].s;
    const et_device_profile kept = s->cluster.device;
    s->cluster.device = *d;
    et_estimate e;
    et_error err;
    const int rc = et_analytic_estimate(s, &e, &err);
    s->cluster.device = kept;
    return rc == 0 || rc == 3 ? e.step_time : -1; /* a plan too large for memory still has its step */
}

double calib_runs_objective(const calib_runs *r, const et_device_profile *d)
{
    double sum = 0;
    for (int i = 0; i < r->n; i++) {
        const double p = calib_runs_predict(r, i, d);
        if (!(p > 0)) return INFINITY;
        sum += fabs(log(p / r->runs[i].published_s));
    }
    return sum / r->n;
}

static double objective_at(const calib_runs *r, const et_device_profile *base, const double x[CALIB_TERMS])
{
    double f[CALIB_TERMS];
    for (int k = 0; k < CALIB_TERMS; k++)
        f[k] = exp(x[k]);
    const et_device_profile d = calib_runs_scaled(base, f);
    return calib_runs_objective(r, &d);
}

double calib_runs_fit(const calib_runs *r, const et_device_profile *base, unsigned terms,
                      et_device_profile *out, double factor[CALIB_TERMS])
{
    const double phi = (sqrt(5) - 1) / 2;
    /* each term's largest value bounds its factor: efficiencies stay <= 1; the half dimension has no bound
     * but the search's (a factor of 4 either way) */
    double limit[CALIB_TERMS] = {base->gemm_max_efficiency, base->flash_attention_efficiency, 0,
                                 cudnn_start(base)};
    for (int p = 0; p < ET_PRECISION_COUNT; p++)
        limit[0] = fmax(limit[0], base->gemm_max_by_precision[p]);
    if (!(base->flash_attention_efficiency > 0)) terms &= ~CALIB_TERM_ATTENTION;
    if (!(cudnn_start(base) > 0)) terms &= ~CALIB_TERM_CUDNN;
    if (!(base->gemm_half_dim > 0)) terms &= ~CALIB_TERM_HALF_DIM;
    double x[CALIB_TERMS] = {0, 0, 0, 0}, best = objective_at(r, base, x);
    for (int round = 0; round < 4; round++)
        for (int k = 0; k < CALIB_TERMS; k++) {
            if (!(terms & (1u << k))) continue;
            const double keep = x[k];
            double a = log(0.25), b = limit[k] > 0 ? fmin(log(4), -log(limit[k])) : log(4),
                   c = b - phi * (b - a), dd = a + phi * (b - a), y[2];
            x[k] = c, y[0] = objective_at(r, base, x);
            x[k] = dd, y[1] = objective_at(r, base, x);
            while (b - a > 1e-4) {
                if (y[0] < y[1]) {
                    b = dd, dd = c, y[1] = y[0], c = b - phi * (b - a);
                    x[k] = c, y[0] = objective_at(r, base, x);
                } else {
                    a = c, c = dd, y[0] = y[1], dd = a + phi * (b - a);
                    x[k] = dd, y[1] = objective_at(r, base, x);
                }
            }
            x[k] = (a + b) / 2;
            const double now = objective_at(r, base, x);
            if (now < best)
                best = now;
            else
                x[k] = keep; /* a search that found nothing better keeps the point it started from */
        }
    for (int k = 0; k < CALIB_TERMS; k++)
        factor[k] = exp(x[k]);
    *out = calib_runs_scaled(base, factor);
    return best;
}
