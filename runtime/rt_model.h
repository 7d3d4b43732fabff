/* rt_model: the model etrun trains, walking the cost model's op graph op by op on one backend.
 *
 * Parameters live in one flat device buffer in the graph's parameter order (the order backward finalises
 * gradients), so every gradient bucket is one contiguous slice and its all-reduce can start as soon as
 * the op that finalises it has run. Each graph op is bound at start-up to an executor (rt_exec.h) that
 * calls the backend (rt_backend.h) only; an op the runtime or the backend cannot execute is an error then,
 * never a silent skip. Sparse weights are dense buffers with a fixed mask: the masked weight is used and
 * only kept weights are updated. fp32 throughout.
 *
 * Tensor-train layers run the cost model's contraction order (rt_tt.h); their input and core gradients come
 * from one reverse contraction, timed under `.bwd_data` (`.bwd_weight` adds the bias gradient).
 *
 * Contract: rt_model_init() fails with *err for unsupported plans (tensor or pipeline parallelism, ZeRO,
 * a precision the backend's products lack, tensor-train embeddings or rank schedules, recomputation, the
 * next-sentence head, shared experts, multi-token prediction, query and key norms; latent attention,
 * windows and sinks outside decoders) and for ops the backend cannot run. The model does not own the backend.
 * Times are per op, in seconds. */
#ifndef ET_RT_MODEL_H
#define ET_RT_MODEL_H

#include "buckets.h"
#include "graph.h"
#include "plan.h"
#include "rt_backend.h"
#include "rt_comm.h"
#include "rt_data.h"
#include "scenario.h"

typedef struct rt_op rt_op;               /* rt_exec.h */
typedef struct rt_acts rt_acts;           /* rt_exec.h */
typedef struct rt_tt_record rt_tt_record; /* rt_exec.h */
typedef struct rt_model rt_model;

/* Called after each backward op of the last micro-batch with the index of the op just run. */
typedef void (*rt_grad_ready_fn)(void *ctx, int op_index);

struct rt_model {
    const et_scenario *s;
    rt_backend *be; /* not owned */
    et_graph graph;
    et_bucket *buckets;
    int n_buckets;
    rt_op *ops;      /* one per graph op */
    size_t n_params; /* floats of the flat buffers: each tensor's slice starts 32-byte aligned
                        (RT_ALIGN_FLOATS), zeros between them that no gradient or update changes */
    size_t n_values; /* the model's parameters (the graph's), without that padding */
    float *params, *grads, *m, *v, *mask; /* device; mask NULL when dense */
    /* bf16 and fp16 products: the parameters in the products' 16-bit type (n_params of them, device), the
     * backend's shadow of `params` (rt_backend.h's shadow16), rounded again after every change; else NULL */
    void *params16;
    size_t *param_offset; /* per graph parameter, in floats */
    /* LoRA: the model's own parameters, frozen (not in `graph`'s: its are the adapters), as the graph of
     * the same model without the method lists them; their values, and each one's offset in floats */
    et_graph frozen_graph;
    float *frozen;
    size_t *frozen_offset, n_frozen;
    int T_cap, P_cap;         /* activation capacity: tokens and scored positions */
    rt_acts *acts;            /* activations and gradients, sized for T_cap tokens */
    rt_dev_batch batch;       /* the current micro-batch on the device */
    int *batch_ints;          /* its device arrays, one allocation */
    int **staging, n_staging; /* host copies of them, one a micro-batch of the step (rt_model.c) */
    int micro;                /* micro-batches so far in the step */
    /* The step's scalars on the device, added into by the kernels and read back once, by
     * rt_model_end_step: n_scalars doubles (slots RT_SC_*; bucket k's squared norms before and after its
     * clipping at RT_SC_BUCKETS + 2k; LAMB's sums for graph parameter i after the buckets' at
     * RT_SC_BUCKETS + 2 n_buckets + 2i), then the optimizer's gate (two floats: the gradients' factor, and
     * 1 when the update is skipped) in one more double. scalars_host is their copy. */
    double *scalars, *scalars_host;
    float *gate;
    int n_scalars;
    rt_chunks chunks; /* LAMB: the parameters' tensors in chunks (rt_backend.h), else empty */
    /* after rt_model_end_step, the step's: */
    double *op_time;       /* per op, summed over the micro-batches */
    double loss_sum;       /* summed loss on this rank (the main head's) */
    double mtp_loss_sum;   /* the prediction modules' summed losses (their gradients scaled by
                              model.mtp_loss_scale / depth) */
    int *mtp_host;         /* host scratch of their tokens and targets (2 depth T ints) */
    double last_grad_norm; /* global gradient norm before clipping where the update took it (clip after
                              all-reduce, or fp16's overflow check), else 0 */
    bool norm_taken, updated;
    long long adam_t;
    /* fp16's dynamic loss scale (rt_model_set_loss_scale; 1: none): the loss's gradient is scaled by it,
     * an update with a non-finite gradient is skipped and halves it, 2000 good ones double it;
     * step_loss_scale is the one the current step runs with */
    double loss_scale, step_loss_scale;
    int good_steps;
    long long skipped_steps;
    rt_tt_record *tt_records; /* tensor-train layers: per (layer, role) */
    unsigned long long seed;
    /* expert parallelism (parallelism.expert x > 1): the communicator of the experts' all-to-alls, and
     * which x-th of every MoE layer's experts this rank holds */
    rt_comm *comm;
    int ep, ep_index;
    int comm_failed; /* an all-to-all failed (MPI's default handler aborts first) */
};

int rt_model_init(rt_model *m, const et_scenario *s, rt_backend *be, unsigned long long seed, et_error *err);
/* The same with the communicator expert parallelism needs (its expert groups are set here; NULL: none,
 * and a plan with expert parallelism is refused). */
int rt_model_init_comm(rt_model *m, const et_scenario *s, rt_backend *be, unsigned long long seed,
                       rt_comm *comm, et_error *err);
void rt_model_free(rt_model *m);

/* Tensors in the flat buffers start at multiples of 8 floats (32 bytes; 16 in the 16-bit copy): what vector
 * loads and cuBLASLt's fastest kernels need of a weight handed to them in place. */
#define RT_ALIGN_FLOATS 8
static inline size_t rt_aligned_floats(size_t n)
{
    return (n + RT_ALIGN_FLOATS - 1) / RT_ALIGN_FLOATS * RT_ALIGN_FLOATS;
}

/* Slots of the step's device scalars (rt_model.scalars). */
enum { RT_SC_LOSS, RT_SC_MTP_LOSS, RT_SC_GRAD_SQ, RT_SC_BUCKETS };
/* GradScaler's growth interval: 2000 finite steps in a row double fp16's loss scale (torch.amp) */
#define RT_LOSS_SCALE_GROWTH_INTERVAL 2000

/* A step: rt_model_begin_step, rt_model_step_micro per micro-batch, rt_model_update, rt_model_end_step.
 * Nothing before rt_model_end_step waits for the device (see rt_backend.h: host_waits); it reads the
 * step's scalars and op timers back, once. */
/* Zeroes gradients, the step's scalars and op times before a step. */
void rt_model_begin_step(rt_model *m);
/* Forward and backward of one micro-batch; `norm` divides the loss (global scored positions);
 * `ready` (may be NULL) is told after every backward op. Returns -1 when the batch exceeds capacity. */
int rt_model_step_micro(rt_model *m, const rt_batch *b, double norm, rt_grad_ready_fn ready, void *ctx);
/* The gradient slice of bucket k, in floats from the start of the flat buffer. */
void rt_model_bucket_slice(const rt_model *m, int k, size_t *first, size_t *count);
/* Bucket k clipped by its own norm on the device (its squared norm before and after in its slots). */
void rt_model_clip_bucket(rt_model *m, int k, double max_norm);
/* The optimizer ops of the graph, each timed under its id: the gradients' global norm where it is needed
 * (clip after all-reduce, the gradients being the reduced ones; fp16's overflow check) and the gate
 * (clipping's factor, and the skip of a non-finite step: rt_elementwise.h's rt_clip_gate), then Adam/AdamW
 * (one fused pass) or LAMB (update, trust ratio, apply), all on the device. */
void rt_model_update(rt_model *m, const et_hyper *h);
/* Reads the step's scalars (loss_sum, mtp_loss_sum, last_grad_norm) and op times back, and keeps fp16's
 * loss scale. Returns 1 when the update was skipped (a non-finite gradient norm or loss: under fp16's
 * loss scale an overflow, which halves it; otherwise a diverged step), else 0. */
int rt_model_end_step(rt_model *m);
/* A slot of the step's device scalars (RT_SC_*). */
double *rt_model_scalar(const rt_model *m, int slot);
/* After rt_model_end_step: bucket k's norm before its clipping and after (the same where it was not
 * clipped), fp16's loss scale divided out. */
void rt_model_bucket_norms(const rt_model *m, int k, double max_norm, double *before, double *after);
/* Dynamic loss scaling from `initial` (fp16 plans; 1 turns it off), as PyTorch's GradScaler: halve on a
 * non-finite gradient and skip the update, double after 2000 finite ones in a row. */
void rt_model_set_loss_scale(rt_model *m, double initial);
/* The parameters' 16-bit copy rounded from them again (bf16 and fp16 products; else nothing): after the
 * update and whenever the parameters change. */
void rt_model_refresh16(rt_model *m);
/* Host copies of the training state (any pointer may be NULL): n_params floats each. */
void rt_model_get_state(const rt_model *m, float *params, float *m1, float *v, float *grads);
void rt_model_set_state(rt_model *m, const float *params, const float *m1, const float *v);
/* Graph op ids, kinds and phases are the cost model's: m->graph.ops[i]. */

#endif
