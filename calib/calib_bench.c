#define _POSIX_C_SOURCE 200809L
#include "calib_bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "batch.h"
#include "calib_csv.h"
#include "measured_run.h"
#include "rt_backend.h"
#include "scenario_graph.h"
#include "wall_clock.h"

/* Best of `reps` timings of y = x W^T on the backend (buffers reused). */
static double time_gemm(rt_backend *be, int m, int n, int k, float *x, float *w, float *y)
{
    const double flops = 2.0 * m * n * k;
    const int reps = flops < 1e7 ? 20 : flops < 1e9 ? 5 : 2;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = et_wall_seconds();
        be->linear_fwd(be, x, w, NULL, y, m, k, n);
        be->sync(be);
        double t = et_wall_seconds() - t0;
        if (t < best) best = t;
    }
    return best;
}

static json_t *gemm_sample(int m, int n, int k, double s)
{
    return json_pack("{s:i, s:i, s:i, s:f, s:f}", "m", m, "n", n, "k", k, "seconds", s, "gflops",
                     2.0 * m * n * k / s / 1e9);
}

json_t *calib_bench_run(const char *backend, const et_scenario *scenario, FILE *progress, et_error *err)
{
    rt_backend *be = rt_backend_create(backend, err);
    if (!be) return NULL;
    /* the products in the scenario's arithmetic (bf16 plans time bf16 products), fp32 without one */
    const et_precision p = scenario ? scenario->precision : ET_FP32;
    const rt_gemm_math math = rt_gemm_math_for(p);
    if (math == RT_GEMM_MATH_COUNT || be->set_gemm_math(be, math)) {
        et_error_set(err, scenario->source, 0, 0, "$.precision",
                     "the %s backend has no %s products to benchmark", be->name, et_precision_names[p]);
        be->destroy(be);
        return NULL;
    }
    if (be->op_timers_init(be, 1)) {
        be->destroy(be);
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
        return NULL;
    }
    enum { MAXD = 2048 };
    const size_t big = (size_t)MAXD * MAXD;
    float *x = be->alloc(be, big * 4), *w = be->alloc(be, big * 4), *y = be->alloc(be, big * 4);
    if (!x || !w || !y) {
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of %s memory for the benchmarks",
                          be->name);
        if (x) be->free(be, x);
        if (w) be->free(be, w);
        if (y) be->free(be, y);
        be->destroy(be);
        return NULL;
    }
    be->fill(be, x, 0.01f, big), be->fill(be, w, 0.02f, big);
    json_t *gemm = json_array(), *stream = json_array();
    static const int dims[] = {16, 64, 256, 1024};
    int done = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++) {
                const int m = dims[a], n = dims[b], k = dims[c];
                if ((double)m * n * k > (1 << 28))
                    continue; /* the largest products add little and take long */
                json_array_append_new(gemm, gemm_sample(m, n, k, time_gemm(be, m, n, k, x, w, y)));
                if (progress && ++done % 10 == 0)
                    fprintf(progress, "etcalib bench: %d matrix products\n", done);
            }
    if (scenario) { /* every distinct GEMM shape of the scenario's graph, at its expected batch */
        et_graph_options o = et_plan_graph_options(scenario);
        et_graph g;
        if (et_graph_build(&scenario->model, &o, &g, err) == 0) {
            et_batch_shape b = et_batch_expected(scenario);
            double seen[512][3];
            int n_seen = 0;
            for (int i = 0; i < g.n_ops; i++) {
                if (g.ops[i].kind != ET_OP_GEMM) continue;
                const double m = round(et_linear_eval(&g.ops[i].m, &b)),
                             n = round(et_linear_eval(&g.ops[i].n, &b)),
                             k = round(et_linear_eval(&g.ops[i].k, &b));
                int dup =
                    m < 1 || n < 1 || k < 1 || m > MAXD || n > MAXD || k > MAXD || m * k > big || k * n > big;
                for (int s = 0; s < n_seen && !dup; s++)
                    dup = seen[s][0] == m && seen[s][1] == n && seen[s][2] == k;
                if (dup || n_seen == 512) continue;
                seen[n_seen][0] = m, seen[n_seen][1] = n, seen[n_seen][2] = k, n_seen++;
                json_array_append_new(gemm, gemm_sample((int)m, (int)n, (int)k,
                                                        time_gemm(be, (int)m, (int)n, (int)k, x, w, y)));
            }
            if (progress) fprintf(progress, "etcalib bench: %d shapes of %s\n", n_seen, scenario->name);
            et_graph_free(&g);
        }
    }
    /* out = x + y over 3 arrays of n floats, working sets of 4 KiB to 128 MiB in steps of 2: every cache
     * level of a CPU or a GPU's L2 (50 MiB on an H100) and memory past them; arrays of their own */
    const size_t stream_n = (size_t)1 << 24;
    float *sx = be->alloc(be, stream_n * 4), *sy = be->alloc(be, stream_n * 4),
          *sz = be->alloc(be, stream_n * 4);
    if (sx && sy && sz) {
        be->fill(be, sx, 0.01f, stream_n), be->fill(be, sy, 0.02f, stream_n), be->fill(be, sz, 0, stream_n);
        for (size_t bytes = 4096; bytes <= 12 * stream_n; bytes *= 2) {
            const size_t n = bytes / 12;
            const int reps = bytes < (1u << 20) ? 200 : 10;
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                double t0 = et_wall_seconds();
                be->add(be, sz, sx, sy, n);
                be->sync(be);
                double t = et_wall_seconds() - t0;
                if (t < best) best = t;
            }
            json_array_append_new(stream, json_pack("{s:I, s:f, s:f}", "bytes", (json_int_t)(n * 12),
                                                    "seconds", best, "GBps", n * 12 / best / 1e9));
        }
    }
    if (sx) be->free(be, sx);
    if (sy) be->free(be, sy);
    if (sz) be->free(be, sz);
    if (!json_array_size(stream)) {
        json_decref(gemm), json_decref(stream);
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                          "out of %s memory for the streaming benchmarks", be->name);
        be->free(be, x), be->free(be, w), be->free(be, y);
        be->destroy(be);
        return NULL;
    }
    if (progress) fprintf(progress, "etcalib bench: %zu streaming sizes\n", json_array_size(stream));
    /* the fused Adam update over w, g, m, v (y, x, w and the upper half of y's buffer), over working sets of
     * 32 KiB to 2 MiB (a core's L2): there its arithmetic shows; larger ones stream at the bandwidth the
     * streaming kernels measure (and a repeated update would time a warm L3, not a step's cold states) */
    json_t *optimizer = json_array();
    be->fill(be, y, 0.001f, big); /* weights and second moments >= 0 */
    for (size_t n = 1024; n <= 65536; n *= 2) {
        const int reps = n < (1u << 16) ? 200 : 10;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = et_wall_seconds();
            be->adam_update(be, y, x, w, y + big / 2, NULL, n, &rt_adam_bench_args, NULL);
            be->sync(be);
            double t = et_wall_seconds() - t0;
            if (t < best) best = t;
        }
        json_array_append_new(optimizer,
                              json_pack("{s:I, s:f}", "parameters", (json_int_t)n, "seconds", best));
    }
    if (progress) fprintf(progress, "etcalib bench: %zu optimizer sizes\n", json_array_size(optimizer));
    double overhead = 1e30;
    for (int r = 0; r < 1000; r++) {
        double t0 = et_wall_seconds();
        be->op_timer_begin(be, 0);
        be->add(be, y, x, w, 0);
        be->op_timer_end(be, 0);
        double t = et_wall_seconds() - t0;
        if (t < overhead) overhead = t;
    }
    char about[256];
    be->describe(be, about, sizeof about);
    json_t *out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:f}", "tool", "etcalib bench",
                            "backend", be->name, "device", about, "gemm_math", rt_gemm_math_names[math],
                            "blas_core", strcmp(be->name, "cpu") == 0 ? rt_cpu_blas_core() : "",
                            "blas_threads", strcmp(be->name, "cpu") == 0 ? rt_cpu_blas_threads() : 0, "gemm",
                            gemm, "stream", stream, "optimizer", optimizer, "op_overhead_s", overhead);
    be->free(be, x), be->free(be, w), be->free(be, y);
    be->destroy(be);
    return out;
}

int calib_micro_load(const char *path, calib_micro *m, et_error *err)
{
    memset(m, 0, sizeof *m);
    snprintf(m->file, sizeof m->file, "%s", path);
    json_t *root = et_measured_load_json(path, err);
    if (!root) return -1;
    json_t *tool = json_object_get(root, "tool"), *gemm = json_object_get(root, "gemm"),
           *stream = json_object_get(root, "stream"), *backend = json_object_get(root, "backend");
    int rc = 0;
    if (!json_is_string(tool) || strcmp(json_string_value(tool), "etcalib bench") != 0 ||
        !json_is_array(gemm) || !json_is_array(stream) || !json_is_string(backend)) {
        rc = et_error_set(err, path, 0, 0, "$",
                          "not an etcalib bench file (tool, backend, gemm, stream expected)");
    } else {
        snprintf(m->backend, sizeof m->backend, "%s", json_string_value(backend));
        json_t *optimizer = json_object_get(root, "optimizer"); /* absent in files of earlier versions */
        if (optimizer && !json_is_array(optimizer))
            rc = et_error_set(err, path, 0, 0, "$.optimizer", "an array of {parameters, seconds} expected");
        m->samples = calloc(json_array_size(gemm) + json_array_size(stream) + json_array_size(optimizer) + 1,
                            sizeof *m->samples);
        if (!m->samples) rc = et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
        for (size_t i = 0; !rc && i < json_array_size(gemm); i++) {
            json_t *g = json_array_get(gemm, i);
            calib_sample s = {.kind = CALIB_SAMPLE_MATRIX,
                              .m = json_number_value(json_object_get(g, "m")),
                              .n = json_number_value(json_object_get(g, "n")),
                              .k = json_number_value(json_object_get(g, "k")),
                              .seconds = json_number_value(json_object_get(g, "seconds"))};
            s.flops = 2 * s.m * s.n * s.k, s.bytes = 4 * (s.m * s.k + s.k * s.n + s.m * s.n);
            if (!(s.seconds > 0) || !isfinite(s.seconds) || s.m < 1 || s.n < 1 || s.k < 1) {
                char where[48];
                snprintf(where, sizeof where, "$.gemm[%zu]", i);
                rc = et_error_set(err, path, 0, 0, where, "m, n, k >= 1 and seconds > 0 expected");
            }
            m->samples[m->n_samples++] = s;
        }
        for (size_t i = 0; !rc && i < json_array_size(stream); i++) {
            json_t *g = json_array_get(stream, i);
            calib_sample s = {.kind = CALIB_SAMPLE_STREAM,
                              .bytes = json_number_value(json_object_get(g, "bytes")),
                              .seconds = json_number_value(json_object_get(g, "seconds"))};
            /* bandwidth alone: the add's arithmetic is not what the vector rate stands for (the element-wise
             * kernels' own instruction mix, fitted from measured runs) */
            s.flops = 0;
            if (!(s.seconds > 0) || !isfinite(s.seconds) || !(s.bytes > 0)) {
                char where[48];
                snprintf(where, sizeof where, "$.stream[%zu]", i);
                rc = et_error_set(err, path, 0, 0, where, "bytes > 0 and seconds > 0 expected");
            }
            m->samples[m->n_samples++] = s;
        }
        for (size_t i = 0; !rc && i < json_array_size(optimizer); i++) {
            json_t *g = json_array_get(optimizer, i);
            calib_sample s = {.kind = CALIB_SAMPLE_OPTIMIZER,
                              .values = json_number_value(json_object_get(g, "parameters")),
                              .seconds = json_number_value(json_object_get(g, "seconds"))};
            if (!(s.seconds > 0) || !isfinite(s.seconds) || !(s.values >= 1)) {
                char where[48];
                snprintf(where, sizeof where, "$.optimizer[%zu]", i);
                rc = et_error_set(err, path, 0, 0, where, "parameters >= 1 and seconds > 0 expected");
            }
            m->samples[m->n_samples++] = s;
        }
    }
    json_decref(root);
    if (rc) calib_micro_free(m);
    return rc;
}

void calib_micro_free(calib_micro *m)
{
    free(m->samples);
    m->samples = NULL;
    m->n_samples = 0;
}

int calib_micro_load_csv(const char *path, const char *gpu_filter, const char *precision, calib_micro *m,
                         et_error *err)
{
    memset(m, 0, sizeof *m);
    snprintf(m->file, sizeof m->file, "%s", path);
    snprintf(m->backend, sizeof m->backend, "cuda"); /* public GPU measurements */
    calib_csv *t = calib_csv_open(path, err);
    if (!t) return -1;
    char **head = t->head, **fl = t->row;
    const int nh = t->n_head;
    const int gpu = calib_csv_column(head, nh, "gpu"), value = calib_csv_column(head, nh, "value"),
              unit = calib_csv_column(head, nh, "unit"), dtype = calib_csv_column(head, nh, "dtype"),
              M = calib_csv_column(head, nh, "M"), N = calib_csv_column(head, nh, "N"),
              K = calib_csv_column(head, nh, "K"), batch = calib_csv_column(head, nh, "batch"),
              category = calib_csv_column(head, nh, "category");
    const int is_gemm = gpu >= 0 && value >= 0 && unit >= 0 && dtype >= 0 && M >= 0 && N >= 0 && K >= 0;
    const int is_memory = gpu >= 0 && value >= 0 && unit >= 0 && category >= 0;
    if (nh <= 0 || (!is_gemm && !is_memory)) {
        calib_csv_close(t);
        return et_error_set(err, path, 1, 0, NULL,
                            "not a calibset table: gemm.csv (gpu, dtype, M, N, K, value, unit) or memory.csv "
                            "(gpu, category, value, unit) expected");
    }
    int cap = 64, rc = 0;
    m->samples = malloc((size_t)cap * sizeof *m->samples);
    while (m->samples && calib_csv_next(t)) {
        if (t->n_row < nh || !calib_csv_gpu_matches(fl[gpu], gpu_filter)) continue;
        calib_sample s = {0};
        if (is_gemm) {
            if (strcmp(fl[unit], "TFLOP/s") != 0 || !calib_csv_contains(fl[dtype], precision)) continue;
            const double b = batch >= 0 && calib_csv_number(fl[batch]) > 0 ? calib_csv_number(fl[batch]) : 1;
            s = (calib_sample){.kind = CALIB_SAMPLE_MATRIX,
                               .m = calib_csv_number(fl[M]) * b,
                               .n = calib_csv_number(fl[N]),
                               .k = calib_csv_number(fl[K])};
            const double rate = calib_csv_number(fl[value]) * 1e12;
            if (s.m <= 0 || s.n <= 0 || s.k <= 0 || rate <= 0) continue;
            s.flops = 2 * s.m * s.n * s.k;
            s.bytes = 2 * (s.m * s.k + s.k * s.n + s.m * s.n); /* 16-bit operands */
            s.seconds = s.flops / rate;
        } else {
            if (strcmp(fl[category], "HBM") != 0 || strcmp(fl[unit], "TB/s") != 0 ||
                calib_csv_number(fl[value]) <= 0)
                continue;
            s = (calib_sample){.kind = CALIB_SAMPLE_STREAM, .bytes = 1073741824.0};
            s.seconds = s.bytes / (calib_csv_number(fl[value]) * 1e12);
        }
        if (m->n_samples == cap) {
            calib_sample *grown = realloc(m->samples, (size_t)(cap *= 2) * sizeof *grown);
            if (!grown) break;
            m->samples = grown;
        }
        m->samples[m->n_samples++] = s;
    }
    calib_csv_close(t);
    if (!m->samples)
        rc = et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    else if (m->n_samples == 0)
        rc = et_error_set(err, path, 0, 0, NULL, "no row matches GPU \"%s\"%s%s", gpu_filter,
                          is_gemm ? " and dtype " : "", is_gemm ? precision : "");
    if (rc) calib_micro_free(m);
    return rc;
}
