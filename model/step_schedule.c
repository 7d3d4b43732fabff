#include "step_schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"
#include "phase_time.h"
#include "schedule.h"

const char *const et_step_event_names[] = {"bubble",
                                           "pass",
                                           "send",
                                           "backward done",
                                           "parameter gathers",
                                           "collective",
                                           "gradients reduced",
                                           "global norm",
                                           "optimizer",
                                           "ZeRO gather",
                                           "sync",
                                           "accumulate",
                                           "compute",
                                           "all-to-all",
                                           "clip",
                                           "bucket ready",
                                           "accumulate bucket"};
_Static_assert(sizeof et_step_event_names / sizeof *et_step_event_names == ET_STEP_ACCUMULATE_BUCKET + 1,
               "a name for every step event kind");

/* A growing array of events (or segments): -1 when out of memory. */
static int push_event(et_step_event **a, int *n, int *cap, et_step_event e)
{
    if (*n == *cap) {
        const int bigger = *cap ? 2 * *cap : 64;
        et_step_event *p = realloc(*a, (size_t)bigger * sizeof *p);
        if (!p) return -1;
        *a = p, *cap = bigger;
    }
    (*a)[(*n)++] = e;
    return 0;
}

static double fixed_seconds(const et_step_schedule *q, const et_scenario *s, const et_step_event *e);

typedef struct builder {
    et_step_schedule *q;
    int cap_events, cap_items, cap_segments, n_items;
} builder;

static int event(builder *b, et_step_event e)
{
    return push_event(&b->q->events, &b->q->n_events, &b->cap_events, e);
}

static int item(builder *b, et_step_event e)
{
    e.stream = ET_STREAM_COMPUTE;
    return push_event(&b->q->items, &b->n_items, &b->cap_items, e);
}

/* Closes the segment [first, end) of `phase` and adds its compute item. */
static int segment(builder *b, et_phase phase, int first, int end, int layer)
{
    et_step_schedule *q = b->q;
    if (q->n_segments == b->cap_segments) {
        const int bigger = b->cap_segments ? 2 * b->cap_segments : 64;
        et_step_segment *p = realloc(q->segments, (size_t)bigger * sizeof *p);
        if (!p) return -1;
        q->segments = p, b->cap_segments = bigger;
    }
    q->segments[q->n_segments] = (et_step_segment){phase, first, end, layer};
    return item(b,
                (et_step_event){.kind = ET_STEP_COMPUTE, .segment = q->n_segments++, .bucket = -1, .op = -1});
}

/* Whether micro-batch i's gradients are accumulated by a pass of the stack's own: autograd's add from the
 * second micro-batch on, DeepSpeed's cast and add after every one. */
static bool accumulates(const et_scenario *s, int i)
{
    const et_grad_accumulation a = s->software.grad_accumulation;
    return a == ET_ACCUMULATE_CAST_ADD || (a == ET_ACCUMULATE_ADD && i > 0);
}

/* Bucket k's accumulation (the last micro-batch's share), clipping (when clipping per bucket) and
 * readiness. */
static int bucket_items(builder *b, int k, bool accumulate, bool clip)
{
    if (accumulate && item(b, (et_step_event){.kind = ET_STEP_ACCUMULATE_BUCKET, .bucket = k, .op = -1}))
        return -1;
    if (clip && item(b, (et_step_event){.kind = ET_STEP_CLIP, .bucket = k, .op = -1})) return -1;
    return item(b, (et_step_event){.kind = ET_STEP_BUCKET_READY, .bucket = k, .op = -1});
}

/* A pass's items: the phase's ops in graph order cut at each experts' all-to-all and, for the last backward,
 * where each bucket becomes ready. Only the ops that can cut or carry experts are visited: the classes'
 * special ops of the phase (communication, experts' ops, in graph order) merged with the buckets' ready
 * ops. */
static int build_pass(builder *b, const et_scenario *s, const et_op_classes *c, et_step_pass pass,
                      const et_bucket *buckets, int nb)
{
    et_step_schedule *q = b->q;
    const et_graph *g = q->graph;
    const et_phase phase = pass == ET_PASS_FORWARD ? ET_PHASE_FORWARD : ET_PHASE_BACKWARD;
    const bool clip = s->optimizer.clip == ET_CLIP_PER_BUCKET;
    const bool accumulate = accumulates(s, (int)s->batch.grad_accum - 1);
    const int *special = c->special[phase], n_special = c->n_special[phase];
    /* buckets are cut in backward order; one whose op is not in backward, and those after it, are ready at
     * the pass's end */
    int cuts = 0;
    while (pass == ET_PASS_LAST_BACKWARD && cuts < nb && buckets[cuts].ready_op >= 0 &&
           buckets[cuts].ready_op < g->n_ops && c->phase_of[buckets[cuts].ready_op] == phase &&
           (cuts == 0 || buckets[cuts].ready_op >= buckets[cuts - 1].ready_op))
        cuts++;
    q->pass_first[pass] = b->n_items;
    q->segment_first[pass] = q->n_segments;
    int first = 0, k = 0, j = 0, alltoalls = 0, layer = -1;
    while (j < n_special || k < cuts) {
        const int i = j < n_special ? special[j] : g->n_ops;
        if (k < cuts && buckets[k].ready_op < i) { /* bucket k ready after its op, before the next special */
            if (segment(b, phase, first, buckets[k].ready_op + 1, layer) ||
                bucket_items(b, k, accumulate, clip))
                return -1;
            first = buckets[k++].ready_op + 1, layer = -1;
            continue;
        }
        const et_op *op = &g->ops[i];
        j++;
        if (op->kind == ET_OP_EP_ALLTOALL) {
            /* dispatch then combine in forward; combine's gradient then dispatch's in backward: the first of
             * each pair sends each rank's rows to the experts' ranks */
            if (segment(b, phase, first, i, layer) ||
                item(b, (et_step_event){.kind = ET_STEP_ALLTOALL,
                                        .op = i,
                                        .to_experts = alltoalls++ % 2 == 0,
                                        .bucket = -1}))
                return -1;
            q->has_alltoall = true;
            first = i + 1, layer = -1;
            continue;
        }
        if (op->expert) layer = op->layer;
        while (k < cuts && buckets[k].ready_op == i) {
            if (segment(b, phase, first, i + 1, layer) || bucket_items(b, k++, accumulate, clip)) return -1;
            first = i + 1, layer = -1;
        }
    }
    if (segment(b, phase, first, g->n_ops, layer)) return -1;
    for (k = cuts; pass == ET_PASS_LAST_BACKWARD && k < nb; k++)
        if (bucket_items(b, k, accumulate, clip)) return -1;
    q->pass_items[pass] = b->n_items - q->pass_first[pass];
    q->pass_segments[pass] = q->n_segments - q->segment_first[pass];
    return 0;
}

static int step_event(builder *b, et_step_event_kind kind, et_step_stream stream);

static int sync_event(builder *b, int count)
{
    return count > 0 &&
           event(b,
                 (et_step_event){
                     .kind = ET_STEP_SYNC, .count = count, .micro = -1, .bucket = -1, .op = -1, .wait = -1});
}

/* A pass of micro-batch `micro` and what the stack does after it: the timers' synchronisations (half after
 * forward, the rest after backward), the accumulation pass after an earlier backward; then the pipeline
 * send, and a synchronisation after it when the stack's p2p synchronises. */
static int pass_events(builder *b, const et_scenario *s, int micro, et_step_pass pass)
{
    const et_software *w = &s->software;
    const int half = w->syncs_per_micro_batch / 2;
    if (event(b,
              (et_step_event){.kind = ET_STEP_PASS, .micro = micro, .pass = pass, .bucket = -1, .op = -1}) ||
        sync_event(b, pass == ET_PASS_FORWARD ? half : w->syncs_per_micro_batch - half))
        return -1;
    if (pass == ET_PASS_BACKWARD && accumulates(s, micro) &&
        event(b, (et_step_event){.kind = ET_STEP_ACCUMULATE, .micro = micro, .bucket = -1, .op = -1}))
        return -1;
    return event(
               b,
               (et_step_event){.kind = ET_STEP_SEND, .micro = micro, .pass = pass, .bucket = -1, .op = -1}) ||
           sync_event(b, w->p2p_sync && s->parallel.pipeline > 1);
}

static int step_event(builder *b, et_step_event_kind kind, et_step_stream stream)
{
    return event(
        b, (et_step_event){.kind = kind, .stream = stream, .micro = -1, .bucket = -1, .op = -1, .wait = -1});
}

/* The compute stream's micro-batches in 1F1B order (Narayanan et al. 2021, fig. 4): a stage `warm` deep runs
 * that many forwards first, then one forward and one backward at a time, then the remaining backwards; the
 * bubble's fill share before the first forward, its drain share after the last. */
static int micro_batch_events(builder *b, const et_scenario *s, int stage)
{
    const int m = (int)s->batch.grad_accum, p = s->parallel.pipeline;
    const int warm = p - stage - 1 < m ? p - stage - 1 : m;
    const double fill = p > 1 ? (double)stage / (p - 1) : 0;
    const et_step_event bubble_fill = {
        .kind = ET_STEP_BUBBLE, .share = fill, .micro = -1, .bucket = -1, .op = -1};
    et_step_event bubble_drain = bubble_fill;
    bubble_drain.share = p > 1 ? 1 - fill : 0;
    if (event(b, bubble_fill)) return -1;
    for (int i = 0; i < warm; i++)
        if (pass_events(b, s, i, ET_PASS_FORWARD)) return -1;
    if (warm == m && event(b, bubble_drain)) return -1;
    for (int k = 0; k < m - warm; k++) {
        if (pass_events(b, s, warm + k, ET_PASS_FORWARD)) return -1;
        if (warm + k == m - 1 && event(b, bubble_drain)) return -1;
        if (k < m - 1 && pass_events(b, s, k, ET_PASS_BACKWARD)) return -1;
    }
    for (int k = m - warm; k < m - 1; k++)
        if (pass_events(b, s, k, ET_PASS_BACKWARD)) return -1;
    return pass_events(b, s, m - 1, ET_PASS_LAST_BACKWARD);
}

static int build_events(builder *b, const et_scenario *s, int stage, int nb)
{
    et_step_schedule *q = b->q;
    const bool dp = et_scenario_grad_ranks(s) > 1;
    if (dp && s->parallel.zero_stage >= 3 && step_event(b, ET_STEP_PARAM_GATHERS, ET_STREAM_COMM)) return -1;
    if (micro_batch_events(b, s, stage)) return -1;
    q->backward_done = q->n_events;
    if (step_event(b, ET_STEP_BACKWARD_DONE, ET_STREAM_COMPUTE)) return -1;
    for (int k = 0; k < nb && dp; k++) {
        et_step_event e = {
            .kind = ET_STEP_COLLECTIVE, .stream = ET_STREAM_COMM, .micro = -1, .bucket = k, .op = -1};
        e.wait = q->overlap ? -1 : q->backward_done;
        if (event(b, e)) return -1;
    }
    if (step_event(b, ET_STEP_GRADS_REDUCED, ET_STREAM_COMPUTE)) return -1;
    /* the host reads the gradient norm, and under fp16 the loss scaler's overflow flag */
    if (sync_event(b, s->software.syncs_per_step + (s->software.loss_scale_sync && s->precision == ET_FP16)))
        return -1;
    if (dp && s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE &&
        step_event(b, ET_STEP_GLOBAL_NORM, ET_STREAM_COMPUTE))
        return -1;
    if (step_event(b, ET_STEP_OPTIMIZER, ET_STREAM_COMPUTE)) return -1;
    if (dp && et_scenario_gathers_parameters(s) && step_event(b, ET_STEP_ZERO_GATHER, ET_STREAM_COMPUTE))
        return -1;
    return 0;
}

int et_step_schedule_build(const et_scenario *s, const et_op_classes *c, int stage, const et_bucket *buckets,
                           int nb, bool overlap, et_step_schedule *q, et_error *err)
{
    memset(q, 0, sizeof *q);
    q->graph = c->graph;
    q->buckets = buckets;
    q->stage = stage;
    q->micro_batches = (int)s->batch.grad_accum;
    q->n_buckets = nb;
    q->overlap = overlap;
    builder b = {.q = q};
    /* sized once from what the passes and the step can hold (they grow past it if ever needed): a plan
     * search builds a schedule per estimate */
    const int m = (int)s->batch.grad_accum;
    const int specials = c->n_special[ET_PHASE_FORWARD] + 2 * c->n_special[ET_PHASE_BACKWARD];
    b.cap_items = 2 * specials + 3 * nb + 8;
    b.cap_segments = specials + nb + 4;
    b.cap_events = 8 * m + nb + 16;
    q->items = malloc((size_t)b.cap_items * sizeof *q->items);
    q->segments = malloc((size_t)b.cap_segments * sizeof *q->segments);
    q->events = malloc((size_t)b.cap_events * sizeof *q->events);
    if (!q->items || !q->segments || !q->events) b.cap_items = b.cap_segments = b.cap_events = 0;
    if (!q->items || !q->segments || !q->events || build_pass(&b, s, c, ET_PASS_FORWARD, buckets, nb) ||
        build_pass(&b, s, c, ET_PASS_BACKWARD, buckets, nb) ||
        build_pass(&b, s, c, ET_PASS_LAST_BACKWARD, buckets, nb) || build_events(&b, s, stage, nb)) {
        et_step_schedule_free(q);
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of memory for the step schedule");
    }
    for (int k = 0; k < q->n_events; k++)
        q->events[k].fixed = fixed_seconds(q, s, &q->events[k]);
    for (int k = 0; k < b.n_items; k++)
        q->items[k].fixed = fixed_seconds(q, s, &q->items[k]);
    return 0;
}

void et_step_schedule_free(et_step_schedule *q)
{
    free(q->events);
    free(q->items);
    free(q->segments);
    memset(q, 0, sizeof *q);
}

void et_step_time_pass(const et_step_schedule *q, const et_scenario *s, et_op_classes *c, et_step_pass p,
                       const et_batch_shape *b, et_segment_time *t)
{
    const et_graph *g = q->graph;
    const et_step_segment *seg = q->segments + q->segment_first[p];
    const int n = q->pass_segments[p];
    const et_phase phase = seg[0].phase;
    if (n == 1 && q->pass_items[p] == 1) { /* one segment, the whole phase */
        et_phase_whole_time(s, c, phase, b, t);
        return;
    }
    const et_comm_group tp = et_tp_group(s);
    memset(t, 0, (size_t)n * sizeof *t);
    double kernels = 0;
    int j = 0;
    for (int i = 0; i < g->n_ops; i++) {
        if (c->phase_of[i] != phase) continue;
        if (g->ops[i].kind == ET_OP_EP_ALLTOALL) { /* an item of its own */
            kernels += et_op_launches(&g->ops[i], b);
            continue;
        }
        while (j < n - 1 && i >= seg[j].end_op)
            j++;
        if (c->plain[i]) { /* the compact arrays only: a walk over the large ops is most of its cost */
            t[j].compute += c->class_time[c->class_of[i]];
            kernels += c->class_kernels[c->class_of[i]];
        } else {
            et_segment_add_op(s, g, i, b, c, &tp, &t[j]);
            kernels += et_op_launches(&g->ops[i], b);
        }
    }
    et_segment_host_stretch(s, b, t, n, kernels);
}

double et_step_alltoall_seconds(const et_scenario *s, const et_graph *g, int op, const et_batch_shape *b)
{
    const et_comm_group tp = et_tp_group(s);
    double t = 0;
    et_op_seconds_balanced(s, g, op, b, NULL, &tp, &t);
    return t;
}

/* One micro-batch's forward and backward passes at shape b: their compute seconds (the segments at the
 * expected imbalance, their blocking communication with them) and their all-to-alls' closed forms, apart. */
static void micro_batch_parts(const et_step_schedule *q, const et_scenario *s, const et_batch_shape *b,
                              const et_segment_time *t, double *compute, double *alltoall)
{
    const double imbalance = et_moe_imbalance(s, b);
    *compute = *alltoall = 0;
    for (int p = ET_PASS_FORWARD; p <= ET_PASS_BACKWARD; p++)
        for (int j = 0; j < q->pass_items[p]; j++) {
            const et_step_event *e = &q->items[q->pass_first[p] + j];
            if (e->kind == ET_STEP_COMPUTE)
                *compute += et_segment_seconds(&t[e->segment], imbalance);
            else if (e->kind == ET_STEP_ALLTOALL)
                *alltoall += et_step_alltoall_seconds(s, q->graph, e->op, b);
        }
}

double et_step_dp_contention(const et_scenario *s, double overlapped)
{
    const double sms = s->cluster.device.multiprocessors, k = s->software.overlap_sms;
    if (sms <= 0 || k <= 0 || overlapped <= 0) return 0;
    return overlapped * fmin(k, sms) / sms;
}

double et_step_overlap_before(double start, double end, double until)
{
    return fmax(0, fmin(end, until) - fmax(start, 0));
}

double et_step_alltoall_unpaired(const et_scenario *s)
{
    const double p = s->parallel.pipeline,
                 v = s->parallel.virtual_pipeline > 1 ? s->parallel.virtual_pipeline : 1;
    const double chunks = s->batch.grad_accum * v;
    /* the first stage's warm-up forwards: Megatron's get_forward_backward_func schedules (p - 1) without
     * interleaving, 2 (p - 1) + (v - 1) p chunk passes with it; and the steady phase's first forward */
    const double warmup = v > 1 ? 2 * (p - 1) + (v - 1) * p : p - 1;
    return chunks > 0 ? fmin(1, (warmup + 1) / chunks) : 1;
}

/* The overlap's exposed share of a micro-batch's all-to-alls a beside its compute c. */
static double overlap_share(const et_scenario *s, double c, double a)
{
    if (a <= 0) return 1;
    /* a pair's all-to-alls beside its compute, taking overlap_sms of the multiprocessors while they run */
    const double pair =
        et_overlap_blocking(a, c, s->software.overlap_sms, s->cluster.device.multiprocessors, false);
    const double u = et_step_alltoall_unpaired(s);
    return u + (1 - u) * pair / a;
}

double et_step_alltoall_share(const et_step_schedule *q, const et_scenario *s, const et_batch_shape *b,
                              const et_segment_time *t)
{
    return s->software.ep_overlap ? et_step_alltoall_overlap_share(q, s, b, t) : 1;
}

double et_step_alltoall_overlap_share(const et_step_schedule *q, const et_scenario *s,
                                      const et_batch_shape *b, const et_segment_time *t)
{
    if (!q->has_alltoall) return 1;
    double c, a;
    micro_batch_parts(q, s, b, t, &c, &a);
    return overlap_share(s, c, a);
}

double et_step_micro_batch_seconds(const et_step_schedule *q, const et_scenario *s, const et_batch_shape *b,
                                   const et_segment_time *t)
{
    double c, a;
    micro_batch_parts(q, s, b, t, &c, &a);
    const double share = s->software.ep_overlap ? overlap_share(s, c, a) : 1;
    return c + a * share + 2 * et_pipeline_send_time(s, b);
}

/* The seconds of an event or item that does not depend on the batch: a host synchronisation, an
 * accumulation pass (a micro-batch's, or a bucket's in the last backward), a bucket's clipping kernel;
 * 0 for the others. */
static double fixed_seconds(const et_step_schedule *q, const et_scenario *s, const et_step_event *e)
{
    const et_graph *g = q->graph;
    switch (e->kind) {
    case ET_STEP_SYNC:
        return e->count * et_sync_time(s);
    case ET_STEP_ACCUMULATE:
        return et_accumulate_time(s, g->grad_elems, g->n_params);
    case ET_STEP_ACCUMULATE_BUCKET:
        return et_accumulate_time(s, q->buckets[e->bucket].elements, q->buckets[e->bucket].param_count);
    case ET_STEP_CLIP:
        return et_bucket_clip_time(s, q->buckets[e->bucket].bytes);
    default:
        return 0;
    }
}

double et_step_optimizer_seconds(const et_step_schedule *q, const et_scenario *s, const et_op_classes *c,
                                 const et_batch_shape *b)
{
    const et_graph *g = q->graph;
    const double shard = et_graph_optimizer_params(g);
    /* the shard's quantized share, as the parameters' (only FP8 parameter gathers read it) */
    const double quantized_shard = s->software.fp8_param_gather && g->param_count > 0
                                       ? shard * et_graph_quantized_params(g) / g->param_count
                                       : 0;
    return et_phase_time_of(s, c, ET_PHASE_OPTIMIZER, b, NULL) +
           et_optimizer_stack_time(s, g->param_count, shard, quantized_shard);
}
