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

/* A hash of what same_cost compares: ops of one class hash alike, and most others differ in it. */
static unsigned long long cost_hash(const et_op *op)
{
    const et_linear *l[] = {&op->m,       &op->n,          &op->k,          &op->flops,    &op->bytes,
                            &op->special, &op->copy_bytes, &op->cold_bytes, &op->footprint};
    unsigned long long h =
        (unsigned long long)op->kind * 0x9e3779b97f4a7c15ULL ^ (unsigned long long)op->kernels;
    for (size_t i = 0; i < sizeof l / sizeof l[0]; i++) {
        const double v[] = {l[i]->fixed, l[i]->per_sequence, l[i]->per_token, l[i]->per_token_sq,
                            l[i]->per_prediction};
        for (int j = 0; j < 5; j++) {
            unsigned long long w;
            const double x = v[j] == 0 ? 0 : v[j]; /* -0 and 0 compare equal */
            memcpy(&w, &x, sizeof w);
            h = (h ^ w) * 0x100000001b3ULL;
            h ^= h >> 31;
        }
    }
    return h;
}

int et_op_classes_build(const et_graph *g, et_op_classes *c)
{
    memset(c, 0, sizeof *c);
    c->graph = g;
    size_t n = (size_t)g->n_ops + 1;
    unsigned long long *hash = malloc(n * sizeof *hash);
    c->first = malloc(n * sizeof *c->first);
    c->class_of = malloc(n * sizeof *c->class_of);
    c->phase_of = malloc(n);
    c->plain = malloc(n);
    if (!hash || !c->first || !c->class_of || !c->phase_of || !c->plain) {
        free(hash);
        et_op_classes_free(c);
        return -1;
    }
    for (int i = 0; i < g->n_ops; i++) {
        const et_op *op = &g->ops[i];
        const unsigned long long h = cost_hash(op);
        int k = 0;
        while (k < c->n_classes && (hash[k] != h || !same_cost(&g->ops[c->first[k]], op)))
            k++;
        if (k == c->n_classes) {
            hash[k] = h;
            c->first[c->n_classes++] = i;
        }
        c->class_of[i] = k;
        c->phase_of[i] = (unsigned char)op->phase;
        c->plain[i] = !et_op_is_comm(op->kind) && !op->expert;
        if (!c->plain[i]) c->n_special[op->phase]++;
    }
    free(hash);
    const size_t nc = (size_t)c->n_classes + 1;
    c->class_time = malloc(nc * sizeof *c->class_time);
    c->class_kernels = malloc(nc * sizeof *c->class_kernels);
    int ok = c->class_time && c->class_kernels;
    for (int ph = 0; ph < 3 && ok; ph++) {
        c->count[ph] = calloc(nc, sizeof *c->count[ph]);
        c->special[ph] = malloc(((size_t)c->n_special[ph] + 1) * sizeof *c->special[ph]);
        ok = c->count[ph] && c->special[ph];
        c->n_special[ph] = 0;
    }
    if (!ok) {
        et_op_classes_free(c);
        return -1;
    }
    for (int i = 0; i < g->n_ops; i++) {
        const int ph = c->phase_of[i];
        if (c->plain[i])
            c->count[ph][c->class_of[i]]++;
        else
            c->special[ph][c->n_special[ph]++] = i;
    }
    return 0;
}

void et_op_classes_times(et_op_classes *c, const et_batch_shape *b, const et_device_profile *d,
                         et_precision p, double *op_time)
{
    const et_graph *g = c->graph;
    for (int k = 0; k < c->n_classes; k++) {
        const et_op *op = &g->ops[c->first[k]];
        c->class_time[k] = et_op_time(op, b, d, p);
        c->class_kernels[k] = et_op_launches(op, b);
    }
    for (int i = 0; op_time && i < g->n_ops; i++)
        op_time[i] = c->class_time[c->class_of[i]];
}

double et_op_classes_plain(const et_op_classes *c, et_phase phase, double *kernels)
{
    double t = 0, k = 0;
    for (int j = 0; j < c->n_classes; j++)
        if (c->count[phase][j]) {
            t += c->count[phase][j] * c->class_time[j];
            k += c->count[phase][j] * c->class_kernels[j];
        }
    *kernels = k;
    return t;
}

void et_op_classes_free(et_op_classes *c)
{
    free(c->first);
    free(c->class_of);
    free(c->class_time);
    free(c->class_kernels);
    free(c->phase_of);
    free(c->plain);
    for (int ph = 0; ph < 3; ph++) {
        free(c->count[ph]);
        free(c->special[ph]);
    }
    memset(c, 0, sizeof *c);
}
