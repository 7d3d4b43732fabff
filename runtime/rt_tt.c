#include "rt_tt.h"
#include "tt_network.h"

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
    tt_net net;
    tt_build(&l->shape, &l->plan, T, &net);
    size_t total = 0, largest = 0;
    for (int st = 0; st < l->plan.steps; st++) {
        size_t a = tt_elems(&net, &net.t[l->plan.left[st]]), b = tt_elems(&net, &net.t[l->plan.right[st]]);
        size_t r = tt_elems(&net, &net.t[net.d + 1 + st]);
        total += 2 * r;
        largest = a > largest ? a : largest;
        largest = b > largest ? b : largest;
        largest = r > largest ? r : largest;
    }
    return total + 4 * largest + 1;
}
