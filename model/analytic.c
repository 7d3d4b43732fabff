#include "analytic.h"

#include "op_classes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "moe.h"
#include "sampling.h"

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

/* Compute seconds of op i: given in op_time, or from the cost model when op_time is NULL. A tensor-parallel
 * all-reduce takes no compute time: its time is added to *tp_comm (when not NULL) instead. */
/* Op j's compute seconds: given, or from the cost model. */
static double op_compute(const et_scenario *s, const et_graph *g, int j, const et_batch_shape *b,
                         const et_op_classes *c)
{
    return c ? c->class_time[c->class_of[j]] : et_op_time(&g->ops[j], b, &s->cluster.device, s->precision);
}

/* op_seconds for an expert op at the rank's own (balanced) rows: what the simulator scales by each rank's
 * drawn load. */
static double balanced_op_seconds(const et_scenario *s, const et_graph *g, int i, const et_batch_shape *b,
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
        if (s->parallel.tp_overlap) {
            /* split into chunks pipelined with the product it feeds (an all-gather: the next op) or drains
             * (a reduce-scatter or all-reduce: the previous op), only what that product cannot hide shows */
            int j = op->kind == ET_OP_TP_ALLGATHER ? i + 1 : i - 1;
            if (j >= 0 && j < g->n_ops && g->ops[j].kind == ET_OP_GEMM && g->ops[j].phase == op->phase) {
                double gemm = op_compute(s, g, j, b, c);
                t = t > gemm ? t - gemm : 0;
            }
        }
        if (tp_comm) *tp_comm += t;
        return 0;
    }
    return op_compute(s, g, i, b, c);
}

static double op_seconds(const et_scenario *s, const et_graph *g, int i, const et_batch_shape *b,
                         const et_op_classes *c, const et_comm_group *tp, double *tp_comm)
{
    const double t = balanced_op_seconds(s, g, i, b, c, tp, tp_comm);
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
    return et_host_bound(t, kernels, s->host.per_kernel);
}

double et_phase_time_of(const et_scenario *s, const et_op_classes *c, et_phase phase, const et_batch_shape *b,
                        double *tp_comm)
{
    double kernels = 0, t = et_op_classes_plain(c, phase, &kernels);
    et_comm_group tp = et_tp_group(s);
    for (int j = 0; j < c->n_special[phase]; j++) {
        const int i = c->special[phase][j];
        t += op_seconds(s, c->graph, i, b, c, &tp, tp_comm);
        kernels += et_op_launches(&c->graph->ops[i], b);
    }
    return et_host_bound(t, kernels, s->host.per_kernel);
}

double et_pipeline_send_time(const et_scenario *s, const et_batch_shape *b)
{
    if (s->parallel.pipeline <= 1) return 0;
    const et_cluster *c = &s->cluster;
    double bytes = b->tokens * s->model.hidden * et_precision_bytes(s->precision) / s->parallel.tensor;
    int stage_gpus = s->parallel.tensor * s->parallel.pipeline;
    double bw = stage_gpus <= c->gpus_per_node
                    ? et_cluster_nvlink_bandwidth(c)
                    : c->nics_per_node * et_cluster_nic_bandwidth(c) / c->gpus_per_node;
    double lat = stage_gpus <= c->gpus_per_node ? c->intra_node_latency : c->nic_latency + c->switch_latency;
    return (lat + bytes / bw) *
           et_pipeline_sends_per_micro_batch(s->parallel.pipeline, s->parallel.virtual_pipeline);
}

/* The plan search estimates tens of thousands of plans whose graphs repeat (they differ in micro-batch,
 * ZeRO stage, GPU count far more often than in what shapes a graph). While ids are off (et_graph_set_ids,
 * the search's threads), the last GRAPH_CACHE graphs built by this thread are kept and handed out again for
 * the same model and graph options (compared byte for byte: a difference only costs a rebuild). */
#define GRAPH_CACHE 6 /* a pipeline's stages and the whole model, for several plans */
typedef struct graph_key {
    et_model_config model;
    et_graph_options options; /* its value fields (pointers cleared); the pointers' contents follow */
    et_method method;
} graph_key;
static _Thread_local struct {
    graph_key key;
    int *layers_per_stage;   /* options.pipeline entries, or NULL (an even split) */
    unsigned long long hash; /* of the key and the layer split, compared first */
    et_graph graph;
    et_op_classes classes; /* of `graph`: every op's time from one evaluation per distinct op */
    int has_classes;
    et_linear flops; /* forward + backward FLOPs of one micro-batch, summed once (graph_flops) */
    int valid;
    unsigned long long used;
} graph_cache[GRAPH_CACHE];
static _Thread_local unsigned long long graph_clock;

static unsigned long long hash_bytes(unsigned long long h, const void *data, size_t n)
{
    const unsigned char *b = data;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        unsigned long long w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* Forward + backward FLOPs of one micro-batch of a graph, as one linear form in the batch shape. */
static et_linear graph_flops(const et_graph *g)
{
    et_linear f = {0};
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].phase != ET_PHASE_OPTIMIZER) {
            const et_linear *x = &g->ops[i].flops;
            f.fixed += x->fixed, f.per_sequence += x->per_sequence, f.per_token += x->per_token;
            f.per_token_sq += x->per_token_sq, f.per_prediction += x->per_prediction;
        }
    return f;
}

/* A graph for (model, options): *owned 1 when the caller must free it, 0 when it is the cache's; with
 * `classes`, the cached graph's op classes (NULL when there are none). */
static int graph_for(const et_model_config *model, const et_graph_options *o, et_graph *g, int *owned,
                     et_error *err, et_op_classes **classes, et_linear *flops)
{
    *owned = 1;
    if (classes) *classes = NULL;
    if (et_graph_ids_on() || (o->op_scales && o->op_scales->n)) {
        if (et_graph_build(model, o, g, err)) return -1;
        if (flops) *flops = graph_flops(g);
        return 0;
    }
    graph_key key;
    memset(&key, 0, sizeof key);
    memcpy(&key.model, model, sizeof key.model);
    /* field by field: a struct returned by value may carry any bytes in its padding */
    key.options.tensor = o->tensor, key.options.pipeline = o->pipeline, key.options.stage = o->stage;
    key.options.precision = o->precision, key.options.recompute = o->recompute;
    key.options.attention = o->attention, key.options.sequence_parallel = o->sequence_parallel;
    key.options.optimizer = o->optimizer, key.options.optimizer_shards = o->optimizer_shards;
    key.options.clip_global = o->clip_global, key.options.tokens_hint = o->tokens_hint;
    key.options.tt_rank = o->tt_rank;
    key.options.expert = o->expert, key.options.context = o->context, key.options.galore = o->galore;
    if (o->method) memcpy(&key.method, o->method, sizeof key.method);
    const size_t lps_bytes = o->layers_per_stage ? (size_t)o->pipeline * sizeof(int) : 0;
    unsigned long long hash = hash_bytes(1469598103934665603ULL, &key, sizeof key);
    if (lps_bytes) hash = hash_bytes(hash, o->layers_per_stage, lps_bytes);
    int oldest = 0;
    for (int i = 0; i < GRAPH_CACHE; i++) {
        if (graph_cache[i].valid && graph_cache[i].hash == hash &&
            !memcmp(&graph_cache[i].key, &key, sizeof key) &&
            !graph_cache[i].layers_per_stage == !lps_bytes &&
            (!lps_bytes || !memcmp(graph_cache[i].layers_per_stage, o->layers_per_stage, lps_bytes))) {
            graph_cache[i].used = ++graph_clock;
            *g = graph_cache[i].graph;
            *owned = 0;
            if (classes && graph_cache[i].has_classes) *classes = &graph_cache[i].classes;
            if (flops) *flops = graph_cache[i].flops;
            return 0;
        }
        if (!graph_cache[i].valid || graph_cache[i].used < graph_cache[oldest].used) oldest = i;
    }
    int *lps = lps_bytes ? malloc(lps_bytes) : NULL;
    if (lps_bytes && !lps) { /* out of memory for the cache: the caller owns this graph */
        if (et_graph_build(model, o, g, err)) return -1;
        if (flops) *flops = graph_flops(g);
        return 0;
    }
    if (lps) memcpy(lps, o->layers_per_stage, lps_bytes);
    if (graph_cache[oldest].valid) { /* its graph's buffers are reused */
        if (graph_cache[oldest].has_classes) et_op_classes_free(&graph_cache[oldest].classes);
        free(graph_cache[oldest].layers_per_stage);
        graph_cache[oldest].layers_per_stage = NULL;
        graph_cache[oldest].valid = 0;
    }
    if (et_graph_rebuild(model, o, &graph_cache[oldest].graph, err)) {
        free(lps);
        return -1;
    }
    *g = graph_cache[oldest].graph;
    graph_cache[oldest].key = key;
    graph_cache[oldest].layers_per_stage = lps;
    graph_cache[oldest].hash = hash;
    graph_cache[oldest].flops = graph_flops(g);
    if (flops) *flops = graph_cache[oldest].flops;
    graph_cache[oldest].valid = 1;
    graph_cache[oldest].used = ++graph_clock;
    /* the classes point at the cache's copy of the graph, which stays put */
    graph_cache[oldest].has_classes =
        !et_op_classes_build(&graph_cache[oldest].graph, &graph_cache[oldest].classes);
    if (classes && graph_cache[oldest].has_classes) *classes = &graph_cache[oldest].classes;
    *owned = 0;
    return 0;
}

void et_analytic_release_cache(void)
{
    for (int i = 0; i < GRAPH_CACHE; i++) {
        if (graph_cache[i].valid && graph_cache[i].has_classes) et_op_classes_free(&graph_cache[i].classes);
        et_graph_free(&graph_cache[i].graph); /* an invalid slot may hold buffers to reuse */
        free(graph_cache[i].layers_per_stage);
        graph_cache[i].layers_per_stage = NULL;
        graph_cache[i].valid = 0;
    }
}

/* A stage's graph with its op classes timed at shape b: the cache's, or built here (stage_graph_release
 * frees what was). */
typedef struct stage_graph {
    et_graph g;
    int owned;
    et_op_classes *c, own;
} stage_graph;

static void stage_graph_release(stage_graph *x)
{
    if (x->c == &x->own) et_op_classes_free(&x->own);
    if (x->owned) et_graph_free(&x->g);
}

static int stage_graph_get(const et_scenario *s, const et_graph_options *o, const et_batch_shape *b,
                           stage_graph *x, et_error *err)
{
    memset(x, 0, sizeof *x);
    if (graph_for(&s->model, o, &x->g, &x->owned, err, &x->c, NULL)) return -1;
    if (!x->c) {
        if (et_op_classes_build(&x->g, &x->own)) {
            stage_graph_release(x);
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                     "out of memory grouping the ops");
        }
        x->c = &x->own;
    }
    et_op_classes_times(x->c, b, &s->cluster.device, s->precision, NULL);
    return 0;
}

/* The whole model on one GPU, without recomputation: its parameters and its model FLOPs. */
static int whole_model_graph(const et_scenario *s, et_graph *g, int *owned, et_linear *flops, et_error *err)
{
    et_graph_options o = et_scenario_graph_options(s, 0);
    o.tensor = 1;
    o.pipeline = 1;
    o.layers_per_stage = NULL;
    o.recompute = ET_RECOMPUTE_NONE;
    o.sequence_parallel = false;
    o.optimizer_shards = 1;
    o.expert = 1; /* every expert counted once */
    /* model FLOPs count the routed rows, not a fixed capacity's padding */
    et_model_config model = s->model;
    model.moe.capacity_factor = 0;
    return graph_for(&model, &o, g, owned, err, NULL, flops);
}

double et_backward_segments_of(const et_scenario *s, const et_op_classes *c, const et_bucket *buckets, int nb,
                               const et_batch_shape *b, double *seg, double *tp_comm)
{
    const et_graph *g = c->graph;
    double t = 0, total = 0, kernels = 0;
    int k = 0;
    et_comm_group tp = et_tp_group(s);
    for (int i = 0; i < g->n_ops; i++) {
        if (c->phase_of[i] != ET_PHASE_BACKWARD) continue;
        double dt;
        if (c->plain[i]) { /* the compact arrays only: a walk over the large ops is most of its cost */
            dt = c->class_time[c->class_of[i]];
            kernels += c->class_kernels[c->class_of[i]];
        } else {
            dt = op_seconds(s, g, i, b, c, &tp, tp_comm);
            kernels += et_op_launches(&g->ops[i], b);
        }
        t += dt;
        total += dt;
        while (k < nb && buckets[k].ready_op == i) {
            seg[k++] = t;
            t = 0;
        }
    }
    while (k < nb)
        seg[k++] = 0;
    seg[nb] = t;
    /* a host slower than the device stretches backward evenly */
    double bound = et_host_bound(total, kernels, s->host.per_kernel);
    if (bound > total && total > 0)
        for (k = 0; k <= nb; k++)
            seg[k] *= bound / total;
    return bound;
}

int et_phase_cuts(const et_scenario *s, const et_op_classes *c, et_phase phase, const et_bucket *buckets,
                  int nb, const et_batch_shape *b, et_phase_cut *cut, int max)
{
    const et_graph *g = c->graph;
    double compute = 0, expert = 0, total = 0, kernels = 0, tp_comm = 0;
    int n = 0, k = 0;
    et_comm_group tp = et_tp_group(s);
    for (int i = 0; i < g->n_ops; i++) {
        const et_op *op = &g->ops[i];
        if (op->phase != phase) continue;
        if (op->kind == ET_OP_EP_ALLTOALL) {
            if (n == max) return -1;
            cut[n++] = (et_phase_cut){.op = i, .bucket = -1, .compute = compute, .expert = expert};
            compute = expert = 0;
            continue;
        }
        double before = tp_comm;
        double dt = balanced_op_seconds(s, g, i, b, c, &tp, &tp_comm) + (tp_comm - before);
        kernels += et_op_launches(&g->ops[i], b);
        compute += dt;
        total += dt;
        if (op->expert) expert += dt;
        while (buckets && k < nb && buckets[k].ready_op == i) {
            if (n == max) return -1;
            cut[n++] = (et_phase_cut){.op = -1, .bucket = k++, .compute = compute, .expert = expert};
            compute = expert = 0;
        }
    }
    while (buckets && k < nb) {
        if (n == max) return -1;
        cut[n++] = (et_phase_cut){.op = -1, .bucket = k++};
    }
    if (n == max) return -1;
    cut[n++] = (et_phase_cut){.op = -1, .bucket = -1, .compute = compute, .expert = expert};
    /* a host slower than the device stretches the phase evenly */
    double bound = et_host_bound(total, kernels, s->host.per_kernel);
    if (bound > total && total > 0)
        for (int j = 0; j < n; j++)
            cut[j].compute *= bound / total, cut[j].expert *= bound / total;
    return n;
}

/* Lays the last micro-batch's backward out on the compute stream and the bucket collectives on the
 * communication stream; returns the exposed communication, or -1 when out of memory. */
static double overlap_buckets(const et_scenario *s, const et_op_classes *classes, const et_batch_shape *b,
                              const et_bucket *buckets, int nb, const et_comm_group *dp, double *comm_total,
                              double *clip_total)
{
    int per_bucket_clip = s->optimizer.clip == ET_CLIP_PER_BUCKET;
    double *seg = malloc(((size_t)nb + 1) * sizeof *seg);
    if (!seg) return -1; /* the caller reports it: never a plausible 0 */
    et_backward_segments_of(s, classes, buckets, nb, b, seg, NULL);
    double t = 0, comm_end = 0, sum = 0, clip = 0;
    /* the buckets of a stage repeat a layer's few sizes: each size's time is computed once */
    enum { MEMO = 16 };
    double memo_bytes[MEMO], memo_time[MEMO];
    bool memo_expert[MEMO];
    for (int i = 0; i < MEMO; i++)
        memo_bytes[i] = -1;
    for (int k = 0; k < nb; k++) {
        t += seg[k];
        if (per_bucket_clip) {
            double c = et_bucket_clip_time(s, buckets[k].bytes);
            t += c;
            clip += c;
        }
        unsigned long long h;
        memcpy(&h, &buckets[k].bytes, sizeof h);
        const int slot =
            (int)((h ^ h >> 29 ^ (unsigned long long)buckets[k].expert) * 0x9e3779b97f4a7c15ULL >> 60);
        if (memo_bytes[slot] != buckets[k].bytes || memo_expert[slot] != buckets[k].expert) {
            const et_comm_group group = et_bucket_group(s, &buckets[k], dp);
            memo_bytes[slot] = buckets[k].bytes;
            memo_expert[slot] = buckets[k].expert;
            memo_time[slot] = et_bucket_comm_time(s, &group, buckets[k].bytes, NULL);
        }
        const double ct = memo_time[slot];
        sum += ct;
        comm_end = fmax(t, comm_end) + ct;
    }
    t += seg[nb];
    free(seg);
    *comm_total = sum;
    *clip_total = clip;
    if (!s->parallel.overlap) return sum;
    return fmax(0, comm_end - t);
}

/* Forward + backward compute of one micro-batch on graph g (no communication), in one pass. */
/* One micro-batch's compute (forward and backward) from the time of every op. */
static double micro_compute(const et_graph *g, const double *op_time)
{
    double t = 0;
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].phase != ET_PHASE_OPTIMIZER) t += op_time[i]; /* TP all-reduces cost 0 here */
    return t;
}

/* Per-rank compute seconds (all micro-batches) of one sampled step; raises *largest component-wise. */
static int rank_loads(const et_scenario *s, et_op_classes *c, double *op_time, const et_sampler *sampler,
                      et_batch_shape *shapes, int step, double *loads, et_batch_shape *largest)
{
    const int dp = s->parallel.data, m = (int)s->batch.grad_accum;
    for (int r = 0; r < dp; r++)
        loads[r] = 0;
    for (int i = 0; i < m; i++) {
        if (et_sampler_shapes(sampler, &s->model, s->data.unpadded, step * m + i, shapes)) return -1;
        for (int r = 0; r < dp; r++) {
            shapes[r] = et_batch_context_share(s, shapes[r]);
            et_op_classes_times(c, &shapes[r], &s->cluster.device, s->precision, op_time);
            loads[r] += micro_compute(c->graph, op_time);
            if (largest) {
                largest->sequences = fmax(largest->sequences, shapes[r].sequences);
                largest->tokens = fmax(largest->tokens, shapes[r].tokens);
                largest->tokens_sq = fmax(largest->tokens_sq, shapes[r].tokens_sq);
                largest->predictions = fmax(largest->predictions, shapes[r].predictions);
            }
        }
    }
    return 0;
}

int et_straggler_factor(const et_scenario *s, const et_graph *g, int steps, double *factor,
                        et_batch_shape *largest)
{
    const int dp = s->parallel.data;
    et_sampler sampler;
    et_error err;
    if (et_sampler_init(&sampler, &s->data.lengths, &s->data.sampling, (int)s->batch.local, dp,
                        s->simulation.seed, NULL, "$.data.sampling", &err))
        return -1;
    double *loads = malloc((size_t)dp * sizeof *loads), sum = 0;
    et_batch_shape *shapes = malloc((size_t)dp * sizeof *shapes);
    et_op_classes classes;
    double *op_time = malloc(((size_t)g->n_ops + 1) * sizeof *op_time);
    int rc = loads && shapes && op_time && !et_op_classes_build(g, &classes) ? 0 : -1;
    for (int k = 0; k < steps && !rc; k++) {
        rc = rank_loads(s, &classes, op_time, &sampler, shapes, k, loads, largest);
        double mx = 0, mean = 0;
        for (int r = 0; r < dp && !rc; r++) {
            mx = fmax(mx, loads[r]);
            mean += loads[r] / dp;
        }
        sum += mean > 0 ? mx / mean : 1;
    }
    free(loads);
    free(shapes);
    free(op_time);
    et_op_classes_free(&classes);
    et_sampler_free(&sampler);
    *factor = steps > 0 ? sum / steps : 1;
    return rc;
}

/* Sampled steps behind the analytic straggler factor and the activation sizing. */
#define ET_STRAGGLER_STEPS 16

/* One pipeline stage's part of the estimate (memory always, the largest kept; times when it is the busiest
 * so far by *best_stage_time, a micro-batch's compute and blocking communication): its graph, classes,
 * buckets, overlap of the gradient collectives, optimizer and parameter gathers. */
static int estimate_stage(const et_scenario *s, int stage, const et_batch_shape *b, const et_comm_group *dp,
                          double *best_stage_time, et_estimate *out, et_error *err)
{
    const double m = (double)s->batch.grad_accum;
    const int pp = s->parallel.pipeline;
    et_graph_options o = et_scenario_graph_options(s, stage);
    /* a twin of an earlier stage has its times, and no more memory: fewer micro-batches in flight */
    if (et_graph_stage_twin(&s->model, &o) != stage) return 0;
    stage_graph x;
    if (stage_graph_get(s, &o, b, &x, err)) return -1;
    const et_graph g = x.g;
    const et_op_classes *classes = x.c;
    const et_batch_shape worst = et_batch_worst_case(s);
    et_memory mem = et_memory_estimate(s, &g, &worst);
    if (mem.total > out->memory.total) out->memory = mem;
    double tp_f = 0, tp_b = 0;
    double F = et_phase_time_of(s, classes, ET_PHASE_FORWARD, b, &tp_f);
    double Bw = et_phase_time_of(s, classes, ET_PHASE_BACKWARD, b, &tp_b);
    if (F + Bw + tp_f + tp_b <= *best_stage_time) {
        stage_graph_release(&x);
        return 0;
    }
    *best_stage_time = F + Bw + tp_f + tp_b;
    out->busiest_stage = stage;
    out->params_per_gpu = g.param_count;
    out->galore_projected = g.galore_projected;
    et_bucket *buckets;
    int nb;
    double ge = et_precision_bytes(s->precision);
    if (et_buckets_build(&g, s->parallel.bucket_bytes, ge, &buckets, &nb, err)) {
        stage_graph_release(&x);
        return -1;
    }
    const int v = s->parallel.virtual_pipeline;
    double send = et_pipeline_send_time(s, b);
    out->forward = m * F;
    out->backward = m * Bw;
    out->tp_comm = m * (tp_f + tp_b);
    /* the experts' all-to-alls and ring attention's exposed exchanges, counted in the blocking
     * communication above: shown apart */
    out->ep_comm = out->cp_comm = 0;
    const et_comm_group tp = et_tp_group(s);
    for (int ph = ET_PHASE_FORWARD; ph <= ET_PHASE_BACKWARD; ph++)
        for (int j = 0; j < classes->n_special[ph]; j++) {
            const int i = classes->special[ph][j];
            if (g.ops[i].kind == ET_OP_EP_ALLTOALL || g.ops[i].kind == ET_OP_CP_RING)
                op_seconds(s, &g, i, b, classes, &tp,
                           g.ops[i].kind == ET_OP_CP_RING ? &out->cp_comm : &out->ep_comm);
        }
    out->ep_comm *= m;
    out->cp_comm *= m;
    out->tp_comm = fmax(0, out->tp_comm - out->ep_comm - out->cp_comm);
    out->pp_comm = m * 2 * send;
    out->bubble = et_pipeline_bubble_micro_batches(pp, v) * (F + Bw + tp_f + tp_b + 2 * send);
    double comm_total = 0, clip = 0;
    out->dp_comm_exposed = et_scenario_grad_ranks(s) > 1
                               ? overlap_buckets(s, classes, b, buckets, nb, dp, &comm_total, &clip)
                               : 0;
    if (out->dp_comm_exposed < 0) {
        free(buckets);
        stage_graph_release(&x);
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of memory laying out the gradient buckets");
    }
    if (et_scenario_grad_ranks(s) <= 1 && s->optimizer.clip == ET_CLIP_PER_BUCKET)
        for (int k = 0; k < nb; k++)
            clip += et_bucket_clip_time(s, buckets[k].bytes);
    out->dp_comm = et_scenario_grad_ranks(s) > 1 ? comm_total : 0;
    out->clip = clip;
    out->n_buckets = nb;
    out->bucket_bytes_max = 0;
    for (int k = 0; k < nb; k++)
        if (buckets[k].bytes > out->bucket_bytes_max) out->bucket_bytes_max = buckets[k].bytes;
    et_bucket_comm_time(s, dp, out->bucket_bytes_max, &out->algo);
    out->optimizer = et_phase_time_of(s, classes, ET_PHASE_OPTIMIZER, b, NULL);
    if (et_scenario_grad_ranks(s) > 1 && et_scenario_gathers_parameters(s))
        out->zero_gather = et_ring_allgather_time(dp, g.param_count * ge);
    if (s->parallel.zero_stage >= 3) {
        /* parameters gathered again before forward and backward, prefetched under compute */
        double gathers = 2 * m * et_ring_allgather_time(dp, g.param_count * ge);
        out->dp_comm += gathers;
        out->dp_comm_exposed += fmax(0, gathers - (out->forward + out->backward));
    }
    free(buckets);
    stage_graph_release(&x);
    return 0;
}

static int estimate_phase(const et_scenario *s, et_estimate *out, et_error *err)
{
    memset(out, 0, sizeof *out);
    const et_batch_shape b = et_batch_expected(s);
    const double m = (double)s->batch.grad_accum;
    const int pp = s->parallel.pipeline;
    const et_comm_group dp = et_dp_group(s);
    et_graph whole;
    int owned;
    et_linear whole_flops;
    if (whole_model_graph(s, &whole, &owned, &whole_flops, err)) return -1;
    out->params_total = whole.param_count;
    out->params_dense = whole.param_dense;
    const double micro_flops = et_linear_eval(&whole_flops, &b);
    if (owned) et_graph_free(&whole);
    /* balance of per-rank compute across the sampled batches, and the largest micro-batch */
    out->straggler_factor = 1;
    out->largest_batch = b;
    if (s->data.lengths.kind != ET_LENGTHS_FIXED &&
        (s->data.unpadded || s->data.sampling.scheme == ET_SAMPLING_PACKED)) {
        et_graph g0;
        et_graph_options o0 = et_scenario_graph_options(s, 0);
        if (graph_for(&s->model, &o0, &g0, &owned, err, NULL, NULL)) return -1;
        int rc = et_straggler_factor(s, &g0, ET_STRAGGLER_STEPS, &out->straggler_factor, &out->largest_batch);
        if (owned) et_graph_free(&g0);
        if (rc)
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                     "out of memory sampling batches");
    }
    double best_stage_time = -1;
    for (int stage = 0; stage < pp; stage++)
        if (estimate_stage(s, stage, &b, &dp, &best_stage_time, out, err)) return -1;
    if (s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE && et_scenario_grad_ranks(s) > 1)
        out->clip_allreduce = et_allreduce_time(&dp, ET_COLL_AUTO, 4, NULL);
    out->compute = out->forward + out->backward + out->clip + out->tp_comm + out->ep_comm + out->cp_comm +
                   out->pp_comm + out->bubble;
    out->step_time_balanced =
        out->compute + out->dp_comm_exposed + out->clip_allreduce + out->optimizer + out->zero_gather;
    /* the headline waits for the slowest rank, as every synchronous step does */
    out->straggler_delay = (out->straggler_factor - 1) * (out->forward + out->backward);
    out->step_time = out->step_time_balanced + out->straggler_delay;

    out->params_active = et_model_active_param_count(&s->model);
    out->moe_imbalance = et_moe_imbalance(s, &b);
    out->moe_dropped = et_moe_dropped_fraction(s, &b);
    double micro_batches = m * et_scenario_grad_ranks(s); /* per-rank shares of micro-batches */
    out->model_flops_per_step = micro_flops * micro_batches;
    out->tokens_per_step = b.tokens * micro_batches;
    out->flops_per_token = out->tokens_per_step > 0 ? out->model_flops_per_step / out->tokens_per_step : 0;
    int gpus = et_scenario_gpus(s);
    out->mfu =
        out->model_flops_per_step / (out->step_time * gpus * s->cluster.device.peak_flops[s->precision]);
    out->samples_per_second = s->batch.global / out->step_time;
    out->tokens_per_second = out->tokens_per_step / out->step_time;
    out->steps = s->target.steps;
    out->train_time = out->steps * out->step_time;
    if (s->target.eval_interval_samples > 0 && s->target.eval_samples > 0) {
        double evals = floor(s->target.samples / s->target.eval_interval_samples);
        double per_gpu_batches = ceil(s->target.eval_samples / (double)(s->batch.local * s->parallel.data));
        out->eval_time = evals * per_gpu_batches * out->forward / m;
    }
    out->time_to_train = out->train_time + out->eval_time;
    return 0;
}

/* Failures and checkpoints over the run (model/resilience.h): the checkpoint holds the whole model's
 * weights and optimizer state, written by every node. */
static void add_goodput(const et_scenario *s, et_estimate *out)
{
    const double bytes = et_checkpoint_bytes(out->params_total, et_precision_bytes(s->precision));
    et_goodput_estimate(&s->resilience, et_scenario_gpus(s), s->cluster.nodes, bytes, out->time_to_train,
                        &out->goodput);
    out->time_to_train_with_failures = out->time_to_train * out->goodput.factor;
    /* energy: every GPU draws its busy power while its stage computes and its idle power for the rest of
     * the step (communication exposed, bubble, waits); evaluations compute; failures repeat work at the
     * step's mix; the facility adds its PUE (docs/cost-model.md, "Energy") */
    const et_device_profile *d = &s->cluster.device;
    const double gpus = et_scenario_gpus(s), busy = out->forward + out->backward + out->clip + out->optimizer;
    const double idle = out->step_time > busy ? out->step_time - busy : 0;
    out->energy_step_j = gpus * (d->power_busy_w * busy + d->power_idle_w * idle);
    const double run_j = out->train_time / (out->step_time > 0 ? out->step_time : 1) * out->energy_step_j +
                         gpus * d->power_busy_w * out->eval_time;
    out->energy_run_kwh = run_j * out->goodput.factor * s->energy.pue / 3.6e6;
    out->co2_kg = out->energy_run_kwh * s->energy.carbon_g_per_kwh / 1000;
}

int et_analytic_estimate(const et_scenario *s, et_estimate *out, et_error *err)
{
    const et_method *m = &s->method;
    if (m->kind != ET_METHOD_TENSOR_TRAIN || m->n_phases <= 1) {
        if (estimate_phase(s, out, err)) return -1;
        out->n_phases = 1;
        out->phases[0] = (et_phase_estimate){0, m->tt_rank, out->step_time, out->steps, out->params_total};
        add_goodput(s, out);
        return 0;
    }
    /* rank schedule: every phase is its own model; time-to-train adds the phases up */
    et_scenario phase = *s;
    double train = 0;
    long long done = 0;
    et_estimate first;
    for (int i = 0; i < m->n_phases; i++) {
        phase.method.tt_rank = m->phases[i].rank;
        et_estimate e;
        if (estimate_phase(&phase, &e, err)) return -1;
        if (i == 0) first = e;
        double until = i + 1 < m->n_phases ? m->phases[i + 1].from : 1.0;
        long long steps =
            i + 1 < m->n_phases ? (long long)llround(until * s->target.steps) - done : s->target.steps - done;
        done += steps;
        first.phases[i] =
            (et_phase_estimate){m->phases[i].from, m->phases[i].rank, e.step_time, steps, e.params_total};
        train += steps * e.step_time;
    }
    first.n_phases = m->n_phases;
    first.train_time = train;
    first.time_to_train = train + first.eval_time;
    *out = first;
    add_goodput(s, out);
    return 0;
}

double et_gpu_hours(const et_scenario *s, double seconds)
{
    return seconds * et_scenario_gpus(s) / 3600;
}

double et_tflops_per_gpu(const et_scenario *s, double flops_per_step, double step_s)
{
    return step_s > 0 ? flops_per_step / step_s / et_scenario_gpus(s) / 1e12 : 0;
}
