/* rt_blas: the CBLAS products the CPU kernels call. OpenBLAS's cblas.h in a normal build; in a device build
 * (ET_REFERENCE_BLAS: a GPU machine without OpenBLAS, where the CPU backend is only the reference the CUDA
 * backend is checked against) the plain loops of rt_blas_ref.c behind the same two calls, row-major only. */
#ifndef ET_RT_BLAS_H
#define ET_RT_BLAS_H

#ifdef ET_REFERENCE_BLAS
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };
/* C[M, N] = alpha op(A) op(B) + beta C, row-major (CblasRowMajor only) */
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N,
                 int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                 int ldc);
void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N,
                 int K, double alpha, const double *A, int lda, const double *B, int ldb, double beta,
                 double *C, int ldc);
#else
#include <cblas.h>
#endif

/* The library's name for its kernels ("Haswell", ...; "reference" for rt_blas_ref.c) and its threads. */
const char *rt_blas_core_name(void);
int rt_blas_thread_count(void);

#endif
