/* rt_reducer: data-parallel gradient reduction overlapped with backward. Each bucket (model/buckets.h) is
 * all-reduced through the communicator as soon as backward finalises its last gradient (the model's
 * ready callback, last micro-batch only), after clipping it by its own local norm when the plan clips per
 * bucket; pending reductions are tested under the rest of backward, and the optimizer is ordered after
 * them (rt_comm.h's wait_all).
 *
 * Timings come from the backend's events (rt_backend.h), not the host's clock: an event on the compute
 * stream at the step's start and after each bucket's last gradient (and clipping), and the communicator's
 * event at each reduction's completion; rt_reducer_end_step reads them after the step's one read of the
 * device, so the records say when the device reached each point, whatever the host was doing. Per step
 * it records every bucket's start and end (seconds from the step's start) and, with per-bucket clipping,
 * its local norm before and after clipping. Errors: rt_reducer_init fails with *err when out of memory;
 * a failed communication call makes rt_reducer_finish() return -1. */
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
    rt_event *step_start;     /* compute stream, at rt_reducer_begin_step */
    rt_event **ready, **done; /* n_buckets each */
    rt_bucket_record *rec;    /* n_buckets, of the current step */
} rt_reducer;

/* The reducer of m's buckets over comm; comm takes m's backend (rt_comm_use_backend). */
int rt_reducer_init(rt_reducer *r, rt_model *m, rt_comm *comm, et_error *err);
void rt_reducer_free(rt_reducer *r);
void rt_reducer_begin_step(rt_reducer *r);
/* rt_grad_ready_fn for rt_model_step_micro (ctx: the reducer). */
void rt_reducer_on_grad_ready(void *ctx, int op_index);
/* Orders the optimizer after every started reduction. */
int rt_reducer_finish(rt_reducer *r);
/* After rt_model_end_step: the buckets' times from their events, and their norms before and after
 * clipping (per-bucket clipping; else they stay 0), into the records. */
void rt_reducer_end_step(rt_reducer *r);

#endif
