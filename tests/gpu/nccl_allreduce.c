/* nccl_allreduce: NCCL's summing all-reduce on the ranks of this process's devices (one on the device
 * machine), nccl-tests style: out of place, float sums from 1 KiB to 1 GiB a factor of 8 apart, the mean of
 * 20 calls after 5 warm-up calls timed with CUDA events; algbw = bytes / time, busbw = algbw 2 (n - 1) / n
 * (0 on one rank, where the call is a copy); a verdict from the sums checked against the host's. Every CUDA
 * and NCCL call is checked with file:line and a hint. Exit 77 when there is no device. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(call, hint)                                                                                  \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "nccl_allreduce: %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,               \
                    cudaGetErrorString(e_), hint);                                                           \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)
#define NCCL_OK(call, hint)                                                                                  \
    do {                                                                                                     \
        ncclResult_t r_ = (call);                                                                            \
        if (r_ != ncclSuccess) {                                                                             \
            fprintf(stderr, "nccl_allreduce: %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,               \
                    ncclGetErrorString(r_), hint);                                                           \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("skip nccl_allreduce: no CUDA device\n");
        return 77;
    }
    int version = 0;
    NCCL_OK(ncclGetVersion(&version), "reading NCCL's version");
    ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
    int *devs = calloc((size_t)n, sizeof *devs);
    for (int i = 0; i < n; i++)
        devs[i] = i;
    NCCL_OK(ncclCommInitAll(comms, n, devs), "one communicator over this process's devices");
    const size_t max_count = (size_t)1 << 28; /* 1 GiB of floats */
    float **send = calloc((size_t)n, sizeof *send), **recv = calloc((size_t)n, sizeof *recv);
    cudaStream_t *streams = calloc((size_t)n, sizeof *streams);
    float *host = malloc(4096 * sizeof *host);
    for (int i = 0; i < 4096; i++)
        host[i] = (float)(i % 13);
    for (int d = 0; d < n; d++) {
        CUDA_OK(cudaSetDevice(d), "selecting a device");
        CUDA_OK(cudaMalloc((void **)&send[d], max_count * 4), "1 GiB send buffer");
        CUDA_OK(cudaMalloc((void **)&recv[d], max_count * 4), "1 GiB receive buffer");
        CUDA_OK(cudaMemcpy(send[d], host, 4096 * sizeof *host, cudaMemcpyHostToDevice), "filling the head");
        CUDA_OK(cudaStreamCreate(&streams[d]), "a stream per device");
    }
    printf("# NCCL %d.%d.%d all-reduce (sum, float, out of place) over %d rank%s\n", version / 10000,
           version / 100 % 100, version % 100, n, n == 1 ? "" : "s");
    printf("%14s %12s %12s %12s\n", "bytes", "time[us]", "algbw[GB/s]", "busbw[GB/s]");
    cudaEvent_t t0, t1;
    CUDA_OK(cudaSetDevice(0), "selecting device 0");
    CUDA_OK(cudaEventCreate(&t0), "an event");
    CUDA_OK(cudaEventCreate(&t1), "an event");
    int ok = 1;
    for (size_t count = 256; count <= max_count; count *= 8) {
        for (int it = -5; it < 20; it++) {
            if (it == 0) CUDA_OK(cudaEventRecord(t0, streams[0]), "recording the start");
            NCCL_OK(ncclGroupStart(), "grouping the ranks' calls");
            for (int d = 0; d < n; d++)
                NCCL_OK(ncclAllReduce(send[d], recv[d], count, ncclFloat, ncclSum, comms[d], streams[d]),
                        "the all-reduce");
            NCCL_OK(ncclGroupEnd(), "grouping the ranks' calls");
        }
        CUDA_OK(cudaSetDevice(0), "selecting device 0");
        CUDA_OK(cudaEventRecord(t1, streams[0]), "recording the end");
        for (int d = 0; d < n; d++) {
            CUDA_OK(cudaSetDevice(d), "selecting a device");
            CUDA_OK(cudaStreamSynchronize(streams[d]), "an all-reduce failed on the device");
        }
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, t0, t1), "reading the timer");
        const double t = ms * 1e-3 / 20, bytes = (double)count * 4, algbw = bytes / t / 1e9;
        printf("%14.0f %12.1f %12.2f %12.2f\n", bytes, t * 1e6, algbw, algbw * 2.0 * (n - 1) / n);
        float got[256];
        CUDA_OK(cudaMemcpy(got, recv[0], sizeof got, cudaMemcpyDeviceToHost), "reading the sums");
        for (int i = 0; i < 256; i++)
            ok &= got[i] == host[i] * (float)n;
    }
    printf("verdict: %s\n", ok ? "sums correct" : "WRONG SUMS");
    for (int d = 0; d < n; d++)
        ncclCommDestroy(comms[d]), cudaFree(send[d]), cudaFree(recv[d]);
    return ok ? 0 : 1;
}
