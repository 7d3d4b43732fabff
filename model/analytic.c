#include "analytic.h"

#include "op_classes.h"
#include "phase_time.h"
#include "step_schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "moe.h"
#include "run_timing.h"
#include "sampling.h"

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

/* Forward + backward model FLOPs of one micro-batch of a graph (et_op_model_share), as one linear form in
 * the batch shape. */
static et_linear graph_flops(const et_graph *g)
{
    et_linear f = {0};
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].phase != ET_PHASE_OPTIMIZER) {
            const et_linear *x = &g->ops[i].flops;
            const double s = et_op_model_share(g, &g->ops[i]);
            f.fixed += s * x->fixed, f.per_sequence += s * x->per_sequence, f.per_token += s * x->per_token;
            f.per_token_sq += s * x->per_token_sq, f.per_prediction += s * x->per_prediction;
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
    key.options.expert_optimizer_shards = o->expert_optimizer_shards;
    key.options.scaling = o->scaling, key.options.recompute_modules = o->recompute_modules;
    key.options.bf16_first = o->bf16_first, key.options.bf16_last = o->bf16_last;
    key.options.recompute_early_stop = o->recompute_early_stop;
    key.options.recompute_layers = o->recompute_layers, key.options.virtual_pipeline = o->virtual_pipeline;
    key.options.clip_global = o->clip_global, key.options.tokens_hint = o->tokens_hint;
    key.options.loss_fp32 = o->loss_fp32;
    key.options.flash_rate = o->flash_rate, key.options.attention_unpad = o->attention_unpad;
    key.options.attention_cudnn = o->attention_cudnn;
    key.options.residual_kernels = o->residual_kernels, key.options.tp_async = o->tp_async;
    key.options.bias_kernels = o->bias_kernels, key.options.expert_launches = o->expert_launches;
    key.options.moe_sort_chunks = o->moe_sort_chunks;
    key.options.tt_rank = o->tt_rank;
    key.options.expert = o->expert, key.options.expert_tensor = o->expert_tensor;
    key.options.context = o->context, key.options.galore = o->galore;
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
    o.optimizer_shards = 1, o.expert_optimizer_shards = 1;
    o.expert = 1; /* every expert counted once */
    /* model FLOPs count the routed rows, not a fixed capacity's padding */
    et_model_config model = s->model;
    model.moe.capacity_factor = 0;
    return graph_for(&model, &o, g, owned, err, NULL, flops);
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

/* The seconds of bucket k's collective; the buckets of a stage repeat a layer's few sizes, so each size's
 * time is computed once. */
typedef struct bucket_memo {
    double bytes[16], time[16];
    bool expert[16];
} bucket_memo;

static double bucket_seconds(const et_scenario *s, const et_bucket *bucket, const et_comm_group *dp,
                             bucket_memo *memo)
{
    unsigned long long h;
    memcpy(&h, &bucket->bytes, sizeof h);
    const int slot = (int)((h ^ h >> 29 ^ (unsigned long long)bucket->expert) * 0x9e3779b97f4a7c15ULL >> 60);
    if (memo->bytes[slot] != bucket->bytes || memo->expert[slot] != bucket->expert) {
        const et_comm_group group = et_bucket_group(s, bucket, dp);
        memo->bytes[slot] = bucket->bytes;
        memo->expert[slot] = bucket->expert;
        memo->time[slot] = et_bucket_comm_time(s, &group, bucket->bytes, NULL);
    }
    return memo->time[slot];
}

/* A pass's items on the compute stream at the expected shape (imbalance: the experts' expected load):
 * each part of the step's breakdown into *sum, the clock, and each bucket's ready time. */
static void play_pass(const et_scenario *s, const et_step_schedule *q, et_step_pass p,
                      const et_segment_time *t, const et_batch_shape *b, double imbalance, double a2a_share,
                      double *clock, double *ready, et_estimate *sum)
{
    for (int j = 0; j < q->pass_items[p]; j++) {
        const et_step_event *e = &q->items[q->pass_first[p] + j];
        double d = 0;
        switch (e->kind) {
        case ET_STEP_COMPUTE: {
            const et_segment_time *x = &t[e->segment];
            d = x->compute + x->expert * (imbalance - 1);
            *(q->segments[e->segment].phase == ET_PHASE_FORWARD ? &sum->forward : &sum->backward) += d;
            sum->tp_comm += x->comm - x->exchange;
            sum->cp_comm += x->exchange;
            d += x->comm;
            break;
        }
        case ET_STEP_ALLTOALL:
            d = et_step_alltoall_seconds(s, q->graph, e->op, b) * a2a_share;
            sum->ep_comm += d;
            break;
        case ET_STEP_CLIP:
            d = e->fixed;
            sum->clip += d;
            break;
        case ET_STEP_ACCUMULATE_BUCKET:
            d = e->fixed;
            sum->accumulate += d;
            break;
        case ET_STEP_BUCKET_READY:
            ready[e->bucket] = *clock;
            break;
        default:
            break;
        }
        *clock += d;
    }
}

/* out += x x n, for the parts of the compute stream's breakdown. */
static void add_parts(et_estimate *out, const et_estimate *x, double n)
{
    out->forward += n * x->forward, out->backward += n * x->backward, out->clip += n * x->clip;
    out->accumulate += n * x->accumulate;
    out->tp_comm += n * x->tp_comm, out->ep_comm += n * x->ep_comm, out->cp_comm += n * x->cp_comm;
}

/* The step schedule evaluated with the closed forms at the expected shape b (every micro-batch alike): the
 * compute stream's events add up in order; the communication stream's start at the later of what they wait
 * for and the stream's previous event's end; the compute stream waits for it after backward. Fills the
 * step's breakdown in *out; -1 when out of memory. */
static int play_schedule(const et_scenario *s, const et_step_schedule *q, et_op_classes *c,
                         const et_bucket *buckets, const et_batch_shape *b, const et_comm_group *dp,
                         double param_bytes, const et_segment_time whole[2], et_estimate *out)
{
    et_segment_time *t = malloc(((size_t)q->n_segments + 1) * sizeof *t);
    double *ready = malloc(((size_t)q->n_buckets + 1) * sizeof *ready);
    double *at = malloc(((size_t)q->n_events + 1) * sizeof *at);
    if (!t || !ready || !at) {
        free(t), free(ready), free(at);
        return -1;
    }
    /* passes without cuts are their phases, already timed (whole: forward, backward) */
    for (int p = 0; p < ET_PASSES; p++)
        if (p != ET_PASS_LAST_BACKWARD && q->pass_segments[p] == 1 && q->pass_items[p] == 1)
            t[q->segment_first[p]] = whole[p];
        else
            et_step_time_pass(q, s, c, p, b, t + q->segment_first[p]);
    const double micro = et_step_micro_batch_seconds(q, s, b, t);
    const double bubble =
                     et_pipeline_bubble_micro_batches(s->parallel.pipeline, s->parallel.virtual_pipeline) *
                     micro,
                 send = et_pipeline_send_time(s, b);
    /* every micro-batch alike: a forward and a backward pass are each played once */
    const double imbalance = et_moe_imbalance(s, b), a2a_share = et_step_alltoall_share(q, s, b, t);
    et_estimate once[2] = {{0}};
    double pass_time[2] = {0, 0};
    for (int p = ET_PASS_FORWARD; p <= ET_PASS_BACKWARD; p++)
        play_pass(s, q, p, t, b, imbalance, a2a_share, &pass_time[p], ready, &once[p]);
    double clock = 0, comm = 0;
    double *comm_start = malloc(((size_t)q->n_events + 1) * sizeof *comm_start);
    if (!comm_start) {
        free(t), free(ready), free(at);
        return -1;
    }
    bucket_memo memo;
    for (int i = 0; i < 16; i++)
        memo.bytes[i] = -1;
    for (int i = 0; i < q->n_events; i++) {
        const et_step_event *e = &q->events[i];
        switch (e->kind) {
        case ET_STEP_BUBBLE:
            out->bubble += e->share * bubble;
            clock += e->share * bubble;
            break;
        case ET_STEP_PASS:
            if (e->pass == ET_PASS_LAST_BACKWARD) {
                play_pass(s, q, e->pass, t, b, imbalance, a2a_share, &clock, ready, out);
            } else {
                add_parts(out, &once[e->pass], 1);
                clock += pass_time[e->pass];
            }
            break;
        case ET_STEP_SEND:
            out->pp_comm += send;
            clock += send;
            break;
        case ET_STEP_PARAM_GATHERS: { /* before forward and backward of every micro-batch, prefetched */
            const double gathers = 2 * q->micro_batches * et_ring_allgather_time(dp, param_bytes);
            out->dp_comm += gathers;
            comm_start[i] = comm;
            comm += gathers;
            break;
        }
        case ET_STEP_COLLECTIVE: {
            const double ct = bucket_seconds(s, &buckets[e->bucket], dp, &memo);
            out->dp_comm += ct;
            comm_start[i] = fmax(e->wait >= 0 ? at[e->wait] : ready[e->bucket], comm);
            comm = comm_start[i] + ct;
            break;
        }
        case ET_STEP_GRADS_REDUCED: {
            /* the collectives' share of the SMs, paid after backward; then the wait for their tail */
            double overlapped = 0;
            for (int j = 0; j < i; j++)
                if (q->events[j].kind == ET_STEP_PARAM_GATHERS || q->events[j].kind == ET_STEP_COLLECTIVE)
                    overlapped += et_step_overlap_before(comm_start[j], at[j], clock);
            const double contention = et_step_dp_contention(s, overlapped);
            out->dp_comm_exposed = fmax(contention, comm - clock);
            clock += out->dp_comm_exposed;
            break;
        }
        case ET_STEP_GLOBAL_NORM:
            out->clip_allreduce = et_allreduce_time(dp, ET_COLL_AUTO, 4, NULL);
            clock += out->clip_allreduce;
            break;
        case ET_STEP_OPTIMIZER:
            out->optimizer = et_step_optimizer_seconds(q, s, c, b);
            clock += out->optimizer;
            break;
        case ET_STEP_SYNC:
            out->host_sync += e->fixed, clock += e->fixed;
            break;
        case ET_STEP_ACCUMULATE:
            out->accumulate += e->fixed, clock += e->fixed;
            break;
        case ET_STEP_ZERO_GATHER:
            out->zero_gather = et_ring_allgather_time(dp, param_bytes);
            clock += out->zero_gather;
            break;
        default:
            break;
        }
        at[i] = e->stream == ET_STREAM_COMM ? comm : clock;
    }
    /* the all-to-alls' closed forms, blocking, and at the share the overlap would leave */
    if (a2a_share > 0) {
        out->ep_comm_alone = out->ep_comm / a2a_share;
        out->ep_comm_overlapped = out->ep_comm_alone * et_step_alltoall_overlap_share(q, s, b, t);
    }
    free(t), free(ready), free(at), free(comm_start);
    return 0;
}

/* One pipeline stage's part of the estimate (memory always, the largest kept; times when it is the busiest
 * so far by *best_stage_time, a micro-batch's compute and blocking communication): its graph, classes,
 * buckets and step schedule, played with the closed forms. */
static int estimate_stage(const et_scenario *s, int stage, const et_batch_shape *b, const et_comm_group *dp,
                          double *best_stage_time, et_estimate *out, et_error *err)
{
    et_graph_options o = et_scenario_graph_options(s, stage);
    /* a twin of an earlier stage has its times, and no more memory: fewer micro-batches in flight */
    if (et_graph_stage_twin(&s->model, &o) != stage) return 0;
    stage_graph x;
    if (stage_graph_get(s, &o, b, &x, err)) return -1;
    const et_graph g = x.g;
    const et_batch_shape worst = et_batch_worst_case(s);
    et_memory mem = et_memory_estimate(s, &g, &worst);
    if (mem.total > out->memory.total) out->memory = mem;
    /* a micro-batch's forward and backward, blocking communication included, picks the busiest stage */
    et_segment_time whole[2];
    et_phase_whole_time(s, x.c, ET_PHASE_FORWARD, b, &whole[0]);
    et_phase_whole_time(s, x.c, ET_PHASE_BACKWARD, b, &whole[1]);
    const double imbalance = et_moe_imbalance(s, b);
    const double stage_time =
        et_segment_seconds(&whole[0], imbalance) + et_segment_seconds(&whole[1], imbalance);
    if (stage_time <= *best_stage_time) {
        stage_graph_release(&x);
        return 0;
    }
    *best_stage_time = stage_time;
    /* the busiest stage so far: its step, from a clean breakdown */
    out->forward = out->backward = out->clip = out->tp_comm = out->ep_comm = out->cp_comm = out->pp_comm = 0;
    out->ep_comm_alone = out->ep_comm_overlapped = 0;
    out->bubble = out->dp_comm = out->dp_comm_exposed = out->zero_gather = out->clip_allreduce = 0;
    out->accumulate = out->host_sync = 0;
    out->optimizer = 0;
    out->busiest_stage = stage;
    out->params_per_gpu = g.param_count;
    out->galore_projected = g.galore_projected;
    et_bucket *buckets;
    int nb;
    const double ge = et_precision_bytes(s->precision);
    if (et_buckets_build(&g, s->parallel.bucket_bytes, ge, &buckets, &nb, err)) {
        stage_graph_release(&x);
        return -1;
    }
    et_step_schedule q;
    int rc = et_step_schedule_build(s, x.c, stage, buckets, nb, s->parallel.overlap, &q, err);
    if (!rc && play_schedule(s, &q, x.c, buckets, b, dp,
                             et_graph_param_gather_bytes(&g, s->software.fp8_param_gather), whole, out))
        rc = et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                               "out of memory playing the step schedule");
    et_step_schedule_free(&q);
    out->n_buckets = nb;
    out->bucket_bytes_max = 0;
    for (int k = 0; k < nb; k++)
        if (buckets[k].bytes > out->bucket_bytes_max) out->bucket_bytes_max = buckets[k].bytes;
    et_bucket_comm_time(s, dp, out->bucket_bytes_max, &out->algo);
    free(buckets);
    stage_graph_release(&x);
    return rc;
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
    out->params_frozen = whole.frozen_count;
    out->params_dense = whole.param_dense;
    const double micro_flops = et_linear_eval(&whole_flops, &b);
    if (owned) et_graph_free(&whole);
    /* balance of per-rank compute across the sampled batches, and the largest micro-batch */
    out->straggler_factor = 1;
    out->largest_batch = b;
    if (s->data.lengths.kind != ET_LENGTHS_FIXED &&
        (s->data.unpadded || s->data.sampling.scheme == ET_SAMPLING_PACKED ||
         s->data.sampling.pad_to == ET_PAD_LONGEST)) {
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
    out->compute = out->forward + out->backward + out->clip + out->accumulate + out->host_sync +
                   out->tp_comm + out->ep_comm + out->cp_comm + out->pp_comm + out->bubble;
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
    et_run_count run;
    et_run_count_of(s, &run);
    out->steps = run.steps;
    out->evals = run.evals;
    out->warmup_steps = run.warmup_steps;
    out->warmup_time = run.warmup_s;
    out->train_time = out->steps * out->step_time + out->warmup_time;
    out->eval_time = et_eval_time(s, run.evals, out->forward / m);
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
    const double gpus = et_scenario_gpus(s),
                 busy = out->forward + out->backward + out->clip + out->accumulate + out->optimizer;
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
            i + 1 < m->n_phases ? (long long)llround(until * s->target.steps) - done : first.steps - done;
        done += steps;
        first.phases[i] =
            (et_phase_estimate){m->phases[i].from, m->phases[i].rank, e.step_time, steps, e.params_total};
        train += steps * e.step_time;
    }
    first.n_phases = m->n_phases;
    first.train_time = train + first.warmup_time;
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
