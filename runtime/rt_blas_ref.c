/* The reference products of a device build (rt_blas.h): row-major loops, the inner one over contiguous
 * values of C and B where the layout allows. Correct and slow; only the CPU reference of tests/gpu runs
 * them. */
#include <stddef.h>

#include "rt_blas.h"

#define RT_REF_GEMM(NAME, REAL)                                                                              \
    void NAME(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K, \
              REAL alpha, const REAL *A, int lda, const REAL *B, int ldb, REAL beta, REAL *C, int ldc)       \
    {                                                                                                        \
        (void)order; /* row-major: the only order the kernels use */                                         \
        for (int i = 0; i < M; i++) {                                                                        \
            REAL *c = C + (size_t)i * ldc;                                                                   \
            for (int j = 0; j < N; j++)                                                                      \
                c[j] = beta == 0 ? 0 : beta * c[j];                                                          \
            for (int k = 0; k < K; k++) {                                                                    \
                const REAL a =                                                                               \
                    alpha * (ta == CblasNoTrans ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i]);          \
                if (tb == CblasNoTrans) {                                                                    \
                    const REAL *b = B + (size_t)k * ldb;                                                     \
                    for (int j = 0; j < N; j++)                                                              \
                        c[j] += a * b[j];                                                                    \
                } else {                                                                                     \
                    for (int j = 0; j < N; j++)                                                              \
                        c[j] += a * B[(size_t)j * ldb + k];                                                  \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }

RT_REF_GEMM(cblas_sgemm, float)
RT_REF_GEMM(cblas_dgemm, double)

const char *rt_blas_core_name(void)
{
    return "reference";
}

int rt_blas_thread_count(void)
{
    return 1;
}
