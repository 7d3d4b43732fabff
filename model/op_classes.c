#include "op_classes.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Everything et_op_time reads. The linear forms (m through copy_bytes, adjacent doubles) are compared as
 * bytes: ops equal that way cost the same, and a -0 against a 0 only splits a class (each op keeps its own
 * time either way). */
_Static_assert(offsetof(et_op, copy_bytes) - offsetof(et_op, m) == 8 * sizeof(et_linear),
               "et_op's linear forms m..copy_bytes are adjacent (same_cost compares them as one block)");

static int same_cost(const et_op *a, const et_op *b)
{
    const size_t from = offsetof(et_op, m), to = offsetof(et_op, copy_bytes) + sizeof(et_linear);
    return a->kind == b->kind && !memcmp((const char *)a + from, (const char *)b + from, to - from) &&
           a->masked_scale == b->masked_scale && a->mask_bytes == b->mask_bytes &&
           a->weight_bytes == b->weight_bytes && a->kernels == b->kernels &&
           a->sparse.density == b->sparse.density && a->sparse.pattern == b->sparse.pattern &&
           a->sparse.block == b->sparse.block && a->time_scale == b->time_scale && a->fused == b->fused &&
           a->fused_rate == b->fused_rate && a->cudnn_kernel == b->cudnn_kernel &&
           a->tile_keys == b->tile_keys && a->window_keys == b->window_keys &&
           a->unquantized == b->unquantized;
}

static unsigned long long bits(double x)
{
    unsigned long long w;
    x = x == 0 ? 0 : x; /* -0 and 0 compare equal */
    memcpy(&w, &x, sizeof w);
    return w;
}

/* A hash of part of what same_cost compares (ops of one class hash alike; most others differ in their
 * kind, FLOPs or bytes), cheap next to the comparison it saves. */
static unsigned long long cost_hash(const et_op *op)
{
    const unsigned long long h =
        (unsigned long long)op->kind * 0x9e3779b97f4a7c15ULL +
        (unsigned long long)op->kernels * 0xc2b2ae3d27d4eb4fULL +
        bits(op->flops.fixed) * 0x165667b19e3779f9ULL + bits(op->flops.per_token) * 0xd6e8feb86659fd93ULL +
        bits(op->flops.per_token_sq) * 0xff51afd7ed558ccdULL + bits(op->bytes.fixed) * 0xc4ceb9fe1a85ec53ULL +
        bits(op->bytes.per_token) * 0x87c37b91114253d5ULL +
        bits(op->bytes.per_sequence) * 0x4cf5ad432745937fULL;
    return h ^ h >> 29;
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
