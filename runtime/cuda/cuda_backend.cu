/* The CUDA backend (rt_backend.h): device memory, a compute and a communication stream, op timers from a
 * pool of CUDA events, the provenance line and the table; kernels and products live in the other files of
 * this folder (cuda_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

#define CU_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt's workspace: 32 MiB, as NVIDIA's samples use */

void cu_fail(cu_ctx *c, const char *file, int line, const char *call, const char *what, const char *hint)
{
    if (c->failure[0]) return;
    const char *base = strrchr(file, '/');
    snprintf(c->failure, sizeof c->failure, "%s:%d: %s: %s (%s)", base ? base + 1 : file, line, call, what,
             hint);
}

const char *cu_lt_status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
        return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
        return "cuBLAS error";
    }
}

/* ---- column sums (shared by the other files) ---- */

/* blockIdx.y takes a chunk of rows; each thread one column of it; one atomic add per (chunk, column) */
__global__ void colsum_acc_kernel(float *out, const float *in, int ld, int rows, int cols, int rows_per_chunk)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    const int r0 = blockIdx.y * rows_per_chunk, r1 = min(rows, r0 + rows_per_chunk);
    float s = 0;
    for (int r = r0; r < r1; r++)
        s += in[(size_t)r * ld + col];
    atomicAdd(out + col, s);
}

void cu_colsum_acc(cu_ctx *c, float *out, const float *in, int ld, int rows, int cols)
{
    if (c->failure[0] || rows <= 0 || cols <= 0) return;
    const int per = 64, chunks = (rows + per - 1) / per;
    dim3 grid((unsigned)((cols + 255) / 256), (unsigned)chunks);
    colsum_acc_kernel<<<grid, 256, 0, c->compute>>>(out, in, ld, rows, cols, per);
    CU_CHECK_LAUNCH(c, "colsum_acc_kernel");
}

/* ---- buffers ---- */

static void *cu_alloc(rt_backend *be, size_t bytes)
{
    cu_ctx *c = cu_of(be);
    void *p = NULL;
    if (c->failure[0]) return NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is the caller's to report, not sticky */
        return NULL;
    }
    CU_CHECK(c, cudaMemsetAsync(p, 0, bytes, c->compute), "zero-filling a new buffer");
    return p;
}

static void cu_free(rt_backend *be, void *p)
{
    if (p) CU_CHECK(cu_of(be), cudaFree(p), "freeing a buffer");
}

/* page-locked host memory: an upload from it is a DMA the runtime does not stage first */
static void *cu_alloc_host(rt_backend *be, size_t bytes)
{
    cu_ctx *c = cu_of(be);
    void *p = NULL;
    if (c->failure[0]) return NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void cu_free_host(rt_backend *be, void *p)
{
    if (p) CU_CHECK(cu_of(be), cudaFreeHost(p), "freeing page-locked host memory");
}

static void cu_upload(rt_backend *be, void *dst, const void *src, size_t bytes)
{
    cu_ctx *c = cu_of(be);
    if (!bytes) return;
    /* no wait: from pageable memory the runtime stages the source before returning (CUDA Runtime API,
     * "API synchronization behavior"), so the caller may reuse it at once (though staging may wait for the
     * stream); from alloc_host's page-locked memory it is a DMA queued on the stream */
    CU_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->compute), "copying host data in");
}

static void cu_download(rt_backend *be, void *dst, const void *src, size_t bytes)
{
    cu_ctx *c = cu_of(be);
    if (!bytes) return;
    be->host_waits++;
    CU_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->compute),
             "copying device data out");
    CU_CHECK(c, cudaStreamSynchronize(c->compute), "a kernel before this copy failed on the device");
}

__global__ void fill_kernel(float *x, float value, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = value;
}

static void cu_fill(rt_backend *be, float *x, float value, size_t n)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || !n) return;
    if (value == 0.0f) {
        CU_CHECK(c, cudaMemsetAsync(x, 0, n * sizeof *x, c->compute), "zero-filling");
        return;
    }
    fill_kernel<<<cu_blocks(n, 256), 256, 0, c->compute>>>(x, value, n);
    CU_CHECK_LAUNCH(c, "fill_kernel");
}

static void cu_copy(rt_backend *be, float *dst, const float *src, size_t n)
{
    cu_ctx *c = cu_of(be);
    if (n)
        CU_CHECK(c, cudaMemcpyAsync(dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice, c->compute),
                 "copying on the device");
}

static void cu_copy_2d(rt_backend *be, float *dst, int ld_dst, const float *src, int ld_src, int rows,
                       int cols)
{
    cu_ctx *c = cu_of(be);
    if (rows > 0 && cols > 0)
        CU_CHECK(c,
                 cudaMemcpy2DAsync(dst, (size_t)ld_dst * sizeof *dst, src, (size_t)ld_src * sizeof *src,
                                   (size_t)cols * sizeof *dst, (size_t)rows, cudaMemcpyDeviceToDevice,
                                   c->compute),
                 "copying rows on the device");
}

/* ---- streams and events: an rt_event is a cudaEvent_t (timing on) ---- */

static cudaStream_t cu_stream(const cu_ctx *c, rt_stream s)
{
    return s == RT_STREAM_COMM ? c->comm : c->compute;
}

static rt_event *cu_event_create(rt_backend *be)
{
    cu_ctx *c = cu_of(be);
    cudaEvent_t e = NULL;
    CU_CHECK(c, cudaEventCreate(&e), "creating an event");
    return c->failure[0] ? NULL : (rt_event *)e;
}

static void cu_event_destroy(rt_backend *be, rt_event *e)
{
    if (e) CU_CHECK(cu_of(be), cudaEventDestroy((cudaEvent_t)e), "destroying an event");
}

static void cu_event_record(rt_backend *be, rt_event *e, rt_stream s)
{
    cu_ctx *c = cu_of(be);
    CU_CHECK(c, cudaEventRecord((cudaEvent_t)e, cu_stream(c, s)), "recording an event");
}

static void cu_stream_wait(rt_backend *be, rt_stream s, rt_event *e)
{
    cu_ctx *c = cu_of(be);
    CU_CHECK(c, cudaStreamWaitEvent(cu_stream(c, s), (cudaEvent_t)e, 0), "a stream waiting for an event");
}

static bool cu_event_done(rt_backend *be, rt_event *e)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0]) return true; /* nothing more will run: no caller should wait for it */
    const cudaError_t q = cudaEventQuery((cudaEvent_t)e);
    if (q == cudaErrorNotReady) return false;
    CU_CHECK(c, q, "asking whether an event was reached (a kernel before it failed on the device)");
    return true;
}

static void cu_event_sync(rt_backend *be, rt_event *e)
{
    cu_ctx *c = cu_of(be);
    be->host_waits++;
    CU_CHECK(c, cudaEventSynchronize((cudaEvent_t)e), "waiting for an event (a kernel before it failed)");
}

static double cu_event_seconds(rt_backend *be, rt_event *from, rt_event *to)
{
    cu_ctx *c = cu_of(be);
    float ms = 0;
    if (c->failure[0]) return 0;
    /* not recorded or not complete: the contract's 0, and no failure */
    if (cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return ms * 1e-3;
}

/* ---- timing ---- */

static int cu_timers_init(rt_backend *be, int n_ops)
{
    cu_ctx *c = cu_of(be);
    free(c->open);
    c->n_ops = n_ops > 0 ? n_ops : 1;
    c->open = (int *)malloc((size_t)c->n_ops * sizeof *c->open);
    if (!c->open) return -1;
    for (int i = 0; i < c->n_ops; i++)
        c->open[i] = -1;
    c->used_pairs = 0;
    return 0;
}

static void cu_timer_begin(rt_backend *be, int op)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || op < 0 || op >= c->n_ops) return;
    if (c->used_pairs == c->n_pairs) { /* the pool grows by half, its events made once */
        const int n = c->n_pairs ? c->n_pairs + c->n_pairs / 2 : 256;
        cu_timer_pair *p = (cu_timer_pair *)realloc(c->pairs, (size_t)n * sizeof *p);
        if (!p) {
            cu_fail(c, __FILE__, __LINE__, "realloc", "out of host memory", "growing the op timers' events");
            return;
        }
        c->pairs = p;
        for (int i = c->n_pairs; i < n; i++) {
            CU_CHECK(c, cudaEventCreate(&p[i].begin), "creating op timer events");
            CU_CHECK(c, cudaEventCreate(&p[i].end), "creating op timer events");
        }
        if (c->failure[0]) return;
        c->n_pairs = n;
    }
    cu_timer_pair *t = &c->pairs[c->used_pairs];
    t->op = op;
    c->open[op] = c->used_pairs++;
    CU_CHECK(c, cudaEventRecord(t->begin, c->compute), "recording an op's start");
}

static void cu_timer_end(rt_backend *be, int op)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || op < 0 || op >= c->n_ops || c->open[op] < 0) return;
    CU_CHECK(c, cudaEventRecord(c->pairs[c->open[op]].end, c->compute), "recording an op's end");
    c->open[op] = -1;
}

static void cu_timers_collect(rt_backend *be, double *op_time, int n_ops)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0]) return;
    be->host_waits++;
    CU_CHECK(c, cudaStreamSynchronize(c->compute), "a kernel of this step failed on the device");
    for (int i = 0; i < c->used_pairs && !c->failure[0]; i++) {
        const cu_timer_pair *t = &c->pairs[i];
        if (t->op >= n_ops || c->open[t->op] == i) continue; /* still open: read at the next collect */
        float ms = 0;
        CU_CHECK(c, cudaEventElapsedTime(&ms, t->begin, t->end), "reading an op timer");
        op_time[t->op] += ms * 1e-3;
    }
    c->used_pairs = 0;
    for (int i = 0; i < c->n_ops; i++)
        c->open[i] = -1;
}

static void cu_sync(rt_backend *be)
{
    cu_ctx *c = cu_of(be);
    be->host_waits++;
    CU_CHECK(c, cudaStreamSynchronize(c->compute), "a kernel failed on the device");
    CU_CHECK(c, cudaStreamSynchronize(c->comm), "a communication failed on the device");
}

static const char *cu_failure(const rt_backend *be)
{
    const cu_ctx *c = cu_of(be);
    return c->failure[0] ? c->failure : NULL;
}

/* ---- the table's own entries ---- */

static bool cu_supports(const rt_backend *be, rt_kernel_family family)
{
    (void)be;
    return family >= 0 && family < RT_FAMILY_COUNT;
}

static int cu_set_gemm_math(rt_backend *be, rt_gemm_math math)
{
    cu_ctx *c = cu_of(be);
    if (math < 0 || math >= RT_GEMM_MATH_COUNT) return -1;
    c->math = math;
    return 0;
}

static void cu_describe(const rt_backend *be, char *buf, size_t size)
{
    const cu_ctx *c = cu_of(be);
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    snprintf(buf, size,
             "%s (sm_%d%d, %d SMs, %.0f GiB), CUDA runtime %d.%d, driver %d.%d, cuBLASLt %zu, products %s",
             c->prop.name, c->prop.major, c->prop.minor, c->prop.multiProcessorCount,
             c->prop.totalGlobalMem / 1073741824.0, runtime / 1000, runtime % 1000 / 10, driver / 1000,
             driver % 1000 / 10, cublasLtGetVersion(), rt_gemm_math_names[c->math]);
}

static void cu_destroy(rt_backend *be)
{
    if (!be) return;
    cu_ctx *c = cu_of(be);
    if (c) {
        cudaDeviceSynchronize();
        for (int i = 0; i < c->n_pairs; i++)
            cudaEventDestroy(c->pairs[i].begin), cudaEventDestroy(c->pairs[i].end);
        free(c->pairs), free(c->open);
        cu_gemm_free_plans(c);
        if (c->lt) cublasLtDestroy(c->lt);
        if (c->blas) cublasDestroy(c->blas);
        cudaFree((void *)c->ptrs), cudaFree(c->moe_starts);
        cudaFree(c->workspace), cudaFree(c->cast[0]), cudaFree(c->cast[1]);
        if (c->compute) cudaStreamDestroy(c->compute);
        if (c->comm) cudaStreamDestroy(c->comm);
        free(c);
    }
    free(be);
}

void cu_table_buffers(rt_backend *be)
{
    be->name = "cuda";
    be->supports = cu_supports;
    be->set_gemm_math = cu_set_gemm_math;
    be->describe = cu_describe;
    be->alloc = cu_alloc;
    be->free = cu_free;
    be->alloc_host = cu_alloc_host;
    be->free_host = cu_free_host;
    be->upload = cu_upload;
    be->download = cu_download;
    be->fill = cu_fill;
    be->copy = cu_copy;
    be->copy_2d = cu_copy_2d;
    be->event_create = cu_event_create;
    be->event_destroy = cu_event_destroy;
    be->event_record = cu_event_record;
    be->stream_wait = cu_stream_wait;
    be->event_done = cu_event_done;
    be->event_sync = cu_event_sync;
    be->event_seconds = cu_event_seconds;
    be->op_timers_init = cu_timers_init;
    be->op_timer_begin = cu_timer_begin;
    be->op_timer_end = cu_timer_end;
    be->op_timers_collect = cu_timers_collect;
    be->sync = cu_sync;
    be->failure = cu_failure;
    be->destroy = cu_destroy;
}

extern "C" int rt_cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

extern "C" rt_backend *rt_backend_cuda_create(int ordinal, et_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        et_error_set(err, NULL, 0, 0, NULL, "backend \"cuda\": no CUDA device (%s%s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none",
                     e == cudaErrorInsufficientDriver
                         ? ": no NVIDIA driver here, or one older than this CUDA runtime"
                         : "");
        (void)cudaGetLastError();
        return NULL;
    }
    if (ordinal < 0 || ordinal >= count) {
        et_error_set(err, NULL, 0, 0, NULL, "backend \"cuda\": no device %d (the driver reports %d)", ordinal,
                     count);
        return NULL;
    }
    rt_backend *be = (rt_backend *)calloc(1, sizeof *be);
    cu_ctx *c = (cu_ctx *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(c), free(be);
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory creating the CUDA backend");
        return NULL;
    }
    be->ctx = c;
    c->device = ordinal;
    c->math = RT_GEMM_FP32;
    CU_CHECK(c, cudaSetDevice(ordinal), "selecting the device");
    CU_CHECK(c, cudaGetDeviceProperties(&c->prop, ordinal), "reading the device's properties");
    CU_CHECK(c, cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking), "creating the compute stream");
    CU_CHECK(c, cudaStreamCreateWithFlags(&c->comm, cudaStreamNonBlocking),
             "creating the communication stream");
    LT_CHECK(c, cublasLtCreate(&c->lt), "creating the cuBLASLt handle");
    LT_CHECK(c, cublasCreate(&c->blas), "creating the cuBLAS handle");
    if (c->blas) LT_CHECK(c, cublasSetStream(c->blas, c->compute), "cuBLAS on the compute stream");
    c->workspace_bytes = CU_WORKSPACE_BYTES;
    CU_CHECK(c, cudaMalloc(&c->workspace, c->workspace_bytes), "allocating cuBLASLt's workspace");
    cu_table_buffers(be);
    cu_table_gemm(be);
    cu_table_attention(be);
    cu_table_rows(be);
    cu_table_elementwise(be);
    cu_table_optimizer(be);
    cu_table_tt(be);
    cu_table_flash(be);
    if (c->failure[0]) {
        et_error_set(err, NULL, 0, 0, NULL, "backend \"cuda\": cannot start: %s", c->failure);
        cu_destroy(be);
        return NULL;
    }
    return be;
}
