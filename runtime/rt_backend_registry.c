/* The backends this build has, by name (rt_backend.h). */
#include <stdio.h>
#include <string.h>

#include "rt_backend.h"

const char *const rt_gemm_math_names[] = {"fp32", "tf32", "bf16", "fp16", NULL};

rt_gemm_math rt_gemm_math_for(et_precision p)
{
    return p == ET_FP32   ? RT_GEMM_FP32
           : p == ET_TF32 ? RT_GEMM_TF32
           : p == ET_BF16 ? RT_GEMM_BF16
           : p == ET_FP16 ? RT_GEMM_FP16
                          : RT_GEMM_MATH_COUNT;
}

#ifdef ET_HAVE_CUDA
const char *const rt_backend_names[] = {"cpu", "cuda", NULL};
#else
const char *const rt_backend_names[] = {"cpu", NULL};
#endif

#ifndef ET_HAVE_CUDA
int rt_cuda_device_count(void)
{
    return 0;
}
#endif

rt_backend *rt_backend_create(const char *name, et_error *err)
{
    return rt_backend_create_local(name, 0, err);
}

rt_backend *rt_backend_create_local(const char *name, int local_rank, et_error *err)
{
    if (strcmp(name, "cpu") == 0) return rt_backend_cpu_create(err);
#ifdef ET_HAVE_CUDA
    const int devices = rt_cuda_device_count();
    const int ordinal = devices > 0 && local_rank > 0 ? local_rank % devices : 0;
    if (strcmp(name, "cuda") == 0) return rt_backend_cuda_create(ordinal, err);
    if (strcmp(name, "auto") == 0) {
        et_error ignored;
        rt_backend *be = devices > 0 ? rt_backend_cuda_create(ordinal, &ignored) : NULL;
        return be ? be : rt_backend_cpu_create(err);
    }
#else
    (void)local_rank;
    if (strcmp(name, "auto") == 0) return rt_backend_cpu_create(err);
#endif
    char have[64] = "";
    for (int i = 0; rt_backend_names[i]; i++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "", rt_backend_names[i]);
    et_error_set(err, NULL, 0, 0, NULL, "backend \"%s\": not in this build of etrun (it has: %s%s)", name,
                 have, strcmp(name, "cuda") == 0 ? "; CMake found no nvcc, or was given -DET_CUDA=OFF" : "");
    return NULL;
}
