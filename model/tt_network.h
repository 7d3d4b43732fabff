/* tt_network: the tensor network of a tensor-train layer with every tensor's storage order, as etrun
 * contracts it: labels (index ids, see tensor_train.c) of the input, the cores, then one intermediate per
 * contraction step of the plan, and the size of every label. Which operands a step must permute before its
 * product follows from these orders: etrun's kernels (runtime/rt_tt_impl.h) and the cost model's layout
 * copies (et_tt_plan_copies) both ask tt_view_direct. Header-only; no ownership, no errors. */
#ifndef ET_TT_NETWORK_H
#define ET_TT_NETWORK_H

#include <stddef.h>

#include "tensor_train.h"

#define TT_MAXL (2 * ET_TT_MAX_CORES)

/* A tensor of the network: its labels (index ids, see model/tensor_train.c) in storage order. */
typedef struct tt_tensor {
    int n;
    int label[TT_MAXL];
} tt_tensor;

typedef struct tt_net {
    int d, tensors;
    double size[TT_MAXL];
    tt_tensor t[3 * ET_TT_MAX_CORES];
} tt_net;

static inline int tt_has_label(const tt_tensor *x, int label)
{
    for (int i = 0; i < x->n; i++)
        if (x->label[i] == label) return 1;
    return 0;
}

/* Splits a step into A's free labels, the shared labels (A's order) and B's free labels. */
static inline void tt_split(const tt_tensor *a, const tt_tensor *b, tt_tensor *af, tt_tensor *sh,
                            tt_tensor *bf)
{
    af->n = sh->n = bf->n = 0;
    for (int i = 0; i < a->n; i++) {
        tt_tensor *to = tt_has_label(b, a->label[i]) ? sh : af;
        to->label[to->n++] = a->label[i];
    }
    for (int j = 0; j < b->n; j++)
        if (!tt_has_label(sh, b->label[j])) bf->label[bf->n++] = b->label[j];
}

/* The output Y [T, n_out]'s labels: the tokens, then the output factors. */
static inline tt_tensor tt_output(const et_tt_shape *s)
{
    tt_tensor out = {0};
    out.label[out.n++] = 0;
    for (int k = s->d_in; k < s->d_in + s->d_out; k++)
        out.label[out.n++] = 1 + k;
    return out;
}

static inline tt_tensor tt_concat(const tt_tensor *x, const tt_tensor *y)
{
    tt_tensor r = *x;
    for (int i = 0; i < y->n; i++)
        r.label[r.n++] = y->label[i];
    return r;
}

static inline void tt_build(const et_tt_shape *s, const et_tt_plan *plan, double T, tt_net *net)
{
    int d = s->d_in + s->d_out;
    net->d = d;
    net->size[0] = T;
    for (int k = 0; k < d; k++)
        net->size[1 + k] = s->dims[k];
    for (int k = 1; k < d; k++)
        net->size[d + k] = s->rank[k];
    tt_tensor *x = &net->t[0];
    x->n = 0;
    x->label[x->n++] = 0;
    for (int k = 0; k < s->d_in; k++)
        x->label[x->n++] = 1 + k;
    for (int k = 0; k < d; k++) {
        tt_tensor *c = &net->t[k + 1];
        c->n = 0;
        if (k > 0) c->label[c->n++] = d + k;
        c->label[c->n++] = 1 + k;
        if (k < d - 1) c->label[c->n++] = d + k + 1;
    }
    net->tensors = d + 1;
    for (int st = 0; st < plan->steps; st++) {
        const tt_tensor *a = &net->t[plan->left[st]], *b = &net->t[plan->right[st]];
        tt_tensor af, sh, bf; /* the result keeps both sides' free labels; the shared ones are contracted */
        tt_split(a, b, &af, &sh, &bf);
        net->t[net->tensors++] = tt_concat(&af, &bf);
    }
}

/* 1 when x's storage order is `first` then `second` */
static inline int tt_labels_are(const tt_tensor *x, const tt_tensor *first, const tt_tensor *second)
{
    if (x->n != first->n + second->n) return 0;
    for (int i = 0; i < first->n; i++)
        if (x->label[i] != first->label[i]) return 0;
    for (int i = 0; i < second->n; i++)
        if (x->label[first->n + i] != second->label[i]) return 0;
    return 1;
}

/* 1 when tensor x can be read as the rows x cols matrix of a product without a copy: stored as rows ++ cols
 * (read as is) or cols ++ rows (read transposed) */
static inline int tt_view_direct(const tt_tensor *x, const tt_tensor *rows, const tt_tensor *cols)
{
    return tt_labels_are(x, rows, cols) || tt_labels_are(x, cols, rows);
}

static inline size_t tt_elems(const tt_net *net, const tt_tensor *t)
{
    double n = 1;
    for (int i = 0; i < t->n; i++)
        n *= net->size[t->label[i]];
    return (size_t)n;
}

#endif
