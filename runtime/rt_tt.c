#include "rt_tt.h"

#include <string.h>

void rt_tt_layer_init(rt_tt_layer *l, const et_tt_shape *shape, double tokens_hint)
{
    memset(l, 0, sizeof *l);
    l->shape = *shape;
    et_tt_plan_best(shape, tokens_hint > 0 ? tokens_hint : 1, &l->plan);
    size_t off = 0;
    for (int k = 0; k < shape->d_in + shape->d_out; k++) {
        l->core_offset[k] = off;
        off += (size_t)et_tt_core_params(shape, k);
    }
    l->core_offset[shape->d_in + shape->d_out] = off;
}

size_t rt_tt_workspace_size(const rt_tt_layer *l, int T)
{
    /* every intermediate and its gradient, plus four scratch matrices as large as any step's operands */
    const et_tt_shape *s = &l->shape;
    int d = s->d_in + s->d_out;
    double size[2 * ET_TT_MAX_CORES];
    int n_t = d + 1;
    struct {
        int n, label[2 * ET_TT_MAX_CORES];
    } t[3 * ET_TT_MAX_CORES];
    size[0] = T;
    for (int k = 0; k < d; k++)
        size[1 + k] = s->dims[k];
    for (int k = 1; k < d; k++)
        size[d + k] = s->rank[k];
    t[0].n = 0;
    t[0].label[t[0].n++] = 0;
    for (int k = 0; k < s->d_in; k++)
        t[0].label[t[0].n++] = 1 + k;
    for (int k = 0; k < d; k++) {
        t[k + 1].n = 0;
        if (k > 0) t[k + 1].label[t[k + 1].n++] = d + k;
        t[k + 1].label[t[k + 1].n++] = 1 + k;
        if (k < d - 1) t[k + 1].label[t[k + 1].n++] = d + k + 1;
    }
    double total = 0, largest = 0;
    for (int st = 0; st < l->plan.steps; st++) {
        int a = l->plan.left[st], b = l->plan.right[st];
        double all = 1, shared = 1, res = 1;
        int r = n_t++;
        t[r].n = 0;
        for (int i = 0; i < t[a].n; i++) {
            int sh = 0;
            for (int j = 0; j < t[b].n; j++)
                sh |= t[a].label[i] == t[b].label[j];
            all *= size[t[a].label[i]];
            if (sh)
                shared *= size[t[a].label[i]];
            else
                t[r].label[t[r].n++] = t[a].label[i];
        }
        for (int j = 0; j < t[b].n; j++) {
            int sh = 0;
            for (int i = 0; i < t[a].n; i++)
                sh |= t[a].label[i] == t[b].label[j];
            if (!sh) {
                t[r].label[t[r].n++] = t[b].label[j];
                all *= size[t[b].label[j]];
            }
        }
        for (int i = 0; i < t[r].n; i++)
            res *= size[t[r].label[i]];
        total += 2 * res;
        double m_k = 1, k_n = 1;
        for (int i = 0; i < t[a].n; i++)
            m_k *= size[t[a].label[i]];
        for (int j = 0; j < t[b].n; j++)
            k_n *= size[t[b].label[j]];
        largest = largest > m_k ? largest : m_k;
        largest = largest > k_n ? largest : k_n;
        largest = largest > res ? largest : res;
        (void)all, (void)shared;
    }
    return (size_t)(total + 4 * largest) + 1;
}
