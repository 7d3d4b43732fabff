/* Benchmark (not a test): a BERT-base-sized training step on this machine with etrun's CPU backend.
 * Prints the achieved GFLOP/s of the step's matrix products against OpenBLAS's own large-GEMM rate measured
 * in the same run (target: 70% or more), and the step time beside the cost model's prediction for the host
 * CPU profile. Usage: runtime_bench [scenario.json] (default: the source tree's bench/bert-base-cpu.json). */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "analytic.h"
#include "batch.h"
#include "rt_data.h"
#include "rt_model.h"
#include "wall_clock.h"

/* OpenBLAS's rate on a large square product, best of a few runs. */
static double large_gemm_gflops(int n)
{
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
          *c = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++)
        a[i] = b[i] = 0.001f * (float)(i % 97);
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

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : ET_SOURCE_DIR "/bench/bert-base-cpu.json";
    et_scenario s;
    et_error err;
    if (et_scenario_load(path, &s, &err)) {
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
    double peak = large_gemm_gflops(2048);
    const int steps = 3;
    double gemm_time = 0, gemm_flops = 0, step_time = 0, tokens = 0;
    et_hyper h = {1e-4, 0.9, 0.999, 1e-8, 0.01, 0};
    for (int step = 0; step <= steps; step++) {
        double t0 = et_wall_seconds();
        rt_model_begin_step(&m);
        double norm = rt_data_global_predictions(&data, step);
        for (int micro = 0; micro < data.accum; micro++) {
            rt_data_batch(&data, step, micro, &b);
            rt_model_step_micro(&m, &b, norm, NULL, NULL);
            if (step == 0) continue; /* warm-up */
            et_batch_shape shape = {.sequences = b.B, .tokens = b.T, .predictions = b.P};
            for (int i = 0; i < b.B; i++) {
                double l = b.offsets[i + 1] - b.offsets[i];
                shape.tokens_sq += l * l;
            }
            for (int i = 0; i < m.graph.n_ops; i++)
                if (m.graph.ops[i].kind == ET_OP_GEMM)
                    gemm_flops += et_linear_eval(&m.graph.ops[i].flops, &shape);
            tokens += b.T;
        }
        rt_model_update(&m, &h);
        if (step == 0) continue;
        step_time += et_wall_seconds() - t0;
        for (int i = 0; i < m.graph.n_ops; i++)
            if (m.graph.ops[i].kind == ET_OP_GEMM) gemm_time += m.op_time[i];
    }
    et_estimate e;
    et_analytic_estimate(&s, &e, &err);
    double achieved = gemm_flops / gemm_time / 1e9, measured = step_time / steps;
    printf("# %s: %d layers, hidden %d, %lld sequences of up to %d tokens, fp32, 1 process (%d steps after "
           "warm-up)\n",
           s.name, s.model.layers, s.model.hidden, s.batch.local, s.data.seq_len, steps);
    printf("%-44s %14s\n", "quantity", "value");
    printf("%-44s %14.1f\n", "OpenBLAS sgemm 2048^3 [GFLOP/s]", peak);
    printf("%-44s %14.1f\n", "step's matrix products [GFLOP/s]", achieved);
    printf("%-44s %13.1f%%\n", "share of the large-GEMM rate (target >= 70%)", 100 * achieved / peak);
    printf("%-44s %14.3f\n", "matrix products' share of the step [%]", 100 * gemm_time / step_time);
    printf("%-44s %14.3f\n", "measured step [s]", measured);
    printf("%-44s %14.3f\n", "cost model, host CPU profile [s]", e.step_time);
    printf("%-44s %14.2f\n", "measured / predicted", measured / e.step_time);
    printf("%-44s %14.0f\n", "tokens per second", tokens / step_time);
    printf("# verdict: matrix products at %.0f%% of OpenBLAS's large-GEMM rate: %s\n", 100 * achieved / peak,
           achieved >= 0.7 * peak ? "PASS" : "BELOW TARGET");
    rt_batch_free(&b);
    rt_model_free(&m);
    be->destroy(be);
    rt_data_free(&data);
    et_scenario_free(&s);
    return 0;
}
