#include "tensor_train.h"
#include "tt_network.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int cap_rank(const int *dims, int d, int k, int max_rank)
{
    /* r_k between core k-1 and core k: at most the product of the dims on either side */
    double left = 1, right = 1;
    for (int i = 0; i < k; i++)
        left *= dims[i];
    for (int i = k; i < d; i++)
        right *= dims[i];
    double r = fmin(max_rank, fmin(left, right));
    return (int)r;
}

int et_tt_linear(et_tt_shape *tt, const int *in_factors, int d_in, const int *out_factors, int d_out,
                 int max_rank, et_error *err)
{
    memset(tt, 0, sizeof *tt);
    int d = d_in + d_out;
    if (d_in < 1 || d_out < 1 || d > ET_TT_MAX_CORES)
        return et_error_set(err, NULL, 0, 0, NULL,
                            "a tensor-train layer needs 1 to %d cores in all, got %d + %d", ET_TT_MAX_CORES,
                            d_in, d_out);
    if (max_rank < 1)
        return et_error_set(err, NULL, 0, 0, NULL, "tensor-train rank must be >= 1, got %d", max_rank);
    tt->d_in = d_in;
    tt->d_out = d_out;
    for (int i = 0; i < d_in; i++)
        tt->dims[i] = in_factors[i];
    for (int i = 0; i < d_out; i++)
        tt->dims[d_in + i] = out_factors[i];
    for (int i = 0; i < d; i++)
        if (tt->dims[i] < 1) return et_error_set(err, NULL, 0, 0, NULL, "tensor-train factors must be >= 1");
    tt->rank[0] = tt->rank[d] = 1;
    for (int k = 1; k < d; k++)
        tt->rank[k] = cap_rank(tt->dims, d, k, max_rank);
    return 0;
}

int et_tt_embedding(et_tt_shape *tt, const int *row_factors, const int *col_factors, int d, int max_rank,
                    et_error *err)
{
    memset(tt, 0, sizeof *tt);
    if (d < 1 || d > ET_TT_MAX_CORES)
        return et_error_set(err, NULL, 0, 0, NULL, "a tensor-train embedding needs 1 to %d cores, got %d",
                            ET_TT_MAX_CORES, d);
    tt->embedding = 1;
    tt->d_in = d;
    int pair[ET_TT_MAX_CORES];
    for (int k = 0; k < d; k++) {
        tt->dims[k] = row_factors[k];
        tt->cols[k] = col_factors[k];
        pair[k] = row_factors[k] * col_factors[k];
        if (row_factors[k] < 1 || col_factors[k] < 1)
            return et_error_set(err, NULL, 0, 0, NULL, "tensor-train factors must be >= 1");
    }
    tt->rank[0] = tt->rank[d] = 1;
    for (int k = 1; k < d; k++)
        tt->rank[k] = cap_rank(pair, d, k, max_rank);
    return 0;
}

static int cores(const et_tt_shape *tt)
{
    return tt->d_in + tt->d_out;
}

double et_tt_core_params(const et_tt_shape *tt, int k)
{
    double dim = tt->embedding ? (double)tt->dims[k] * tt->cols[k] : tt->dims[k];
    return (double)tt->rank[k] * dim * tt->rank[k + 1];
}

double et_tt_params(const et_tt_shape *tt)
{
    double p = 0;
    for (int k = 0; k < cores(tt); k++)
        p += et_tt_core_params(tt, k);
    return p;
}

double et_tt_in(const et_tt_shape *tt)
{
    double n = 1;
    for (int k = 0; k < tt->d_in; k++)
        n *= tt->dims[k];
    return n;
}

double et_tt_out(const et_tt_shape *tt)
{
    double n = 1;
    for (int k = tt->d_in; k < cores(tt); k++)
        n *= tt->dims[k];
    return n;
}

/* The tensor network: index 0 is the token index T, 1..d the mode of core k-1, d+1..2d-1 the ranks
 * r_1..r_{d-1}. Tensor 0 is X, tensor k+1 is core k. */
typedef struct network {
    int n_tensors, n_index;
    uint32_t tensor_index[ET_TT_MAX_CORES + 1];
    uint32_t output;
    double size[2 * ET_TT_MAX_CORES + 1];
} network;

static void build_network(const et_tt_shape *tt, double tokens, network *net)
{
    int d = cores(tt);
    memset(net, 0, sizeof *net);
    net->n_tensors = d + 1;
    net->n_index = 2 * d;
    net->size[0] = tokens;
    for (int k = 0; k < d; k++)
        net->size[1 + k] = tt->dims[k];
    for (int k = 1; k < d; k++)
        net->size[d + k] = tt->rank[k];
    net->tensor_index[0] = 1u;
    for (int k = 0; k < tt->d_in; k++)
        net->tensor_index[0] |= 1u << (1 + k);
    for (int k = 0; k < d; k++) {
        uint32_t idx = 1u << (1 + k);
        if (k > 0) idx |= 1u << (d + k);
        if (k < d - 1) idx |= 1u << (d + k + 1);
        net->tensor_index[k + 1] = idx;
    }
    net->output = 1u;
    for (int k = tt->d_in; k < d; k++)
        net->output |= 1u << (1 + k);
}

/* Open indices of a set of tensors: indices of its tensors that are outputs or shared with the rest. */
static uint32_t open_index(const network *net, uint32_t set)
{
    uint32_t inside = 0, outside = 0;
    for (int t = 0; t < net->n_tensors; t++) {
        if (set >> t & 1)
            inside |= net->tensor_index[t];
        else
            outside |= net->tensor_index[t];
    }
    return inside & (outside | net->output);
}

static double product(const network *net, uint32_t idx, int skip_tokens)
{
    double p = 1;
    for (int i = skip_tokens ? 1 : 0; i < net->n_index; i++)
        if (idx >> i & 1) p *= net->size[i];
    return p;
}

static double merge_cost(const network *net, uint32_t a, uint32_t b)
{
    return 2 * product(net, open_index(net, a) | open_index(net, b), 0);
}

/* Records the steps of the tree rooted at `set` (choice[] holds the left part), post-order. */
static int emit(const network *net, const uint32_t *choice, uint32_t set, et_tt_plan *p, int *next_id)
{
    if ((set & (set - 1)) == 0) { /* a single tensor */
        int t = 0;
        while (!(set >> t & 1))
            t++;
        return t;
    }
    uint32_t a = choice[set], b = set & ~a;
    int left = emit(net, choice, a, p, next_id), right = emit(net, choice, b, p, next_id);
    int s = p->steps++;
    p->left[s] = left;
    p->right[s] = right;
    uint32_t oa = open_index(net, a), ob = open_index(net, b), result = open_index(net, set);
    double cost = merge_cost(net, a, b);
    uint32_t all = oa | ob;
    if (all & 1u)
        p->flops_per_token += cost / net->size[0];
    else
        p->flops_fixed += cost;
    if (result & 1u) p->intermediate_per_token += product(net, result, 1);
    /* the step as a product: rows A's free indices (and shared ones kept), columns B's, K the contracted */
    const uint32_t shared = oa & ob, contracted = shared & ~result, rows = (oa & ~shared) | (shared & result),
                   cols = ob & ~shared;
    p->step[s] = (et_tt_step){product(net, rows, 1), product(net, cols, 1), product(net, contracted, 1),
                              rows & 1u   ? 0
                              : cols & 1u ? 1
                                          : -1};
    if (cost > 2 * p->largest_m * p->largest_n * p->largest_k) {
        p->largest_m = product(net, rows, 0);
        p->largest_n = product(net, cols, 0);
        p->largest_k = product(net, contracted, 0);
    }
    return (*next_id)++;
}

static void plan_from_tree(const et_tt_shape *tt, const network *net, const uint32_t *choice, et_tt_plan *p)
{
    memset(p, 0, sizeof *p);
    int next_id = cores(tt) + 1;
    uint32_t all = (1u << net->n_tensors) - 1;
    emit(net, choice, all, p, &next_id);
}

int et_tt_plan_best(const et_tt_shape *tt, double tokens, et_tt_plan *best)
{
    network net;
    build_network(tt, tokens, &net);
    const uint32_t full = (1u << net.n_tensors) - 1;
    double cost[1u << (ET_TT_MAX_CORES + 1)];
    uint32_t choice[1u << (ET_TT_MAX_CORES + 1)];
    for (uint32_t s = 1; s <= full; s++) {
        if ((s & (s - 1)) == 0) {
            cost[s] = 0;
            continue;
        }
        cost[s] = INFINITY;
        uint32_t low = s & -s;
        /* splits s = a + b with a holding the lowest tensor, each split counted once */
        for (uint32_t a = (s - 1) & s; a; a = (a - 1) & s) {
            if (!(a & low)) continue;
            uint32_t b = s & ~a;
            double c = cost[a] + cost[b] + merge_cost(&net, a, b);
            if (c < cost[s]) {
                cost[s] = c;
                choice[s] = a;
            }
        }
    }
    plan_from_tree(tt, &net, choice, best);
    return 0;
}

void et_tt_plan_naive(const et_tt_shape *tt, et_tt_plan *naive)
{
    network net;
    build_network(tt, 1, &net);
    uint32_t choice[1u << (ET_TT_MAX_CORES + 1)];
    /* ((X core0) core1) ... : the left part of {X, core0..core_k} is {X, core0..core_{k-1}} */
    for (int k = 1; k < net.n_tensors; k++) {
        uint32_t set = (1u << (k + 1)) - 1;
        choice[set] = (1u << k) - 1;
    }
    plan_from_tree(tt, &net, choice, naive);
}

double et_tt_plan_flops(const et_tt_plan *p, double tokens)
{
    return p->flops_fixed + p->flops_per_token * tokens;
}

double et_tt_embedding_flops_per_token(const et_tt_shape *tt)
{
    /* rows are fixed by the token: core k is an r_{k-1} x b_k x r_k slice; accumulate left to right */
    double flops = 0, cols_so_far = tt->cols[0];
    for (int k = 1; k < tt->d_in; k++) {
        flops += 2 * cols_so_far * tt->rank[k] * tt->cols[k] * tt->rank[k + 1];
        cols_so_far *= tt->cols[k];
    }
    return flops;
}

void et_tt_plan_describe(const et_tt_plan *p, const et_tt_shape *tt, char *buf, size_t size)
{
    enum { MAX_NAMES = 3 * ET_TT_MAX_CORES, NAME_LEN = 256 };
    char names[MAX_NAMES][NAME_LEN];
    int d = tt->d_in + tt->d_out;
    snprintf(names[0], NAME_LEN, "X");
    for (int k = 0; k < d; k++)
        snprintf(names[k + 1], NAME_LEN, "G%d", k);
    int id = d + 1;
    for (int s = 0; s < p->steps && id < MAX_NAMES; s++, id++) {
        char joined[NAME_LEN]; /* through a copy: a step may name its own slot's former contents */
        snprintf(joined, sizeof joined, "(%.120s %.120s)", names[p->left[s]], names[p->right[s]]);
        memcpy(names[id], joined, sizeof joined);
    }
    snprintf(buf, size, "%s", p->steps ? names[id - 1] : "X");
}

void et_tt_plan_copies(const et_tt_shape *tt, const et_tt_plan *p, et_tt_copies *c)
{
    tt_net net;
    tt_build(tt, p, 1, &net); /* sizes at one token: label 0 (the tokens) marks the per-token tensors */
    memset(c, 0, sizeof *c);
    const int d = net.d;
    for (int st = 0; st < p->steps; st++) {
        const int id[2] = {p->left[st], p->right[st]};
        const tt_tensor *a = &net.t[id[0]], *b = &net.t[id[1]];
        tt_tensor af, sh, bf;
        tt_split(a, b, &af, &sh, &bf);
        for (int side = 0; side < 2; side++) {
            const tt_tensor *x = side ? b : a;
            if (side ? tt_view_direct(b, &sh, &bf) : tt_view_direct(a, &af, &sh)) continue;
            const double n = (double)tt_elems(&net, x);
            /* forward: a read and a write; backward: the same, then the gradient written back (the input and
             * the cores added to: a read more) */
            const double fwd = 2 * n, bwd = 2 * n + (id[side] <= d ? 3 : 2) * n;
            const int per_token = tt_has_label(x, 0);
            *(per_token ? &c->fwd_per_token : &c->fwd_fixed) += fwd;
            *(per_token ? &c->bwd_per_token : &c->bwd_fixed) += bwd;
        }
    }
    const double out = et_tt_out(tt);
    c->fwd_per_token += 2 * out; /* the last result laid out as the output */
    c->bwd_per_token += 2 * out; /* the output's gradient laid out as the last result's */
}
