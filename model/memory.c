#include "memory.h"

#include <math.h>

et_memory et_memory_estimate(const et_scenario *s, const et_graph *g, const et_batch_shape *micro)
{
    et_memory m = {0};
    const double P = g->param_count;
    const double e = et_precision_bytes(s->precision);
    const int mixed = s->precision == ET_FP16 || s->precision == ET_BF16;
    const int dp = s->parallel.data, z = s->parallel.zero_stage;
    /* ZeRO (Rajbhandari et al. 2020): model copy e, gradients e, Adam/LAMB states m and v in fp32 plus an
     * fp32 master copy when training in 16-bit: 2 + 2 + 12 = 16 bytes per parameter in mixed precision. */
    double states = mixed ? 12 : 8;
    /* sparse: kept values plus indices; gradients at the kept size unless the method keeps them dense */
    m.weights = g->weight_bytes / (z >= 3 ? dp : 1);
    m.gradients = g->grad_elems * e / (z >= 2 ? dp : 1);
    m.optimizer_states = P * states / (z >= 1 ? dp : 1);

    /* Activations per layer (Korthikanti et al. 2022, eq. 2 without sequence parallelism), written for
     * 16-bit tensors: T*H*(10 + 24/t) + 5*A*Q/t bytes; scaled by e/2 for other precisions. With full
     * recomputation only each layer's input (2*T*H bytes at 16 bit) is kept, plus one layer's full set. */
    const double H = s->model.hidden, A = s->model.heads, t = s->parallel.tensor;
    const double T = micro->tokens, Q = micro->tokens_sq;
    double per_layer = (T * H * (10 + 24 / t) + 5 * A * Q / t) * e / 2;
    double layers = g->last_layer - g->first_layer + 1;
    double act = s->parallel.recompute ? layers * T * H * e + per_layer : layers * per_layer;
    /* embeddings output and the loss head: logits and their gradient, fp32 softmax statistics */
    double head = 0;
    if (g->options.stage == g->options.pipeline - 1)
        head = micro->predictions * (s->model.vocab / t) * (2 * e + 4) + micro->predictions * H * e * 4;
    act += T * H * e + head;
    /* 1F1B keeps up to `pipeline - stage` micro-batches in flight on a stage */
    int in_flight = s->parallel.pipeline - g->options.stage;
    if (in_flight > s->batch.grad_accum) in_flight = (int)s->batch.grad_accum;
    if (in_flight < 1) in_flight = 1;
    m.activations = act * in_flight;
    m.reserved = s->cluster.device.reserved_bytes;
    m.total = m.weights + m.gradients + m.optimizer_states + m.activations + m.reserved;
    m.capacity = s->cluster.device.memory_bytes;
    m.fits = m.total <= m.capacity;
    return m;
}
