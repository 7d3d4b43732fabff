#include "rt_reducer.h"

#include <stdlib.h>

int rt_reducer_init(rt_reducer *r, rt_model *m, rt_comm *comm, et_error *err)
{
    *r = (rt_reducer){.m = m, .comm = comm};
    rt_comm_use_backend(comm, m->be);
    r->clip_per_bucket = m->s->optimizer.clip == ET_CLIP_PER_BUCKET;
    r->max_norm = m->s->optimizer.max_grad_norm;
    const size_t nb = (size_t)(m->n_buckets > 0 ? m->n_buckets : 1);
    r->rec = calloc(nb, sizeof *r->rec);
    r->ready = calloc(nb, sizeof *r->ready);
    r->done = calloc(nb, sizeof *r->done);
    int ok = r->rec && r->ready && r->done && (r->step_start = m->be->event_create(m->be));
    for (int k = 0; ok && k < m->n_buckets; k++)
        ok = (r->ready[k] = m->be->event_create(m->be)) && (r->done[k] = m->be->event_create(m->be));
    if (!ok) {
        rt_reducer_free(r);
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of memory for the gradient buckets' records and events");
    }
    return 0;
}

void rt_reducer_free(rt_reducer *r)
{
    rt_backend *be = r->m ? r->m->be : NULL;
    for (int k = 0; be && k < r->m->n_buckets; k++) {
        if (r->ready && r->ready[k]) be->event_destroy(be, r->ready[k]);
        if (r->done && r->done[k]) be->event_destroy(be, r->done[k]);
    }
    if (be && r->step_start) be->event_destroy(be, r->step_start);
    free(r->rec), free(r->ready), free(r->done);
    r->rec = NULL, r->ready = r->done = NULL, r->step_start = NULL;
}

void rt_reducer_begin_step(rt_reducer *r)
{
    r->next = 0;
    r->active = false;
    for (int k = 0; k < r->m->n_buckets; k++)
        r->rec[k] = (rt_bucket_record){0};
    r->m->be->event_record(r->m->be, r->step_start, RT_STREAM_COMPUTE);
}

static void progress(rt_reducer *r)
{
    for (int k = 0; k < r->next; k++)
        if (r->comm->test(r->comm, k) < 0) r->failed = 1;
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
        m->be->event_record(m->be, r->ready[k], RT_STREAM_COMPUTE);
        /* expert gradients: over the ranks holding the same experts (expert parallelism) */
        const int expert = m->ep > 1 && m->buckets[k].expert;
        if (expert ? r->comm->expert_allreduce_start(r->comm, m->grads + first, count, k, r->ready[k],
                                                     r->done[k])
                   : r->comm->allreduce_start(r->comm, m->grads + first, count, k, r->ready[k], r->done[k]))
            r->failed = 1;
    }
    progress(r); /* lets the communicator progress the reductions under the rest of backward */
}

void rt_reducer_end_step(rt_reducer *r)
{
    rt_backend *be = r->m->be;
    for (int k = 0; k < r->next; k++) {
        r->rec[k].start_s = be->event_seconds(be, r->step_start, r->ready[k]);
        r->rec[k].end_s = be->event_seconds(be, r->step_start, r->done[k]);
        if (r->clip_per_bucket)
            rt_model_bucket_norms(r->m, k, r->max_norm, &r->rec[k].norm_before, &r->rec[k].norm_after);
    }
}

int rt_reducer_finish(rt_reducer *r)
{
    if (r->comm->wait_all(r->comm, r->next)) r->failed = 1;
    return r->failed ? -1 : 0;
}
