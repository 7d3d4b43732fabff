#include "phase_time.h"

#include <math.h>
#include <string.h>

#include "moe.h"
#include "schedule.h"

double et_bucket_comm_time(const et_scenario *s, const et_comm_group *dp, double bytes, et_coll_algo *chosen)
{
    if (et_scenario_reduce_scatters_gradients(s)) {
        if (chosen) *chosen = ET_COLL_RING;
        return et_ring_reduce_scatter_time(dp, bytes);
    }
    return et_allreduce_time(dp, s->parallel.allreduce, bytes, chosen);
}

et_comm_group et_bucket_group(const et_scenario *s, const et_bucket *bucket, const et_comm_group *dp)
{
    return bucket->expert && s->parallel.expert > 1 ? et_ep_data_group(s) : *dp;
}

double et_bucket_clip_time(const et_scenario *s, double bytes)
{
    return et_kernel_time(&s->cluster.device, ET_FP32, 0, 3 * bytes / et_precision_bytes(s->precision),
                          3 * bytes, 0, 0, 0);
}

double et_tp_comm_time(const et_comm_group *tp, et_op_kind kind, double bytes)
{
    switch (kind) {
    case ET_OP_TP_ALLGATHER:
        return et_ring_allgather_time(tp, bytes);
    case ET_OP_TP_REDUCE_SCATTER:
        return et_ring_reduce_scatter_time(tp, bytes);
    default:
        return et_ring_allreduce_time(tp, bytes);
    }
}

/* Op j's compute seconds: its class's at the last timed shape, or from the cost model (c NULL). */
static double op_compute(const et_scenario *s, const et_graph *g, int j, const et_batch_shape *b,
                         const et_op_classes *c)
{
    return c ? c->class_time[c->class_of[j]] : et_op_time(&g->ops[j], b, &s->cluster.device, s->precision);
}

double et_overlap_blocking(double comm, double gemm, double taken, double sms, bool margin)
{
    const double share = sms > 0 && taken > 0 ? fmin(taken, sms - 1) / sms : 0;
    if (margin) return fmax(comm, gemm / (1 - share)) - gemm;
    /* the product's blocks share the multiprocessors only while the collective runs */
    return comm * (1 - share) >= gemm ? comm - gemm : comm * share;
}

double et_beside_product_blocking(const et_scenario *s, const et_op *op, double comm, double gemm)
{
    const double sms = s->cluster.device.multiprocessors, k = s->software.overlap_sms;
    if (!s->parallel.tp_overlap) return et_overlap_blocking(comm, gemm, k, sms, false); /* NCCL, async */
    /* Transformer Engine's userbuffers (initialize_ub): the all-gathers before a product by ring exchange on
     * one SM, the product on every SM; the forward reduce-scatters pipelined and the backward ones and the
     * re-gather in bulk, on SMs taken from the product (set_sm_margin) */
    if (op->kind == ET_OP_TP_ALLGATHER && !op->regather)
        return et_overlap_blocking(comm, gemm, 1, sms, false);
    const double taken = op->phase == ET_PHASE_FORWARD ? k : s->software.bulk_overlap_sms;
    return et_overlap_blocking(comm, gemm, taken, sms, true);
}

double et_op_seconds_balanced(const et_scenario *s, const et_graph *g, int i, const et_batch_shape *b,
                              const et_op_classes *c, const et_comm_group *tp, double *tp_comm)
{
    const et_op *op = &g->ops[i];
    if (op->kind == ET_OP_CP_RING) {
        /* c - 1 steps, each hidden behind one chunk's share of the attention op before it */
        const int cp_ranks = s->parallel.context;
        et_comm_group cp = et_cp_group(s);
        double step = et_ring_step_time(&cp, et_linear_eval(&op->bytes, b)), chunk = 0;
        if (i > 0 && g->ops[i - 1].kind == ET_OP_ATTENTION) chunk = op_compute(s, g, i - 1, b, c) / cp_ranks;
        if (tp_comm) *tp_comm += (cp_ranks - 1) * fmax(0, step - chunk);
        return 0;
    }
    if (op->kind == ET_OP_EP_ALLTOALL) {
        /* the busiest expert rank receives imbalance x the mean rows */
        double t = et_moe_alltoall_time(s, et_linear_eval(&op->bytes, b)) * et_moe_imbalance(s, b);
        if (tp_comm) *tp_comm += t;
        return 0;
    }
    if (et_op_is_comm(op->kind)) {
        double t = et_tp_comm_time(tp, op->kind, et_linear_eval(&op->bytes, b));
        if (s->parallel.tp_overlap || op->async_comm) {
            /* beside the product it feeds (an all-gather: the next op) or drains (a reduce-scatter or
             * all-reduce: the previous op): what shows is what that product, slowed by the SMs the
             * collective takes, cannot hide */
            int j = op->kind == ET_OP_TP_ALLGATHER ? i + 1 : i - 1;
            if (j >= 0 && j < g->n_ops && g->ops[j].kind == ET_OP_GEMM && g->ops[j].phase == op->phase)
                t = et_beside_product_blocking(s, op, t, op_compute(s, g, j, b, c));
        }
        if (tp_comm) *tp_comm += t;
        return 0;
    }
    return op_compute(s, g, i, b, c);
}

static double op_seconds(const et_scenario *s, const et_graph *g, int i, const et_batch_shape *b,
                         const et_op_classes *c, const et_comm_group *tp, double *tp_comm)
{
    const double t = et_op_seconds_balanced(s, g, i, b, c, tp, tp_comm);
    /* every expert rank waits for the busiest at the next all-to-all */
    return g->ops[i].expert ? t * et_moe_imbalance(s, b) : t;
}

double et_phase_time(const et_scenario *s, const et_graph *g, et_phase phase, const et_batch_shape *b,
                     double *tp_comm)
{
    double t = 0, kernels = 0;
    et_comm_group tp = et_tp_group(s);
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].phase == phase) {
            t += op_seconds(s, g, i, b, NULL, &tp, tp_comm);
            kernels += et_op_launches(&g->ops[i], b);
        }
    return et_host_time(s, t, kernels);
}

void et_segment_add_op(const et_scenario *s, const et_graph *g, int i, const et_batch_shape *b,
                       const et_op_classes *c, const et_comm_group *tp, et_segment_time *t)
{
    double comm = 0;
    const double dt = et_op_seconds_balanced(s, g, i, b, c, tp, &comm);
    t->compute += dt;
    if (g->ops[i].expert) t->expert += dt;
    t->comm += comm;
    if (g->ops[i].kind == ET_OP_CP_RING) t->exchange += comm;
}

void et_segment_host_stretch(const et_scenario *s, const et_batch_shape *b, et_segment_time *t, int n,
                             double kernels)
{
    const double imbalance = et_moe_imbalance(s, b);
    double total = 0;
    for (int j = 0; j < n; j++)
        total += t[j].compute + t[j].expert * (imbalance - 1);
    const double bound = et_host_time(s, total, kernels);
    if (bound > total && total > 0)
        for (int j = 0; j < n; j++)
            t[j].compute *= bound / total, t[j].expert *= bound / total;
}

void et_phase_whole_time(const et_scenario *s, const et_op_classes *c, et_phase phase,
                         const et_batch_shape *b, et_segment_time *t)
{
    const et_graph *g = c->graph;
    const et_comm_group tp = et_tp_group(s);
    double kernels = 0;
    memset(t, 0, sizeof *t);
    /* its plain ops summed by class, the others one by one */
    t->compute = et_op_classes_plain(c, phase, &kernels);
    for (int j = 0; j < c->n_special[phase]; j++) {
        const int i = c->special[phase][j];
        et_segment_add_op(s, g, i, b, c, &tp, t);
        kernels += et_op_launches(&g->ops[i], b);
    }
    et_segment_host_stretch(s, b, t, 1, kernels);
}

double et_segment_seconds(const et_segment_time *t, double load)
{
    return t->compute + t->expert * (load - 1) + t->comm;
}

double et_phase_time_of(const et_scenario *s, const et_op_classes *c, et_phase phase, const et_batch_shape *b,
                        double *tp_comm)
{
    et_segment_time t;
    et_phase_whole_time(s, c, phase, b, &t);
    if (tp_comm) *tp_comm += t.comm;
    return t.compute + t.expert * (et_moe_imbalance(s, b) - 1);
}

double et_pipeline_send_time(const et_scenario *s, const et_batch_shape *b)
{
    if (s->parallel.pipeline <= 1) return 0;
    const et_cluster *c = &s->cluster;
    const int t = s->parallel.tensor;
    /* the activation crossing a stage boundary, and what one rank sends of it: sequence-parallel
     * activations are already split over the t tensor ranks; otherwise the stack sends 1/t and gathers it
     * over the tensor ranks on arrival, or sends it whole (software.pipeline_sends) */
    const double whole = b->tokens * s->model.hidden * et_precision_bytes(s->precision);
    const et_pipeline_sends mode =
        s->parallel.sequence_parallel || t == 1 ? ET_SENDS_SHARDED : s->software.pipeline_sends;
    const double bytes = mode == ET_SENDS_FULL ? whole : whole / t;
    int stage_gpus = t * s->parallel.pipeline;
    double bw = stage_gpus <= c->gpus_per_node
                    ? et_cluster_nvlink_bandwidth(c)
                    : c->nics_per_node * et_cluster_nic_bandwidth(c) / c->gpus_per_node;
    double lat = stage_gpus <= c->gpus_per_node ? c->intra_node_latency : c->nic_latency + c->switch_latency;
    double gather = 0;
    if (mode == ET_SENDS_SCATTER_GATHER) {
        const et_comm_group tp = et_tp_group(s);
        gather = et_ring_allgather_time(&tp, whole);
    }
    const double alone =
        (lat + bytes / bw + gather) *
        et_pipeline_sends_per_micro_batch(s->parallel.pipeline, s->parallel.virtual_pipeline);
    /* overlapped (software.p2p_overlap, interleaved schedules only): each transfer runs beside the next
     * chunk's pass, which outlasts it, and takes overlap_sms of the device's multiprocessors while it runs */
    if (s->software.p2p_overlap && s->parallel.virtual_pipeline > 1)
        return et_overlap_blocking(alone, INFINITY, s->software.overlap_sms,
                                   s->cluster.device.multiprocessors, false);
    return alone;
}

double et_host_time(const et_scenario *s, double device, double kernels)
{
    if (s->software.launch_blocking) return device + kernels * s->host.per_kernel;
    return et_host_bound(device, kernels, s->host.per_kernel);
}

double et_sync_time(const et_scenario *s)
{
    return s->host.per_kernel;
}

/* A memory-bound pass of `kernels` launches over `bytes`, `flops` of fp32 math. */
static double pass_time(const et_scenario *s, double flops, double bytes, double kernels)
{
    return et_host_time(s, et_kernel_time(&s->cluster.device, ET_FP32, 0, flops, bytes, 0, 0, 0), kernels);
}

double et_accumulate_time(const et_scenario *s, double elements, double tensors)
{
    const et_software *w = &s->software;
    const double e = et_precision_bytes(s->precision), a = w->accumulate_bytes;
    switch (w->grad_accumulation) {
    case ET_ACCUMULATE_ADD: /* read the new gradient and the sum, write the sum */
        return elements > 0 ? pass_time(s, elements, (e + 2 * a) * elements, tensors) : 0;
    case ET_ACCUMULATE_CAST_ADD: /* the cast (read e, write 4), then the fp32 add (read 8, write 4) */
        return elements > 0 ? pass_time(s, elements, (e + 4 + 12) * elements, 2 * tensors) : 0;
    default:
        return 0;
    }
}

double et_optimizer_stack_time(const et_scenario *s, double params, double shard, double quantized_shard)
{
    const et_software *w = &s->software;
    const double e = et_precision_bytes(s->precision);
    /* FP8 parameters: the new fp32 values' amax read before their cast (Megatron-Core's
     * quantize_param_shard; the cast itself writes a byte where the copy back wrote e) */
    const double amax = w->fp8_param_gather ? pass_time(s, 0, 4 * quantized_shard, 1) : 0;
    if (e >= 4 || w->optimizer == ET_OPTIMIZER_FUSED) return amax; /* fp32 training keeps one copy */
    /* the fp32 weights read again to write the 16-bit copy (the fused update writes it as it goes) */
    double bytes = 4 * shard, kernels = 1;
    if (w->optimizer == ET_OPTIMIZER_FP16_MASTER && w->accumulate_bytes < 4)
        bytes += (w->accumulate_bytes + 4) * params, kernels++; /* 16-bit gradients copied to fp32 */
    if (w->optimizer == ET_OPTIMIZER_BF16_SHARDS) bytes += (4 - e) * params, kernels++; /* norm over fp32 */
    return pass_time(s, 0, bytes, kernels) + amax;
}
