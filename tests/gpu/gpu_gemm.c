/* gpu_gemm: the rate of a backend's linear layer (y = x W^T, rt_backend.h) on a large square product and
 * on a BERT-large step's shapes, in every arithmetic the backend has, timed with the backend's own op timers
 * (CUDA events on a GPU). A figure for tests/gpu/run.sh's table, not a test: it asserts nothing.
 *
 * Usage: gpu_gemm [--backend cuda] [--tokens T] [--size N] [--csv FILE]. Exit 77 (and why) when the
 * backend cannot start here. The shapes: N x N x N (default 8192), and T tokens (default 4096, a BERT-large
 * micro-batch of 16 sequences of 256 tokens) through 1024 -> 3072, 1024 -> 1024, 1024 -> 4096 and
 * 4096 -> 1024. Each is the best of 10 timed calls after 3 warm-up calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_backend.h"

static double time_linear(rt_backend *be, const float *x, const float *W, float *y, int T, int n_in,
                          int n_out)
{
    for (int r = 0; r < 3; r++)
        be->linear_fwd(be, x, W, NULL, y, T, n_in, n_out);
    double best = 1e30;
    for (int r = 0; r < 10; r++) {
        double t = 0;
        be->op_timer_begin(be, 0);
        be->linear_fwd(be, x, W, NULL, y, T, n_in, n_out);
        be->op_timer_end(be, 0);
        be->op_timers_collect(be, &t, 1);
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *name = "cuda", *csv = NULL;
    int T = 4096, N = 8192;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--backend") == 0)
            name = argv[i + 1];
        else if (strcmp(argv[i], "--tokens") == 0)
            T = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--size") == 0)
            N = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--csv") == 0)
            csv = argv[i + 1];
    }
    if (T < 1 || N < 1 || argc % 2 == 0) {
        fprintf(stderr, "usage: gpu_gemm [--backend cuda] [--tokens T] [--size N] [--csv FILE]\n");
        return 2;
    }
    et_error err;
    rt_backend *be = rt_backend_create(name, &err);
    if (!be) {
        printf("skip gpu_gemm: %s\n", err.text);
        return 77;
    }
    const size_t big = (size_t)N * N > (size_t)T * 4096 ? (size_t)N * N : (size_t)T * 4096;
    float *x = be->alloc(be, big * 4), *W = be->alloc(be, big * 4), *y = be->alloc(be, big * 4);
    if (!x || !W || !y || be->op_timers_init(be, 1)) {
        fprintf(stderr, "gpu_gemm: out of %s memory for %zu-value operands\n", name, big);
        return 1;
    }
    be->fill(be, x, 0.01f, big), be->fill(be, W, 0.02f, big);
    FILE *out = csv ? fopen(csv, "w") : NULL;
    if (out) fprintf(out, "math,m,n,k,seconds,tflops,share_of_square\n");
    const int shapes[5][3] = {{N, N, N}, {T, 1024, 3072}, {T, 1024, 1024}, {T, 1024, 4096}, {T, 4096, 1024}};
    printf("%-5s %6s %6s %6s %10s %9s %9s\n", "math", "m", "k", "n", "time[us]", "TFLOP/s", "of square");
    for (int m = 0; m < RT_GEMM_MATH_COUNT; m++) {
        if (be->set_gemm_math(be, (rt_gemm_math)m)) continue;
        double square = 0;
        for (int s = 0; s < 5; s++) {
            const int rows = shapes[s][0], n_in = shapes[s][1], n_out = shapes[s][2];
            const double t = time_linear(be, x, W, y, rows, n_in, n_out);
            const double tflops = 2.0 * rows * n_in * n_out / t / 1e12;
            if (s == 0) square = tflops;
            printf("%-5s %6d %6d %6d %10.1f %9.1f %8.0f%%\n", rt_gemm_math_names[m], rows, n_in, n_out,
                   t * 1e6, tflops, 100 * tflops / square);
            if (out)
                fprintf(out, "%s,%d,%d,%d,%.9g,%.4g,%.4g\n", rt_gemm_math_names[m], rows, n_out, n_in, t,
                        tflops, tflops / square);
        }
    }
    if (out) fclose(out);
    const char *failure = be->failure(be);
    if (failure) fprintf(stderr, "gpu_gemm: %s\n", failure);
    be->free(be, x), be->free(be, W), be->free(be, y);
    be->destroy(be);
    return failure ? 1 : 0;
}
