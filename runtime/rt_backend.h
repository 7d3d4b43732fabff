/* rt_backend: the one table of buffer, kernel, optimizer and timing operations that etrun's model walk
 * calls (ggml's backend habit). The walk (rt_model.c and the executors rt_exec_*.c) never touches device
 * memory itself and never knows which backend runs it; a new backend fills one rt_backend and says, per
 * kernel family, what it supports.
 *
 * Memory: every float and int pointer passed to a kernel is device memory obtained from `alloc` (for the
 * CPU backend that is host memory). Host data goes in through `upload`, which does not wait for the device:
 * an ordinary host source may be reused when it returns, one from `alloc_host` (page-locked on a GPU, read
 * by the device later) only after the device has read it; data comes back through `download` (which
 * waits).
 * Shapes and layouts are rt_kernels.h's (shape letters as in model/graph.h: T tokens, H hidden, F ffn,
 * A heads, V vocabulary, P scored positions); row-major throughout. A kernel whose contract says "+="
 * accumulates.
 *
 * Batches: rt_dev_batch carries the micro-batch's index arrays on the device plus the sequence offsets on
 * the host (attention loops over sequences), so a backend may launch per-sequence products from the host.
 *
 * Scalars: reductions (a loss, squared norms) are added into device doubles the caller allocated, and the
 * decisions that need them (clipping, fp16's skipped steps, LAMB's trust ratios) are taken on the device
 * from them (clip_gate, clip_scale, lamb_apply), so nothing in a step waits for the device: etrun reads its
 * scalars back once a step (`download`). Every call may run asynchronously on the backend's stream;
 * `download`, `sync` and `op_timers_collect` wait for it, and count themselves in `host_waits`.
 *
 * Streams and events: every kernel, copy and op timer runs on the compute stream, in call order; the
 * communication stream is the communicator's (rt_comm.h: NCCL's collectives run there, beside backward).
 * An event marks the point a stream has reached when it is recorded (event_record); stream_wait makes the
 * later work of a stream start after that point, without the host waiting; event_done asks without waiting;
 * event_sync waits (and counts in host_waits); event_seconds is the time between two events both complete.
 * On the CPU every call has finished when it returns: an event holds the wall clock at its record, and
 * waits return at once.
 *
 * Timing: op_timers_init sizes the timers for a graph of n_ops ops (the model calls it at start-up);
 * op_timer_begin/op_timer_end bracket graph op i; op_timers_collect adds every bracketed op's
 * seconds since the last collect into op_time[i] (events on a GPU, the wall clock on the CPU).
 *
 * Support: `supports` answers per kernel family (rt_kernel_family); the model refuses at start-up any
 * op whose executor needs a family the backend lacks, naming the op and the family, never skipping it.
 *
 * Errors: `alloc` returns NULL when out of memory; creation functions fill *err. Ownership: the caller owns
 * the backend and releases it with destroy(). */
#ifndef ET_RT_BACKEND_H
#define ET_RT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "device_profile.h"
#include "et_error.h"
#include "rt_attn.h"
#include "rt_tt.h"

typedef enum {
    RT_FAMILY_BUFFERS,       /* alloc, free, upload, download, fill, copy, copy_2d, add_2d */
    RT_FAMILY_LINEAR,        /* linear_fwd, linear_bwd */
    RT_FAMILY_LAYERNORM,     /* layernorm_fwd, add_layernorm_fwd, layernorm_bwd */
    RT_FAMILY_GELU,          /* gelu_fwd, gelu_bwd */
    RT_FAMILY_ATTENTION,     /* the six attention kernels, variable length, causal or not */
    RT_FAMILY_EMBEDDING,     /* embedding_fwd, embedding_bwd */
    RT_FAMILY_CROSS_ENTROPY, /* cross_entropy */
    RT_FAMILY_GLUE,          /* add, axpy, *_rows, mask_mul, scale, sum_sq, bias, clip_* */
    RT_FAMILY_TENSOR_TRAIN,  /* tt_fwd, tt_bwd */
    RT_FAMILY_ADAM,          /* adam_update (Adam and AdamW) */
    RT_FAMILY_LAMB,          /* lamb_update, lamb_apply */
    RT_FAMILY_RMSNORM,       /* rmsnorm_fwd, rmsnorm_bwd */
    RT_FAMILY_ROPE,          /* rope */
    RT_FAMILY_SWIGLU,        /* swiglu_fwd, swiglu_bwd */
    RT_FAMILY_MOE,           /* moe_route_fwd/bwd, moe_group, moe_combine_fwd/bwd */
    RT_FAMILY_FLASH,         /* attn_flash_fwd, attn_flash_bwd: fused attention, no probabilities kept */
    RT_FAMILY_COUNT
} rt_kernel_family;
extern const char *const rt_kernel_family_names[]; /* "buffers", "linear", ... */

typedef struct rt_dev_batch {
    int B, T, P;
    const int *offsets_host;                                         /* B + 1 sequence offsets on the host */
    int *tokens, *positions, *types, *offsets, *pred_rows, *targets; /* device; types all 0 */
    /* multi-token prediction (NULL without): depth j's tokens (row i: the token j + 1 ahead in its sequence,
     * 0 past its end) and targets (the token j + 2 ahead, -1 past the end) at + j T, on the device */
    int *mtp_tokens, *mtp_targets;
} rt_dev_batch;

/* One optimizer update: moments m, v and bias corrections c1 = 1 - beta1^t, c2 = 1 - beta2^t. */
typedef struct rt_adam_args {
    float lr, beta1, beta2, eps, weight_decay;
    float c1, c2;
    bool decoupled_decay; /* AdamW: u += weight_decay * w; Adam: no decay */
    float grad_scale;     /* every gradient times this before use (global clipping, fused): 1 for none */
} rt_adam_args;
/* A typical AdamW step's arguments (decay 0.01, bias corrections of an early step), for benchmarks of
 * adam_update (etcalib bench, bench/runtime_bench) */
extern const rt_adam_args rt_adam_bench_args;

/* The arithmetic of the matrix products: fp32 (every backend), tf32 (fp32 inputs rounded to 10-bit mantissas
 * by the tensor cores), bf16 and fp16 (inputs rounded to 16 bits, as PyTorch's autocast does; fp32
 * accumulation and fp32 outputs). Activations, master weights and optimizer states stay fp32 in every mode.
 */
typedef enum { RT_GEMM_FP32, RT_GEMM_TF32, RT_GEMM_BF16, RT_GEMM_FP16, RT_GEMM_MATH_COUNT } rt_gemm_math;
extern const char *const rt_gemm_math_names[]; /* "fp32", "tf32", "bf16", "fp16" */
/* The products' arithmetic of a plan's precision; RT_GEMM_MATH_COUNT for one no backend runs (fp8). */
rt_gemm_math rt_gemm_math_for(et_precision p);

/* A flat buffer cut into tensors, for passes that keep per-tensor sums (LAMB's norms) in one launch: chunk c
 * covers values [first[c], first[c] + len[c]) of the buffer, of tensor `tensor[c]`; chunks in order, none
 * longer than RT_CHUNK_VALUES, so a GPU takes a chunk a block. The arrays are device memory, n on the host;
 * rt_chunks_build (rt_chunks.c) makes them. */
#define RT_CHUNK_VALUES 16384
typedef struct rt_chunks {
    int n;
    const int *tensor, *len;
    const size_t *first;
} rt_chunks;

/* The backend's two streams (see the contract above) and its events, opaque: each backend makes its own. */
typedef enum { RT_STREAM_COMPUTE, RT_STREAM_COMM, RT_STREAM_COUNT } rt_stream;
typedef struct rt_event rt_event;

typedef struct rt_backend rt_backend;
/* Chunks of tensors of sizes[0 .. n_tensors) values laid end to end, on be's device (rt_chunks.c); -1 when
 * out of memory. rt_chunks_free releases them. */
int rt_chunks_build(rt_backend *be, const size_t *sizes, int n_tensors, rt_chunks *out);
void rt_chunks_free(rt_backend *be, rt_chunks *ch);

struct rt_backend {
    const char *name; /* "cpu", "cuda" */
    void *ctx;        /* the backend's own state */

    bool (*supports)(const rt_backend *be, rt_kernel_family family);
    /* the products' arithmetic from now on; -1 when the backend lacks it (the CPU backend: fp32 only) */
    int (*set_gemm_math)(rt_backend *be, rt_gemm_math math);
    /* one line of provenance: the library and device that run the kernels ("OpenBLAS Haswell, 2
     * threads", "NVIDIA H200 (sm_90, 132 SMs), CUDA 13.0, cuBLASLt 130000") */
    void (*describe)(const rt_backend *be, char *buf, size_t size);

    /* ---- buffers ---- */
    void *(*alloc)(rt_backend *be, size_t bytes); /* zero-filled; NULL when out of memory */
    void (*free)(rt_backend *be, void *p);
    /* host memory an upload reads without the runtime staging it (page-locked on a GPU), zero-filled; NULL
     * when out of memory. The caller must not write it again before the device has read it. */
    void *(*alloc_host)(rt_backend *be, size_t bytes);
    void (*free_host)(rt_backend *be, void *p);
    void (*upload)(rt_backend *be, void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(rt_backend *be, void *dst_host, const void *src_dev, size_t bytes);
    void (*fill)(rt_backend *be, float *x, float value, size_t n);
    void (*copy)(rt_backend *be, float *dst, const float *src, size_t n);
    /* dst[r * ld_dst + c] = src[r * ld_src + c] for r < rows, c < cols */
    void (*copy_2d)(rt_backend *be, float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols);
    /* dst[r * ld_dst + c] += src[r * ld_src + c] for r < rows, c < cols */
    void (*add_2d)(rt_backend *be, float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols);

    /* ---- the parameters' 16-bit shadow (bf16 and fp16 products) ---- */
    /* base16[i] = base[i] in the products' 16-bit type (rt_elementwise.h's rt_bf16_bits or rt_fp16_bits)
     * for i < n; base16 holds 2 n bytes */
    void (*round16)(rt_backend *be, void *base16, const float *base, size_t n);
    /* from now on a linear layer's weight inside base[0, n) is read from base16 at the same offset instead
     * of being rounded at each call (base NULL: none); the caller refreshes base16 whenever base changes */
    void (*shadow16)(rt_backend *be, const float *base, const void *base16, size_t n);

    /* ---- kernels (rt_kernels.h contracts) ---- */
    void (*linear_fwd)(rt_backend *be, const float *x, const float *W, const float *b, float *y, int T,
                       int n_in, int n_out);
    void (*linear_bwd)(rt_backend *be, const float *x, const float *W, const float *dy, float *dx, float *dW,
                       float *db, int T, int n_in, int n_out);
    void (*layernorm_fwd)(rt_backend *be, const float *x, const float *g, const float *b, float *y,
                          float *mean, float *rstd, int T, int n);
    void (*add_layernorm_fwd)(rt_backend *be, const float *x, const float *r, float *sum, const float *g,
                              const float *b, float *y, float *mean, float *rstd, int T, int n);
    void (*layernorm_bwd)(rt_backend *be, const float *x, const float *g, const float *mean,
                          const float *rstd, const float *dy, float *dx, float *dg, float *db, int T, int n);
    void (*gelu_fwd)(rt_backend *be, const float *x, float *y, size_t n);
    void (*gelu_bwd)(rt_backend *be, const float *x, const float *dy, float *dx, size_t n);
    /* attention of shape sh (rt_attn.h) in the six kernels of rt_kernels.h; sinks[A] and dsinks[A] (device,
     * NULL: none) */
    void (*attn_scores_fwd)(rt_backend *be, const float *qkv, float *probs, const rt_dev_batch *b,
                            const rt_attn_shape *sh);
    void (*attn_softmax_fwd)(rt_backend *be, float *probs, const float *sinks, const rt_dev_batch *b,
                             const rt_attn_shape *sh, bool causal);
    void (*attn_context_fwd)(rt_backend *be, const float *qkv, const float *probs, float *ctx,
                             const rt_dev_batch *b, const rt_attn_shape *sh);
    void (*attn_context_bwd)(rt_backend *be, const float *qkv, const float *probs, const float *dctx,
                             float *dqkv, float *dprobs, const rt_dev_batch *b, const rt_attn_shape *sh);
    void (*attn_softmax_bwd)(rt_backend *be, const float *probs, float *dprobs, float *dsinks,
                             const rt_dev_batch *b, const rt_attn_shape *sh);
    void (*attn_scores_bwd)(rt_backend *be, const float *qkv, const float *dscores, float *dqkv,
                            const rt_dev_batch *b, const rt_attn_shape *sh);
    /* fused attention of shape sh (rt_flash.h's math): ctx[T, A Dv] from qkv without keeping the
     * probabilities; lse[T A] (row t, head h at t A + h) each row's log-sum-exp for the backward; sinks[A]
     * (device, NULL: none); causal as the softmax */
    void (*attn_flash_fwd)(rt_backend *be, const float *qkv, const float *sinks, float *ctx, float *lse,
                           const rt_dev_batch *b, const rt_attn_shape *sh, bool causal);
    /* its backward: dqkv[T, ld] the gradient wrt qkv (overwritten, every row of the batch), dsinks[A] +=
     * (NULL: none), from the forward's ctx and lse and the context's gradient dctx; delta[T A] scratch */
    void (*attn_flash_bwd)(rt_backend *be, const float *qkv, const float *sinks, const float *ctx,
                           const float *lse, const float *dctx, float *dqkv, float *dsinks, float *delta,
                           const rt_dev_batch *b, const rt_attn_shape *sh, bool causal);
    void (*rmsnorm_fwd)(rt_backend *be, const float *x, const float *g, float *y, float *rstd, int T, int n);
    void (*rmsnorm_bwd)(rt_backend *be, const float *x, const float *g, const float *rstd, const float *dy,
                        float *dx, float *dg, int T, int n);
    /* rotary positions (rt_kernels.h's rt_rope) on `heads` runs of R values in each of the batch's T rows of
     * x (row stride ld, run h at h * stride), by the batch's positions; inverse: backward */
    void (*rope)(rt_backend *be, float *x, const rt_dev_batch *b, int ld, int heads, int stride, int R,
                 double base, bool inverse);
    void (*swiglu_fwd)(rt_backend *be, const float *u, float *y, int T, int F);
    void (*swiglu_bwd)(rt_backend *be, const float *u, const float *dy, float *du, int T, int F);
    /* mixture of experts (rt_kernels.h): top-k routing of logits[T, E] and the weighted combine */
    void (*moe_route_fwd)(rt_backend *be, const float *logits, int *idx, float *w, int T, int E, int k);
    void (*moe_route_bwd)(rt_backend *be, const int *idx, const float *w, const float *dw, float *dlogits,
                          int T, int E, int k);
    /* the routed rows in expert order on the device (rt_kernels.h's rt_moe_group: idx[R], order[R], pos[R],
     * counts[E], all device ints) */
    void (*moe_group)(rt_backend *be, const int *idx, int R, int E, int k, int *order, int *pos, int *counts);
    void (*moe_combine_fwd)(rt_backend *be, const float *Y, const int *pos, const float *w, float *out, int T,
                            int k, int H);
    void (*moe_combine_bwd)(rt_backend *be, const float *Y, const int *pos, const float *w, const float *dout,
                            float *dY, float *dw, int T, int k, int H);
    /* out[T, H] = word[tokens] + pos[positions] (when pos is not NULL) (+ type[types] when type is not
     * NULL) */
    void (*embedding_fwd)(rt_backend *be, const rt_dev_batch *b, const float *word, const float *pos,
                          const float *type, float *out, int H);
    void (*embedding_bwd)(rt_backend *be, const rt_dev_batch *b, const float *dout, float *dword, float *dpos,
                          float *dtype, int H);
    /* the summed loss over b->P rows of logits[P, V] added into *loss (a device double); dlogits =
     * (softmax - onehot) / norm */
    void (*cross_entropy)(rt_backend *be, const float *logits, const rt_dev_batch *b, float *dlogits, int V,
                          double norm, double *loss);

    /* ---- glue ---- */
    void (*add)(rt_backend *be, float *out, const float *x, const float *y, size_t n); /* out = x + y */
    void (*axpy)(rt_backend *be, float *y, const float *x, float a, size_t n);         /* y += a x */
    /* dst[p, :] = src[rows[p], :] for p < n_rows (width values a row); rows on the device */
    void (*gather_rows)(rt_backend *be, float *dst, const float *src, const int *rows, int n_rows, int width);
    /* dst[rows[p], :] += src[p, :] */
    void (*scatter_add_rows)(rt_backend *be, float *dst, const float *src, const int *rows, int n_rows,
                             int width);
    void (*mask_mul)(rt_backend *be, float *x, const float *mask, size_t n); /* x *= mask */
    void (*scale)(rt_backend *be, float *x, float factor, size_t n);
    void (*sum_sq)(rt_backend *be, const float *x, size_t n, double *acc); /* *acc (device) += sum x^2 */
    /* a slice clipped by its own norm, norm = sqrt(*sq) / scale (fp16's loss scale divided out): x *=
     * rt_clip_factor(norm, max_norm) (rt_elementwise.h), and *sq_after (device) += the sum of squares x is
     * left with */
    void (*clip_scale)(rt_backend *be, float *x, size_t n, const double *sq, double max_norm, double scale,
                       double *sq_after);
    /* the optimizer's gate (rt_elementwise.h's rt_clip_gate) from the gradients' squared norm *sq and the
     * loss *loss (device; either NULL: not looked at) into gate[2] (device): the factor every gradient is
     * multiplied by in the update, and 1 when the update is skipped (max_norm < 0: no clipping) */
    void (*clip_gate)(rt_backend *be, const double *sq, const double *loss, double max_norm, double scale,
                      float *gate);
    /* y[r * ld + c] += b[c] for r < rows, c < cols */
    void (*add_bias)(rt_backend *be, float *y, int ld, const float *b, int rows, int cols);
    /* db[c] += sum_r dy[r * ld + c] */
    void (*bias_grad)(rt_backend *be, float *db, const float *dy, int ld, int rows, int cols);

    /* ---- tensor-train layers (rt_tt.h contracts; cores and workspace on the device) ---- */
    void (*tt_fwd)(rt_backend *be, const rt_tt_layer *l, const float *X, const float *cores, float *Y,
                   float *work, int T);
    void (*tt_bwd)(rt_backend *be, const rt_tt_layer *l, const float *X, const float *cores, const float *dY,
                   float *dX, float *dcores, float *work, int T);

    /* ---- optimizer, fused over a contiguous slice of n values (mask may be NULL: dense) ---- */
    /* Each takes the gate clip_gate wrote (device; NULL: none): nothing is written when gate[1] is not 0,
     * and the gradients are multiplied by gate[0] (after a->grad_scale). */
    /* m, v updated; w -= lr * (m/c1) / (sqrt(v/c2) + eps) (+ decoupled decay), masked */
    void (*adam_update)(rt_backend *be, float *w, const float *g, float *m, float *v, const float *mask,
                        size_t n, const rt_adam_args *a, const float *gate);
    /* LAMB over every tensor of the chunks ch, two launches a step whatever the tensors. First half: m, v
     * updated; u (written over g) = Adam direction + decay, masked; tensor t's sum(w^2) and sum(u^2) added
     * into sq[2t] and sq[2t + 1] (device) for its trust ratio. Pointers are the whole flat buffers. */
    void (*lamb_update)(rt_backend *be, const float *w, float *g, float *m, float *v, const float *mask,
                        const rt_chunks *ch, const rt_adam_args *a, const float *gate, double *sq);
    /* Second half: each tensor's w -= rt_lamb_rate(sq[2t], sq[2t + 1], lr) u (its trust ratio from the
     * first half's sums) */
    void (*lamb_apply)(rt_backend *be, float *w, const float *u, const rt_chunks *ch, const double *sq,
                       float lr, const float *gate);

    /* ---- streams and events ---- */
    rt_event *(*event_create)(rt_backend *be); /* NULL when out of memory, or after a device error */
    void (*event_destroy)(rt_backend *be, rt_event *e);
    void (*event_record)(rt_backend *be, rt_event *e, rt_stream s);
    void (*stream_wait)(rt_backend *be, rt_stream s, rt_event *e); /* s's later work after e */
    bool (*event_done)(rt_backend *be, rt_event *e); /* its stream has reached it (or it was never
                                                        recorded); no wait */
    void (*event_sync)(rt_backend *be, rt_event *e); /* the host waits for e */
    /* seconds from `from` to `to`, both recorded and complete (after a sync or download), else 0 */
    double (*event_seconds)(rt_backend *be, rt_event *from, rt_event *to);

    /* ---- timing and synchronisation ---- */
    int (*op_timers_init)(rt_backend *be, int n_ops); /* -1: out of memory */
    void (*op_timer_begin)(rt_backend *be, int op);
    void (*op_timer_end)(rt_backend *be, int op);
    void (*op_timers_collect)(rt_backend *be, double *op_time, int n_ops);
    void (*sync)(rt_backend *be);
    /* the first device error ("file:line: call: what (hint)"), NULL while there is none; after one, every
     * call returns at once and the caller stops (the CPU backend has none) */
    const char *(*failure)(const rt_backend *be);

    void (*destroy)(rt_backend *be);

    long long host_waits; /* calls so far that waited for the device (download, sync, event_sync,
                             op_timers_collect) */
};

/* The CPU backend: OpenBLAS GEMMs, vectorised float element-wise kernels, host memory, wall-clock timing.
 * Returns NULL and fills *err when out of memory. */
rt_backend *rt_backend_cpu_create(et_error *err);

/* The BLAS kernels OpenBLAS chose on this machine ("SkylakeX", "Haswell", "Prescott", ...), and, when they
 * are older than the CPU's vector units and OPENBLAS_CORETYPE is not set (OpenBLAS falls back to Prescott
 * on CPU models it does not know, as virtual machines report), a hint naming the setting that would use
 * them; hint is "" otherwise. */
const char *rt_cpu_blas_core(void);
int rt_cpu_blas_threads(void);
void rt_cpu_blas_hint(char *hint, size_t size);
/* Where rt_cpu_blas_hint would advise a setting and neither OPENBLAS_CORETYPE nor ET_BLAS_AS_DETECTED is set,
 * restarts the program with it: OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so the process
 * executes itself again (/proc/self/exe, the same argv), with ET_BLAS_SELECTED naming the kernels OpenBLAS
 * had chosen. Call first in main, before MPI_Init. Returns when there is nothing to do or the restart
 * failed (the hint then still applies). */
void rt_cpu_blas_select(char **argv);
/* After rt_cpu_blas_select restarted the program: the kernels OpenBLAS had chosen ("Prescott"), else NULL. */
const char *rt_cpu_blas_selected_from(void);

/* The CUDA backend (runtime/cuda/, where the build found nvcc): device `ordinal`'s memory, one compute and
 * one communication stream, cuBLASLt products, CUDA-event op timers. NULL with *err when there is no usable
 * device (the message names why: no driver, no device, an ordinal past the count) or memory runs out. */
rt_backend *rt_backend_cuda_create(int ordinal, et_error *err);

/* The backends this build has, in order ("cpu", then "cuda" where built), NULL-terminated. */
extern const char *const rt_backend_names[];
/* The backend named `name` ("cpu"; "cuda" where etrun was built with CUDA; "auto": CUDA where built and a
 * device answers, else the CPU), or NULL with *err naming the backends this build has, or why the one
 * named cannot start. */
rt_backend *rt_backend_create(const char *name, et_error *err);
/* The same for the rank `local_rank` of its host (rt_comm.h): a GPU backend takes device local_rank modulo
 * the host's devices, so the ranks of a node spread over its GPUs. */
rt_backend *rt_backend_create_local(const char *name, int local_rank, et_error *err);
/* The CUDA devices the driver reports (0 without a driver, or in a build without CUDA). */
int rt_cuda_device_count(void);

#endif
