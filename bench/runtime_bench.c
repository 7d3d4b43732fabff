/* Benchmark (not a test): one training step of a scenario on this machine with etrun's CPU backend, on
 * one process. Prints each op class's share of the step and its fraction of the physical limit measured in
 * the same run: matrix products against OpenBLAS's large-GEMM rate, element-wise ops (bytes the cost model
 * counts per op) against a streaming copy at the cache level their tensors live in, the fused optimizer
 * against a plain streaming loop over the same bytes; then the step beside the cost model's prediction for
 * the scenario's device profile. Usage: runtime_bench [scenario.json] [steps] (default: the source tree's
 * bench/bert-base-cpu.json, 3 steps after one warm-up). Pin it (taskset -c 0) and set OPENBLAS_NUM_THREADS.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "batch.h"
#include "rt_data.h"
#include "rt_model.h"
#include "wall_clock.h"

/* n floats written with small values (not calloc'd: untouched pages all map the kernel's one zero page,
 * which stays in cache and makes a product over them faster than over real operands) */
static float *filled(size_t n)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = 0.001f * (float)(i % 97);
    return p;
}

/* OpenBLAS's rate on a large square product, best of a few runs. */
static double large_gemm_gflops(int n)
{
    float *a = filled((size_t)n * n), *b = filled((size_t)n * n), *c = filled((size_t)n * n);
    double best = 0;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = et_wall_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        double g = 2.0 * n * n * n / (et_wall_seconds() - t0) / 1e9;
        if (g > best) best = g;
    }
    free(a), free(b), free(c);
    return best;
}

/* Streaming copy bandwidth (bytes read + written per second) over `bytes` per buffer, best of several. */
static double copy_gbps(size_t bytes)
{
    size_t n = bytes / sizeof(float);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++)
        a[i] = (float)i, b[i] = 0;
    int reps = (int)(1 + (256u << 20) / bytes);
    double best = 0;
    for (int round = 0; round < 5; round++) {
        double t0 = et_wall_seconds();
        for (int r = 0; r < reps; r++) {
            memcpy(b, a, n * sizeof *a);
            a[r % n] += b[(r * 7) % n]; /* keeps the copies */
        }
        double g = 2.0 * bytes * reps / (et_wall_seconds() - t0) / 1e9;
        if (g > best) best = g;
    }
    free(a), free(b);
    return best;
}

/* The fused optimizer against a plain loop streaming the same arrays (read w, g, m, v; write w, m, v). */
static void optimizer_vs_stream(rt_backend *be, size_t n, double *fused_s, double *stream_s)
{
    float *w = calloc(n, 4), *g = calloc(n, 4), *m = calloc(n, 4), *v = calloc(n, 4);
    for (size_t i = 0; i < n; i++)
        g[i] = 1e-3f * (float)(i % 13), w[i] = 0.01f;
    *fused_s = *stream_s = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = et_wall_seconds();
        be->adam_update(be, w, g, m, v, NULL, n, &rt_adam_bench_args, NULL);
        double t1 = et_wall_seconds();
        for (size_t i = 0; i < n; i++) { /* the same bytes, three multiply-adds */
            m[i] = m[i] * 0.5f + g[i];
            v[i] = v[i] * 0.5f + g[i];
            w[i] = w[i] * 0.5f + m[i];
        }
        double t2 = et_wall_seconds();
        if (t1 - t0 < *fused_s) *fused_s = t1 - t0;
        if (t2 - t1 < *stream_s) *stream_s = t2 - t1;
    }
    free(w), free(g), free(m), free(v);
}

/* The same matrix products as the step's GEMM ops, as bare cblas_sgemm calls on the last batch's shapes
 * (x W^T forward, dy W for .bwd_data, dy^T x for .bwd_weight): seconds per step. */
static double bare_gemm_seconds(const rt_model *m, const et_batch_shape *shape)
{
    double total = 0;
    for (int i = 0; i < m->graph.n_ops; i++) {
        const et_op *op = &m->graph.ops[i];
        if (op->kind != ET_OP_GEMM) continue;
        const int M = (int)et_linear_eval(&op->m, shape), N = (int)et_linear_eval(&op->n, shape),
                  K = (int)et_linear_eval(&op->k, shape);
        if (M <= 0 || N <= 0 || K <= 0) continue;
        float *a = filled((size_t)M * K), *b = filled((size_t)K * N), *c = filled((size_t)M * N);
        const size_t len = strlen(op->id);
        const int weight = len > 11 && strcmp(op->id + len - 11, ".bwd_weight") == 0,
                  data = len > 9 && strcmp(op->id + len - 9, ".bwd_data") == 0;
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = et_wall_seconds();
            if (weight) /* [M, N] = dy^T [M, K]... as stored: dy [K, M], x [K, N] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, 1, a, M, b, N, 1, c, N);
            else if (data)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, a, K, b, N, 1, c, N);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
            double dt = et_wall_seconds() - t0;
            if (dt < best) best = dt;
        }
        total += best;
        free(a), free(b), free(c);
    }
    return total;
}

enum { K_GEMM, K_ATTENTION, K_ELEMENTWISE, K_EMBEDDING, K_LOSS, K_OPTIMIZER, K_OTHER, K_COUNT };

static int kind_class(et_op_kind k)
{
    switch (k) {
    case ET_OP_GEMM:
    case ET_OP_TT:
        return K_GEMM;
    case ET_OP_ATTENTION:
        return K_ATTENTION;
    case ET_OP_ELEMENTWISE:
        return K_ELEMENTWISE;
    case ET_OP_EMBEDDING:
        return K_EMBEDDING;
    case ET_OP_LOSS:
        return K_LOSS;
    case ET_OP_OPTIMIZER:
        return K_OPTIMIZER;
    default:
        return K_OTHER;
    }
}

int main(int argc, char **argv)
{
    rt_cpu_blas_select(argv); /* the kernels etrun runs with */
    const char *path = argc > 1 ? argv[1] : ET_SOURCE_DIR "/bench/bert-base-cpu.json";
    const int steps = argc > 2 ? atoi(argv[2]) : 3;
    et_scenario s;
    et_error err;
    if (steps < 1 || et_scenario_load(path, &s, &err)) {
        if (steps < 1)
            fprintf(stderr, "runtime_bench: steps must be >= 1\n");
        else
            et_error_print(stderr, &err);
        return 2;
    }
    rt_data data;
    rt_model m;
    rt_batch b = {0};
    rt_backend *be = rt_backend_cpu_create(&err);
    if (!be || rt_data_init(&data, &s, 1, 0, 1, NULL, &err) || rt_model_init(&m, &s, be, 1, &err)) {
        et_error_print(stderr, &err);
        return 2;
    }
    const double peak = large_gemm_gflops(2048), l2_copy = copy_gbps(512u << 10),
                 dram_copy = copy_gbps(256u << 20);
    double t[K_COUNT] = {0}, flops[K_COUNT] = {0}, bytes[K_COUNT] = {0}, largest_tensor = 0;
    double step_time = 0, tokens = 0, predicted = 0;
    et_hyper h = {1e-4, 0.9, 0.999, 1e-8, 0.01, 0, 1};
    double *pred = calloc((size_t)m.graph.n_ops, sizeof *pred);
    et_batch_shape *last_shapes = calloc((size_t)data.accum, sizeof *last_shapes);
    for (int step = 0; step <= steps; step++) {
        double t0 = et_wall_seconds();
        rt_model_begin_step(&m);
        double norm = rt_data_global_predictions(&data, step);
        for (int micro = 0; micro < data.accum; micro++) {
            rt_data_batch(&data, step, micro, &b);
            rt_model_step_micro(&m, &b, norm, NULL, NULL);
            if (step == 0) continue; /* warm-up */
            const et_batch_shape shape = rt_batch_shape(&b);
            for (int i = 0; i < m.graph.n_ops; i++) {
                const et_op *op = &m.graph.ops[i];
                const int k = kind_class(op->kind);
                const int micro_op = op->phase != ET_PHASE_OPTIMIZER;
                if (!micro_op && micro > 0) continue;
                flops[k] += et_linear_eval(&op->flops, &shape);
                const double by = et_linear_eval(&op->bytes, &shape);
                bytes[k] += by;
                if (k == K_ELEMENTWISE && by > largest_tensor) largest_tensor = by;
                predicted += et_op_time(op, &shape, &s.cluster.device, s.precision);
            }
            tokens += b.T;
            last_shapes[micro] = shape;
        }
        rt_model_update(&m, &h);
        rt_model_end_step(&m); /* the step's scalars and op times read back */
        if (step == 0) continue;
        step_time += et_wall_seconds() - t0;
        for (int i = 0; i < m.graph.n_ops; i++)
            t[kind_class(m.graph.ops[i].kind)] += m.op_time[i];
    }
    free(pred);
    double bare_per_step = 0; /* outside the timed steps */
    for (int micro = 0; micro < data.accum; micro++)
        bare_per_step += bare_gemm_seconds(&m, &last_shapes[micro]);
    free(last_shapes);
    double gemm_last = 0; /* the last step's GEMM ops, as measured */
    for (int i = 0; i < m.graph.n_ops; i++)
        if (m.graph.ops[i].kind == ET_OP_GEMM) gemm_last += m.op_time[i];
    double fused, stream;
    optimizer_vs_stream(be, m.n_params, &fused, &stream);
    const double measured = step_time / steps;
    /* the cache level an element-wise op's tensors live in: L2 (per core, 1-2 MiB on current x86) or memory
     */
    const double ew_limit = largest_tensor <= (1u << 20) ? l2_copy : dram_copy;
    static const char *const names[K_COUNT] = {
        "matrix products", "attention", "element-wise", "embedding", "loss", "optimizer", "other"};
    printf(
        "# %s: %d layers, hidden %d, %lld sequences of up to %d tokens, fp32, 1 process, %d steps after one "
        "warm-up; OpenBLAS core %s, %d thread(s)\n",
        s.name, s.model.layers, s.model.hidden, s.batch.local, s.data.seq_len, steps, rt_cpu_blas_core(),
        openblas_get_num_threads());
    printf("%-44s %14s\n", "limit measured in this run", "value");
    printf("%-44s %14.1f\n", "OpenBLAS sgemm 2048^3 [GFLOP/s]", peak);
    printf("%-44s %14.1f\n", "stream copy, 512 KiB buffers [GB/s]", l2_copy);
    printf("%-44s %14.1f\n", "stream copy, 256 MiB buffers [GB/s]", dram_copy);
    printf("\n%-18s %12s %9s %14s %14s %12s\n", "op class", "time [ms]", "share", "GFLOP/s", "GB/s",
           "of limit");
    for (int k = 0; k < K_COUNT; k++) {
        if (t[k] <= 0) continue;
        const double tk = t[k] / steps, gf = flops[k] / steps / tk / 1e9, gb = bytes[k] / steps / tk / 1e9;
        char limit[32] = "-";
        if (k == K_GEMM) snprintf(limit, sizeof limit, "%.0f%% GEMM", 100 * gf / peak);
        if (k == K_ELEMENTWISE || k == K_EMBEDDING || k == K_LOSS)
            snprintf(limit, sizeof limit, "%.0f%% copy", 100 * gb / ew_limit);
        printf("%-18s %12.2f %8.1f%% %14.1f %14.1f %12s\n", names[k], tk * 1e3, 100 * tk / measured, gf, gb,
               limit);
    }
    printf("\n%-44s %14.3f\n", "GEMM ops of the last step [ms]", gemm_last * 1e3);
    printf("%-44s %14.3f\n", "bare sgemm on the same shapes [ms]", bare_per_step * 1e3);
    printf("%-44s %13.1f%%\n", "GEMM ops at (target >= 90%) of bare sgemm", 100 * bare_per_step / gemm_last);
    printf("%-44s %14.3f\n", "fused AdamW over every parameter [ms]", fused * 1e3);
    printf("%-44s %14.3f\n", "plain loop over the same bytes [ms]", stream * 1e3);
    printf("%-44s %14.2f\n", "ratio (target <= 1.5)", fused / stream);
    printf("%-44s %14.3f\n", "measured step [s]", measured);
    printf("%-44s %14.3f\n", "cost model, this batch, device profile [s]", predicted / steps);
    printf("%-44s %14.2f\n", "measured / predicted", measured / (predicted / steps));
    printf("%-44s %14.0f\n", "tokens per second", tokens / step_time);
    const double gemm_share = flops[K_GEMM] / t[K_GEMM] / 1e9 / peak, same_shape = bare_per_step / gemm_last;
    printf("# verdict: GEMM ops at %.0f%% of bare sgemm on the same shapes (target >= 90%%; %.0f%% of the "
           "large-GEMM rate), optimizer at %.2fx a streaming loop (target <= 1.5): %s\n",
           100 * same_shape, 100 * gemm_share, fused / stream,
           same_shape >= 0.9 && fused / stream <= 1.5 ? "PASS" : "BELOW TARGET");
    rt_batch_free(&b);
    rt_model_free(&m);
    be->destroy(be);
    rt_data_free(&data);
    et_scenario_free(&s);
    return 0;
}
