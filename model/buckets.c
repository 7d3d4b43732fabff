#include "buckets.h"

#include <stdlib.h>

int et_buckets_build(const et_graph *g, double bucket_bytes, double grad_elem_bytes, et_bucket **out,
                     int *count, et_error *err)
{
    *out = NULL;
    *count = 0;
    if (g->n_params == 0) return 0;
    /* op that finalises each parameter */
    int *owner = malloc((size_t)g->n_params * sizeof *owner);
    et_bucket *b = calloc((size_t)g->n_params, sizeof *b);
    if (!owner || !b) {
        free(owner);
        free(b);
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of memory cutting gradient buckets");
    }
    for (int i = 0; i < g->n_ops; i++)
        for (int p = g->ops[i].grad_first; p < g->ops[i].grad_first + g->ops[i].grad_count; p++)
            owner[p] = i;
    int n = 0;
    for (int p = 0; p < g->n_params; p++) {
        if (n == 0 || b[n - 1].bytes >= bucket_bytes || b[n - 1].expert != g->params[p].expert) {
            b[n].param_first = p;
            b[n].expert = g->params[p].expert;
            n++;
        }
        et_bucket *cur = &b[n - 1];
        cur->param_count++;
        cur->elements += g->params[p].grad_elems;
        cur->bytes += g->params[p].grad_elems * grad_elem_bytes;
        if (owner[p] > cur->ready_op) cur->ready_op = owner[p];
    }
    free(owner);
    *out = b;
    *count = n;
    return 0;
}
