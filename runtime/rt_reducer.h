/* rt_reducer: data-parallel gradient reduction overlapped with backward. Each bucket (model/buckets.h) is
 * all-reduced through the communicator as soon as backward finalises its last gradient (the model's
 * ready callback, last micro-batch only), after clipping it by its own local norm when the plan clips per
 * bucket; pending reductions are tested under the rest of backward and waited for before the optimizer.
 *
 * Per step it records, for every bucket, when its reduction started and when it was first seen complete
 * (seconds from the step's start, wall clock) and, with per-bucket clipping, the bucket's local norm
 * before and after clipping. Errors: a failed communication call makes rt_reducer_finish() return -1. */
#ifndef ET_RT_REDUCER_H
#define ET_RT_REDUCER_H

#include <stdbool.h>

#include "rt_comm.h"
#include "rt_model.h"

typedef struct rt_bucket_record {
    double start_s, end_s;          /* from the step's start */
    double norm_before, norm_after; /* per-bucket clipping: local norm; else 0 */
} rt_bucket_record;

typedef struct rt_reducer {
    rt_model *m;
    rt_comm *comm;
    bool clip_per_bucket;
    double max_norm;
    int next;    /* next bucket to start */
    bool active; /* only during the last micro-batch */
    int failed;
    double step_t0;
    rt_bucket_record *rec; /* n_buckets, of the current step */
} rt_reducer;

int rt_reducer_init(rt_reducer *r, rt_model *m, rt_comm *comm, et_error *err);
void rt_reducer_free(rt_reducer *r);
void rt_reducer_begin_step(rt_reducer *r, double step_t0);
/* rt_grad_ready_fn for rt_model_step_micro (ctx: the reducer). */
void rt_reducer_on_grad_ready(void *ctx, int op_index);
/* Waits for every started reduction. */
int rt_reducer_finish(rt_reducer *r);
/* After rt_model_end_step: the buckets' norms before and after clipping into the records (per-bucket
 * clipping; else they stay 0). */
void rt_reducer_record_norms(rt_reducer *r);

#endif
