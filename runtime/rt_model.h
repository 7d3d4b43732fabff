/* rt_model: the model etrun trains, walking the cost model's op graph op by op.
 *
 * Parameters live in one flat buffer in the graph's parameter order (the order backward finalises
 * gradients), so every gradient bucket is one contiguous slice and its all-reduce can start as soon as
 * the op that finalises it has run. Each graph op is bound at start-up to a CPU kernel call; an op the
 * runtime cannot execute is an error then, never a silent skip. Sparse weights are dense buffers with a
 * fixed mask: the masked weight is used and only kept weights are updated. fp32 throughout.
 *
 * Tensor-train layers run the cost model's contraction order (rt_tt.h); their input and core gradients come
 * from one reverse contraction, timed under `.bwd_data` (`.bwd_weight` adds the bias gradient).
 *
 * Contract: rt_model_init() fails with *err for unsupported plans (tensor or pipeline parallelism, ZeRO,
 * 16-bit precision, tensor-train embeddings or rank schedules, recomputation, the next-sentence head).
 * Times are per op, in seconds. */
#ifndef ET_RT_MODEL_H
#define ET_RT_MODEL_H

#include "buckets.h"
#include "graph.h"
#include "rt_data.h"
#include "scenario.h"

typedef struct rt_op rt_op;
typedef struct rt_model rt_model;

typedef struct rt_hyper {
    double lr, beta1, beta2, eps, weight_decay;
    int warmup_steps; /* linear learning-rate warm-up over this many updates (0: none) */
} rt_hyper;

/* Called after each backward op of the last micro-batch with the index of the op just run. */
typedef void (*rt_grad_ready_fn)(void *ctx, int op_index);

struct rt_model {
    const et_scenario *s;
    et_graph graph;
    et_bucket *buckets;
    int n_buckets;
    rt_op *ops; /* one per graph op */
    size_t n_params;
    float *params, *grads, *m, *v, *mask; /* mask: NULL when dense */
    size_t *param_offset;                 /* per graph parameter */
    int T_cap, P_cap;                     /* activation capacity: tokens and scored positions */
    float *act;                           /* activations, sized for T_cap tokens */
    double *op_time; /* per op, accumulated over the micro-batches of the current step */
    double loss_sum; /* summed loss of the current step on this rank */
    long long adam_t;
    void *tt_records; /* tensor-train layers: per (layer, role) */
    unsigned long long seed;
};

int rt_model_init(rt_model *m, const et_scenario *s, unsigned long long seed, et_error *err);
void rt_model_free(rt_model *m);

/* Forward and backward of one micro-batch; `norm` divides the loss (global scored positions);
 * `ready` (may be NULL) is told after every backward op. Returns -1 on out of memory. */
int rt_model_step_micro(rt_model *m, const rt_batch *b, double norm, rt_grad_ready_fn ready, void *ctx);
/* Zeroes gradients, loss and op times before a step. */
void rt_model_begin_step(rt_model *m);
/* Squared L2 norm of gradients in [first, first + count) (floats). */
double rt_model_grad_sq(const rt_model *m, size_t first, size_t count);
void rt_model_scale_grads(rt_model *m, size_t first, size_t count, double factor);
/* The optimizer ops of the graph (update with clipping scale applied to the gradients beforehand). */
void rt_model_update(rt_model *m, const rt_hyper *h);
/* Graph op ids, kinds and phases are the cost model's: m->graph.ops[i]. */

#endif
