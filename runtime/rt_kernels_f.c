/* float instantiation of the CPU kernels (training) */
#include "rt_blas.h"

#include "rt_kernels.h"
#define REAL float
#define S _f
#define GEMM cblas_sgemm
#define RT_FAST_ELEMENTWISE
#define RT_TT_OPS
#include "rt_kernels_impl.h"
#include "rt_tt.h"
#include "rt_tt_impl.h"
