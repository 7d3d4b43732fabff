#include "op_classes.h"

#include <stdlib.h>
#include <string.h>

static int same_linear(const et_linear *a, const et_linear *b)
{
    return a->fixed == b->fixed && a->per_sequence == b->per_sequence && a->per_token == b->per_token &&
           a->per_token_sq == b->per_token_sq && a->per_prediction == b->per_prediction;
}

/* Everything et_op_time reads. */
static int same_cost(const et_op *a, const et_op *b)
{
    return a->kind == b->kind && same_linear(&a->m, &b->m) && same_linear(&a->n, &b->n) &&
           same_linear(&a->k, &b->k) && same_linear(&a->flops, &b->flops) &&
           same_linear(&a->bytes, &b->bytes) && same_linear(&a->special, &b->special) &&
           same_linear(&a->copy_bytes, &b->copy_bytes) && same_linear(&a->cold_bytes, &b->cold_bytes) &&
           same_linear(&a->footprint, &b->footprint) && a->masked_scale == b->masked_scale &&
           a->mask_bytes == b->mask_bytes && a->weight_bytes == b->weight_bytes && a->kernels == b->kernels &&
           a->sparse.density == b->sparse.density && a->sparse.pattern == b->sparse.pattern &&
           a->sparse.block == b->sparse.block && a->time_scale == b->time_scale && a->fused == b->fused;
}

int et_op_classes_build(const et_graph *g, et_op_classes *c)
{
    memset(c, 0, sizeof *c);
    c->graph = g;
    size_t n = (size_t)g->n_ops + 1;
    c->first = malloc(n * sizeof *c->first);
    c->class_of = malloc(n * sizeof *c->class_of);
    c->class_time = malloc(n * sizeof *c->class_time);
    if (!c->first || !c->class_of || !c->class_time) {
        et_op_classes_free(c);
        return -1;
    }
    for (int i = 0; i < g->n_ops; i++) {
        int k = 0;
        while (k < c->n_classes && !same_cost(&g->ops[c->first[k]], &g->ops[i]))
            k++;
        if (k == c->n_classes) c->first[c->n_classes++] = i;
        c->class_of[i] = k;
    }
    return 0;
}

void et_op_classes_times(et_op_classes *c, const et_batch_shape *b, const et_device_profile *d,
                         et_precision p, double *op_time)
{
    const et_graph *g = c->graph;
    for (int k = 0; k < c->n_classes; k++)
        c->class_time[k] = et_op_time(&g->ops[c->first[k]], b, d, p);
    for (int i = 0; i < g->n_ops; i++)
        op_time[i] = c->class_time[c->class_of[i]];
}

void et_op_classes_free(et_op_classes *c)
{
    free(c->first);
    free(c->class_of);
    free(c->class_time);
    memset(c, 0, sizeof *c);
}
