/* The optimizer ops of the graph on the model's backend, each bracketed by its op timer: the global-norm
 * clip (and fp16's loss-scale check), then Adam/AdamW in one fused pass over the flat buffer, or LAMB per
 * tensor (update and norms, trust ratio, apply). */
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

/* PyTorch's GradScaler: growth_interval 2000, growth_factor 2, backoff_factor 0.5 (torch.amp.GradScaler) */
#define LOSS_SCALE_GROWTH_INTERVAL 2000

void rt_model_set_loss_scale(rt_model *m, double initial)
{
    m->loss_scale = initial >= 1 ? initial : 1;
    m->good_steps = 0;
}

int rt_model_update(rt_model *m, const et_hyper *h)
{
    rt_backend *be = m->be;
    const et_scenario *s = m->s;
    const int op_norm = et_graph_find(&m->graph, "optimizer.grad_norm");
    const double S = m->loss_scale;
    float clip = 1;
    if (s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE || S != 1) {
        /* every rank holds the same reduced gradient: the global norm needs no further communication; a
         * loss-scaled step needs it to find an overflow (timed under grad_norm where the graph has it) */
        begin(m, op_norm);
        double total = sqrt(be->sum_sq(be, m->grads, m->n_params)) / S, max = s->optimizer.max_grad_norm;
        m->last_grad_norm = total;
        if (s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE && total > max)
            clip = (float)(max / (total + 1e-6)); /* applied inside the update: one pass less */
        end(m, op_norm);
        if (S != 1 && !isfinite(total)) { /* an overflow in a 16-bit product: skip, and halve the scale */
            m->skipped_steps++;
            m->loss_scale = S / 2 >= 1 ? S / 2 : 1;
            m->good_steps = 0;
            be->op_timers_collect(be, m->op_time, m->graph.n_ops);
            return 1;
        }
        if (S != 1 && ++m->good_steps == LOSS_SCALE_GROWTH_INTERVAL) m->loss_scale = S * 2, m->good_steps = 0;
    }
    m->adam_t++;
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
        .grad_scale = (float)(clip / S), /* the clip and the loss scale's inverse, in the update's pass */
    };
    if (s->optimizer.name != ET_OPT_LAMB) {
        const int op = et_graph_find(&m->graph, "optimizer.step");
        begin(m, op);
        be->adam_update(be, m->params, m->grads, m->m, m->v, m->mask, m->n_params, &a);
        end(m, op);
    } else {
        const int op_u = et_graph_find(&m->graph, "optimizer.update"),
                  op_t = et_graph_find(&m->graph, "optimizer.trust_ratio"),
                  op_a = et_graph_find(&m->graph, "optimizer.apply");
        for (int i = 0; i < m->graph.n_params; i++) {
            const size_t off = m->param_offset[i], n = (size_t)m->graph.params[i].dense;
            double wn, un;
            begin(m, op_u);
            be->lamb_update(be, m->params + off, m->grads + off, m->m + off, m->v + off,
                            m->mask ? m->mask + off : NULL, n, &a, &wn, &un);
            end(m, op_u);
            begin(m, op_t);
            double rate = a.lr;
            if (wn > 0 && un > 0) rate *= sqrt(wn) / sqrt(un); /* per-tensor trust ratio */
            end(m, op_t);
            begin(m, op_a);
            be->axpy(be, m->params + off, m->grads + off, (float)-rate, n); /* g holds the update */
            end(m, op_a);
        }
    }
    be->op_timers_collect(be, m->op_time, m->graph.n_ops);
    return 0;
}
