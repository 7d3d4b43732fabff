#include "rt_reducer.h"

#include <stdlib.h>

#include "wall_clock.h"

int rt_reducer_init(rt_reducer *r, rt_model *m, rt_comm *comm, et_error *err)
{
    *r = (rt_reducer){.m = m, .comm = comm};
    r->clip_per_bucket = m->s->optimizer.clip == ET_CLIP_PER_BUCKET;
    r->max_norm = m->s->optimizer.max_grad_norm;
    r->rec = calloc((size_t)(m->n_buckets > 0 ? m->n_buckets : 1), sizeof *r->rec);
    if (!r->rec) return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
    return 0;
}

void rt_reducer_free(rt_reducer *r)
{
    free(r->rec);
    r->rec = NULL;
}

void rt_reducer_begin_step(rt_reducer *r, double step_t0)
{
    r->next = 0;
    r->active = false;
    r->step_t0 = step_t0;
    for (int k = 0; k < r->m->n_buckets; k++)
        r->rec[k] = (rt_bucket_record){0};
}

static void note_completed(rt_reducer *r)
{
    for (int k = 0; k < r->next; k++) {
        if (r->rec[k].end_s > 0) continue;
        int done = r->comm->test(r->comm, k);
        if (done < 0) r->failed = 1;
        if (done > 0) r->rec[k].end_s = et_wall_seconds() - r->step_t0;
    }
}

void rt_reducer_on_grad_ready(void *ctx, int op_index)
{
    rt_reducer *r = ctx;
    if (!r->active) return;
    rt_model *m = r->m;
    while (r->next < m->n_buckets && m->buckets[r->next].ready_op == op_index) {
        int k = r->next++;
        size_t first, count;
        rt_model_bucket_slice(m, k, &first, &count);
        /* clip this bucket by its own local norm before it is reduced: no wait for the last bucket, nor
         * for the host (the norms, measured again after clipping, are read at the step's end) */
        if (r->clip_per_bucket) rt_model_clip_bucket(m, k, r->max_norm);
        r->rec[k].start_s = et_wall_seconds() - r->step_t0;
        /* expert gradients: over the ranks holding the same experts (expert parallelism) */
        const int expert = m->ep > 1 && m->buckets[k].expert;
        if (expert ? r->comm->expert_allreduce_start(r->comm, m->grads + first, count, k)
                   : r->comm->allreduce_start(r->comm, m->grads + first, count, k))
            r->failed = 1;
    }
    note_completed(r); /* lets the communicator progress the reductions under the rest of backward */
}

void rt_reducer_record_norms(rt_reducer *r)
{
    for (int k = 0; r->clip_per_bucket && k < r->next; k++)
        rt_model_bucket_norms(r->m, k, r->max_norm, &r->rec[k].norm_before, &r->rec[k].norm_after);
}

int rt_reducer_finish(rt_reducer *r)
{
    if (r->comm->wait_all(r->comm, r->next)) r->failed = 1;
    const double now = et_wall_seconds() - r->step_t0;
    for (int k = 0; k < r->next; k++)
        if (r->rec[k].end_s <= 0) r->rec[k].end_s = now;
    return r->failed ? -1 : 0;
}
