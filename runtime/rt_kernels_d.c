/* double instantiation of the CPU kernels (gradient checks) */
#include "rt_blas.h"

#include "rt_kernels.h"
#define REAL double
#define S _d
#define GEMM cblas_dgemm
#include "rt_kernels_impl.h"
#include "rt_tt.h"
#include "rt_tt_impl.h"
