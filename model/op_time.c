/* op_time: one op's seconds on a device at a batch shape (et_op_time, graph.h), the kernels it launches,
 * and a step's op times as etrun runs it: the roofline, GEMM efficiencies and special functions of
 * device_profile.h applied to the op's linear forms. */
#include "graph.h"

#include <math.h>

double et_linear_eval(const et_linear *l, const et_batch_shape *b)
{
    return l->fixed + l->per_sequence * b->sequences + l->per_token * b->tokens +
           l->per_token_sq * b->tokens_sq + l->per_prediction * b->predictions;
}

double et_op_launches(const et_op *op, const et_batch_shape *b)
{
    if (et_op_is_comm(op->kind)) return 0;
    if (et_linear_eval(&op->flops, b) <= 0 && et_linear_eval(&op->bytes, b) <= 0) return 0;
    return op->kernels;
}

double et_step_op_times(const et_graph *g, const et_batch_shape *micro, int n_micro,
                        const et_device_profile *d, et_precision p, double *op_time)
{
    double flops = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const et_op *op = &g->ops[i];
        const int once = op->phase == ET_PHASE_OPTIMIZER;
        op_time[i] = 0;
        for (int k = once ? n_micro - 1 : 0; k < n_micro; k++) {
            op_time[i] += et_op_time(op, &micro[k], d, p);
            flops += et_op_model_share(g, op) * et_linear_eval(&op->flops, &micro[k]);
        }
    }
    return flops;
}

static double op_steps_time(const et_op *op, const et_batch_shape *b, const et_device_profile *d,
                            et_precision p)
{
    const double e = et_precision_bytes(p), T = b->tokens;
    double t = 0;
    for (int s = 0; s < op->n_steps; s++) {
        const et_tt_step *st = &op->steps[s];
        const double m = st->m * (st->tokens == 0 ? T : 1), n = st->n * (st->tokens == 1 ? T : 1), k = st->k;
        const double rate = et_gemm_peak(d, p) * et_gemm_dimension_efficiency(d, m, n, k);
        t += et_roofline_time(d, rate, 2 * m * n * k, 0, e * (m * k + k * n + m * n), 0, 0, 1);
    }
    return t;
}

double et_op_time(const et_op *op, const et_batch_shape *b, const et_device_profile *d, et_precision p)
{
    double flops = et_linear_eval(&op->flops, b), bytes = et_linear_eval(&op->bytes, b),
           special = et_linear_eval(&op->special, b), cold = et_linear_eval(&op->cold_bytes, b),
           footprint = et_linear_eval(&op->footprint, b);
    if (et_op_is_comm(op->kind) || (flops <= 0 && bytes <= 0)) return 0;
    if (op->masked_scale > 0 && d->sparse_masked_dense)
        flops *= op->masked_scale, special *= op->masked_scale, cold *= op->masked_scale,
            bytes = bytes * op->masked_scale + op->mask_bytes,
            /* the update's own state dense too, and the masks */
            footprint += op->footprint.fixed * (op->masked_scale - 1) + op->mask_bytes;
    double kernels = op->kernels;
    if (d->kind == ET_DEVICE_DATAFLOW) {
        /* fused, pipelined execution: no launches, and intermediates stay on chip as long as the op's
         * activations fit; weights still stream from device memory */
        double activations = bytes - op->weight_bytes;
        if (activations <= d->on_chip_bytes) bytes = op->weight_bytes, cold = 0;
        kernels = 0;
    }
    double rate;           /* FLOP/s */
    bool stepwise = false; /* a tensor-train op's contractions, each at its own shape */
    switch (op->kind) {
    case ET_OP_GEMM:
    case ET_OP_TT: {
        double m = et_linear_eval(&op->m, b), n = et_linear_eval(&op->n, b), k = et_linear_eval(&op->k, b);
        if (m <= 0 || n <= 0 || k <= 0) {
            if (flops > 0) return 0;
            rate = d->vector_flops; /* no product, only bytes: a tensor-train layer's bias gradient */
            break;
        }
        if (op->n_steps > 0 && d->kind != ET_DEVICE_DATAFLOW) {
            stepwise = true, rate = 0;
            break; /* costed step by step below */
        }
        double factor = et_sparse_rate_factor(d, &op->sparse);
        /* a tensor-train op is a sequence of contractions of other shapes than its largest: no one grid */
        double eff =
            op->kind == ET_OP_TT ? et_gemm_dimension_efficiency(d, m, n, k) : et_gemm_efficiency(d, m, n, k);
        /* the output layer and the router stay in 16 bits under FP8 and FP4 recipes */
        const et_precision q = op->unquantized && et_precision_quantized(p) ? ET_BF16 : p;
        rate = et_gemm_peak(d, q) * eff * (factor > 0 ? factor : 1);
        break;
    }
    case ET_OP_ATTENTION: {
        double l = b->sequences > 0 ? sqrt(b->tokens_sq / b->sequences) : 0, D = et_linear_eval(&op->k, b);
        if (l <= 0 || D <= 0) return 0;
        /* a row's live keys (l / 2 under a causal mask, a windowed layer's window) and the keys a block of
         * rows runs through (l, or a window and its block: a short sequence to the kernel) */
        const double live = op->window_keys > 0 ? fmin(op->window_keys, l / 2) : l / 2,
                     keys = op->window_keys > 0 ? fmin(l, op->window_keys + op->tile_keys) : l,
                     computed = live / (live + op->tile_keys); /* 1 without blocks wasted (unfused) */
        /* products of l x keys x D per head and sequence: heads x sequences of them in one batched kernel */
        double products = flops / (2 * l * keys * D);
        /* attention's products stay in bf16 under FP8 and FP4 training; a fused kernel at the profile's
         * measured efficiency where it has one (the sequence's small-dimension term only), else as batched
         * GEMMs */
        const et_precision q = et_precision_quantized(p) ? ET_BF16 : p;
        /* cuDNN's kernel at its own measured rate where the profile has one, else FlashAttention 2's */
        const double fused_efficiency = op->cudnn_kernel && d->cudnn_attention_efficiency > 0
                                            ? d->cudnn_attention_efficiency
                                            : d->flash_attention_efficiency;
        if (op->fused && fused_efficiency > 0)
            rate = d->peak_flops[q] * fused_efficiency * (op->fused_rate > 0 ? op->fused_rate : 1) * keys /
                   (keys + d->flash_half_len) * computed; /* live keys a row over those its blocks compute */
        else
            rate = et_gemm_peak(d, q) * et_gemm_batched_efficiency(d, floor(products + 0.5), l, keys, D) *
                   d->attention_products_efficiency * computed;
        break;
    }
    case ET_OP_OPTIMIZER:
        /* one fused pass whose square roots and divisions are instructions of that pass (counted in its
         * FLOPs), not the polynomials the special-function rate stands for */
        rate = d->optimizer_flops * d->memory_efficiency;
        break;
    default:
        rate = d->vector_flops * d->memory_efficiency;
        break;
    }
    /* a tensor-train op: each contraction a product of its own shape, at the dimension terms (no one grid) */
    const double t = stepwise ? op->step_repeats * op_steps_time(op, b, d, p)
                              : et_roofline_time(d, rate, flops, special, bytes, cold, footprint, kernels);
    const double copies =
        d->tensor_train_layout_copies ? et_stream_time(d, et_linear_eval(&op->copy_bytes, b)) : 0;
    return (t + copies) * op->time_scale;
}
