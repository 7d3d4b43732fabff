/* The optimizer ops of the graph on the model's backend, each bracketed by its op timer: the global norm
 * and the gate (clipping's factor, fp16's overflow check, a non-finite loss), then Adam/AdamW in one fused
 * pass over the flat buffer, or LAMB over every tensor in two (update and per-tensor norms; the trust ratios
 * taken in the apply), every decision on the device: the host reads the outcome once, at rt_model_end_step
 * (rt_model.c). */
#include <math.h>

#include "rt_exec.h"

const rt_adam_args rt_adam_bench_args = {.lr = 1e-4f,
                                         .beta1 = 0.9f,
                                         .beta2 = 0.999f,
                                         .eps = 1e-8f,
                                         .weight_decay = 0.01f,
                                         .c1 = 0.1f,
                                         .c2 = 0.001f,
                                         .decoupled_decay = true,
                                         .grad_scale = 1};

static void begin(rt_model *m, int op)
{
    if (op >= 0) m->be->op_timer_begin(m->be, op);
}

static void end(rt_model *m, int op)
{
    if (op >= 0) m->be->op_timer_end(m->be, op);
}

void rt_model_set_loss_scale(rt_model *m, double initial)
{
    m->loss_scale = initial >= 1 ? initial : 1;
    m->step_loss_scale = m->loss_scale;
    m->good_steps = 0;
}

void rt_model_update(rt_model *m, const et_hyper *h)
{
    rt_backend *be = m->be;
    const et_scenario *s = m->s;
    const int op_norm = et_graph_find(&m->graph, "optimizer.grad_norm");
    const double S = m->step_loss_scale;
    const bool clip = s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE;
    /* every rank holds the same reduced gradient: the global norm needs no further communication; a
     * loss-scaled step needs it to find an overflow (timed under grad_norm where the graph has it). The
     * gate also skips a step whose loss is not finite on this rank. */
    m->norm_taken = clip || S != 1;
    double *sq = m->norm_taken ? rt_model_scalar(m, RT_SC_GRAD_SQ) : NULL;
    begin(m, op_norm);
    if (sq) be->sum_sq(be, m->grads, m->n_params, sq);
    be->clip_gate(be, sq, rt_model_scalar(m, RT_SC_LOSS), clip ? s->optimizer.max_grad_norm : -1, S, m->gate);
    end(m, op_norm);
    m->updated = true;
    m->adam_t++; /* taken back by rt_model_end_step when the gate skipped the update */
    const double warm =
        h->warmup_steps > 0 && m->adam_t < h->warmup_steps ? (double)m->adam_t / h->warmup_steps : 1;
    rt_adam_args a = {
        .lr = (float)(h->lr * warm),
        .beta1 = (float)h->beta1,
        .beta2 = (float)h->beta2,
        .eps = (float)h->eps,
        .weight_decay = (float)h->weight_decay,
        .c1 = (float)(1 - pow(h->beta1, (double)m->adam_t)),
        .c2 = (float)(1 - pow(h->beta2, (double)m->adam_t)),
        .decoupled_decay = s->optimizer.name != ET_OPT_ADAM,
        .grad_scale = 1, /* the clip and the loss scale's inverse come from the gate, in the update's pass */
    };
    if (s->optimizer.name != ET_OPT_LAMB) {
        const int op = et_graph_find(&m->graph, "optimizer.step");
        begin(m, op);
        be->adam_update(be, m->params, m->grads, m->m, m->v, m->mask, m->n_params, &a, m->gate);
        rt_model_refresh16(m); /* the 16-bit copy the products read (the cost model's op writes it too) */
        end(m, op);
    } else {
        const int op_u = et_graph_find(&m->graph, "optimizer.update"),
                  op_t = et_graph_find(&m->graph, "optimizer.trust_ratio"),
                  op_a = et_graph_find(&m->graph, "optimizer.apply");
        /* every tensor in two launches; tensor i's two sums at its slots */
        double *sums = rt_model_scalar(m, RT_SC_BUCKETS + 2 * m->n_buckets);
        begin(m, op_u);
        be->lamb_update(be, m->params, m->grads, m->m, m->v, m->mask, &m->chunks, &a, m->gate, sums);
        end(m, op_u);
        /* the per-tensor trust ratios are taken by the apply pass from the update's sums, on the device:
         * nothing of their own to time */
        begin(m, op_t);
        end(m, op_t);
        begin(m, op_a);
        be->lamb_apply(be, m->params, m->grads, &m->chunks, sums, a.lr, m->gate); /* g holds u */
        rt_model_refresh16(m);
        end(m, op_a);
    }
}
