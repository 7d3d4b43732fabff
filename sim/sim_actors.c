/* The actor of every simulated GPU, playing its compute and communication streams. */
#include <math.h>
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <xbt/asserts.h>

#include "batch.h"
#include "moe.h"
#include "rng.h"
#include "sim_world.h"

XBT_LOG_NEW_DEFAULT_CATEGORY(et_actors, "etsim GPU actors");

sim_world *sim_w;

/* Per-rank compute noise: lognormal with mean 1 (sigma from the scenario), a seeded stream per (step, rank)
 * (model/rng.h). */
static double noise_factor(const sim_world *w, int rank, int step)
{
    double sigma = w->s->simulation.straggler_sigma;
    if (sigma <= 0) return 1;
    unsigned long long st =
        et_rng_mix(w->s->simulation.seed ^ et_rng_mix((unsigned long long)step * 1000003ULL + rank));
    const double z = et_rng_normal(&st);
    return exp(sigma * z - sigma * sigma / 2);
}

static int traced(const sim_rank *r)
{
    return sim_w->o->trace_path && r->rank % sim_w->trace_every == 0;
}

/* Formats the event name only for ranks kept in the trace. */
void sim_trace_note(const sim_rank *r, int lane, double start, double duration, const char *fmt, ...)
{
    if (!traced(r) || duration <= 0) return;
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    sim_trace_add(&sim_w->trace, r->rank, lane, name, start, duration);
}

void sim_exec(sim_rank *r, double seconds, const char *name, int step)
{
    if (seconds <= 0) return;
    double t0 = simgrid_get_clock();
    sg_actor_execute(seconds * sg_host_get_speed(r->host));
    r->busy[step] += simgrid_get_clock() - t0;
    sim_trace_note(r, 0, t0, simgrid_get_clock() - t0, "%s", name);
}

/* Waiting at a barrier after this rank's backward has ended is idle time (others are late). */
static void barrier(sim_rank *r, sg_bar_t bar, int step, const char *name)
{
    double arrive = simgrid_get_clock();
    sg_barrier_wait(bar);
    double start = simgrid_get_clock();
    double from = fmax(arrive, r->bwd_end[step]);
    if (start > from) {
        r->idle[step] += start - from;
        sim_trace_note(r, 0, from, start - from, "idle: waiting for other ranks");
    }
    sim_trace_note(r, 1, arrive, start - arrive, "%s", name);
}

/* After meeting the communicator: this rank's view of the bucket collectives it played (idle time while
 * waiting for later ranks, and the trace). */
static void account_buckets(sim_rank *r, const sim_group *grp, const sim_stage *st, int step, int overlap,
                            const double *ready, double bwd_end)
{
    const et_scenario *s = sim_w->s;
    const int nb = st->n_buckets;
    const double *start = grp->coll_start + (size_t)step * (nb + 1);
    const double *end = grp->coll_end + (size_t)step * (nb + 1);
    double previous_end = -INFINITY; /* bucket 0 waits from its own ready time */
    for (int k = 0; k < nb; k++) {
        double arrive = fmax(overlap ? ready[k] : bwd_end, previous_end);
        double from = fmax(arrive, bwd_end);
        if (start[k] > from) {
            r->idle[step] += start[k] - from;
            sim_trace_note(r, 0, from, start[k] - from, "idle: waiting for other ranks");
        }
        sim_trace_note(r, 1, arrive, start[k] - arrive, "wait for other ranks");
        if (traced(r) && end[k] > start[k]) {
            const char *algo =
                et_scenario_reduce_scatters_gradients(s) ? "reduce-scatter" : et_coll_algo_names[st->algo[k]];
            char name[96];
            snprintf(name, sizeof name, "%s bucket %d (%.1f MiB)", algo, k, st->buckets[k].bytes / 1048576.0);
            sim_trace_add_comm(&sim_w->trace, r->rank, name, start[k], end[k] - start[k],
                               st->buckets[k].bytes, algo);
        }
        previous_end = end[k];
    }
}

/* A rank playing its stage's step schedule (model/step_schedule.h). The compute stream's clock runs ahead
 * of SimGrid's: compute waits for nothing until backward is done but the experts' all-to-alls, so the
 * events' times are known in advance and run as one execution, cut only where the rank meets its expert
 * group. Each bucket is announced to the communicator as soon as its ready time is known. */
typedef struct rank_play {
    sim_world *w;
    sim_rank *r;
    sim_stage *st;
    int step;
    double f;               /* this step's compute factor: noise over the GPU's speed */
    double t;               /* the compute stream's clock */
    double pending;         /* compute seconds not executed yet (t's lead over SimGrid's clock) */
    double busy;            /* this step's compute-stream seconds */
    double bubble;          /* the stage's whole bubble this step */
    int bubbles;            /* bubble events played (the first is the fill) */
    et_segment_time *times; /* [n_segments]: each pass's segments at the shape it was last timed at */
    bool timed[ET_PASSES];
    et_batch_shape shape[ET_PASSES];
    bool shared;              /* a2a_share holds software.ep_overlap's share at a2a_shape */
    et_batch_shape a2a_shape; /* the micro-batch shape it was found at */
    double a2a_share;
    double *ready; /* [n_buckets + 1] */
    double *load;  /* [expert group size]: the routing's draw for (load_micro, load_layer) */
    int load_micro, load_layer;
    sg_comm_t *comms;
} rank_play;

static int same_shape(const et_batch_shape *a, const et_batch_shape *b)
{
    return a->sequences == b->sequences && a->tokens == b->tokens && a->tokens_sq == b->tokens_sq &&
           a->predictions == b->predictions;
}

/* Pass p's segments at micro-batch i's shape (timed again only when the shape differs). */
static const et_segment_time *timed_pass(rank_play *x, et_step_pass p, int i)
{
    const et_scenario *s = x->w->s;
    const et_batch_shape *b = sim_shape(x->w, x->r->rank, x->step, i);
    if (!x->timed[p] || !same_shape(&x->shape[p], b)) {
        et_op_classes_times(&x->st->classes, b, &s->cluster.device, s->precision, NULL);
        et_step_time_pass(&x->st->schedule, s, &x->st->classes, p, b,
                          x->times + x->st->schedule.segment_first[p]);
        x->timed[p] = true;
        x->shape[p] = *b;
    }
    return x->times;
}

/* The stage's bubble this step: (p - 1) / v mean micro-batches of this rank's. */
static double bubble_seconds(rank_play *x)
{
    const et_scenario *s = x->w->s;
    const double units = et_pipeline_bubble_micro_batches(s->parallel.pipeline, s->parallel.virtual_pipeline);
    const int m = (int)s->batch.grad_accum;
    if (units <= 0) return 0;
    double sum = 0, last = 0;
    const et_batch_shape *previous = NULL;
    for (int i = 0; i < m; i++) {
        const et_batch_shape *b = sim_shape(x->w, x->r->rank, x->step, i);
        if (!previous || !same_shape(previous, b)) {
            timed_pass(x, ET_PASS_FORWARD, i);
            timed_pass(x, ET_PASS_BACKWARD, i);
            last = et_step_micro_batch_seconds(&x->st->schedule, s, b, x->times);
        }
        previous = b;
        sum += last;
    }
    return units * sum / m;
}

/* Advances the compute stream by d seconds (an event on lane 0, compute, or 1, its blocking communication).
 */
static void advance(rank_play *x, double d, int lane, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void advance(rank_play *x, double d, int lane, const char *fmt, ...)
{
    if (d <= 0) return;
    if (traced(x->r)) {
        char name[96];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(name, sizeof name, fmt, ap);
        va_end(ap);
        sim_trace_add(&sim_w->trace, x->r->rank, lane, name, x->t, d);
    }
    x->t += d, x->pending += d, x->busy += d;
}

/* Runs what the compute stream is ahead by, so that SimGrid's clock catches up with it. */
static void catch_up(rank_play *x)
{
    if (x->pending > 0) sg_actor_execute(x->pending * sg_host_get_speed(x->r->host));
    x->pending = 0;
    x->t = simgrid_get_clock();
}

static void announce(rank_play *x, int k, double ready)
{
    sim_group *grp = &x->w->groups[x->r->group];
    const size_t at = (size_t)x->step * (x->st->n_buckets + 1) + k;
    grp->latest[at] = fmax(grp->latest[at], ready);
    if (++grp->bucket_announced[at] == grp->size) sg_sem_release(grp->bucket_gate);
}

/* The routed rows of this rank's experts for layer `layer` of micro-batch i, over the balanced rows. */
static const double *layer_loads(rank_play *x, int i, int layer)
{
    if (x->load_micro != i || x->load_layer != layer) {
        sim_moe_loads(x->w, x->r, x->step, i, layer, x->load);
        x->load_micro = i, x->load_layer = layer;
    }
    return x->load;
}

static void play_compute(rank_play *x, et_step_pass p, int i, const et_step_event *e,
                         const et_step_event *next, double expected_load)
{
    const et_step_schedule *q = &x->st->schedule;
    const et_segment_time *t = &x->times[e->segment];
    const int layer = q->segments[e->segment].expert_layer;
    const double load = x->w->moe && layer >= 0 ? layer_loads(x, i, layer)[x->r->ep_index] : expected_load;
    const double compute = (t->compute + t->expert * (load - 1)) * x->f;
    const bool fwd = p == ET_PASS_FORWARD;
    if (p == ET_PASS_LAST_BACKWARD && next && next->bucket >= 0)
        advance(x, compute, 0, "backward to bucket %d", next->bucket);
    else if (p == ET_PASS_LAST_BACKWARD && !next)
        advance(x, compute, 0, "backward (rest)");
    else
        advance(x, compute, 0, "%s micro-batch %d", fwd ? "forward" : "backward", i);
    advance(x, t->comm * x->f, 1, "tensor-parallel communication (%s %d)", fwd ? "forward" : "backward", i);
}

/* The exposed share of micro-batch i's all-to-alls under software.ep_overlap (et_step_alltoall_share): both
 * passes timed at its shape, found again only when the shape differs. */
static double alltoall_share(rank_play *x, int i)
{
    const et_batch_shape *b = sim_shape(x->w, x->r->rank, x->step, i);
    if (!x->shared || !same_shape(&x->a2a_shape, b)) {
        timed_pass(x, ET_PASS_FORWARD, i);
        timed_pass(x, ET_PASS_BACKWARD, i);
        x->a2a_share = et_step_alltoall_share(&x->st->schedule, x->w->s, b, x->times);
        x->a2a_shape = *b, x->shared = true;
    }
    return x->a2a_share;
}

static void play_pass(rank_play *x, et_step_pass p, int i)
{
    sim_world *w = x->w;
    const et_scenario *s = w->s;
    const et_step_schedule *q = &x->st->schedule;
    const int overlap = q->overlap, dp = w->dp.ranks > 1;
    timed_pass(x, p, i);
    const double expected_load = et_moe_imbalance(s, sim_shape(w, x->r->rank, x->step, i));
    const et_step_event *items = q->items + q->pass_first[p];
    for (int j = 0; j < q->pass_items[p]; j++) {
        const et_step_event *e = &items[j], *next = j + 1 < q->pass_items[p] ? &items[j + 1] : NULL;
        switch (e->kind) {
        case ET_STEP_COMPUTE:
            play_compute(x, p, i, e, next, expected_load);
            break;
        case ET_STEP_ALLTOALL:
            if (s->software.ep_overlap || s->software.ep_dedup) {
                /* beside a partner micro-batch's compute (the exposed share), or a token once to each GPU
                 * and node it reaches: the closed form */
                advance(x,
                        et_step_alltoall_seconds(s, q->graph, e->op, sim_shape(w, x->r->rank, x->step, i)) *
                            alltoall_share(x, i),
                        1, "%s (closed form)", q->graph->ops[e->op].id);
            } else if (w->moe) { /* the group meets: the compute before it runs first */
                catch_up(x);
                sim_moe_alltoall(w, x->r, x->step, i, e, layer_loads(x, i, q->graph->ops[e->op].layer),
                                 x->comms);
                x->t = simgrid_get_clock();
            } else {
                advance(x, et_step_alltoall_seconds(s, q->graph, e->op, sim_shape(w, x->r->rank, x->step, i)),
                        1, "%s", q->graph->ops[e->op].id);
            }
            break;
        case ET_STEP_CLIP:
            advance(x, e->fixed, 0, "clip bucket %d", e->bucket);
            break;
        case ET_STEP_ACCUMULATE_BUCKET:
            advance(x, e->fixed * x->f, 0, "accumulate bucket %d", e->bucket);
            break;
        case ET_STEP_BUCKET_READY:
            x->ready[e->bucket] = x->t;
            if (overlap && dp) announce(x, e->bucket, x->t);
            break;
        default:
            break;
        }
    }
}

/* The compute stream from the step's start to the end of backward: the events before the schedule's
 * backward_done. Returns backward's end. */
static double play_to_backward_done(rank_play *x)
{
    sim_world *w = x->w;
    const et_scenario *s = w->s;
    const et_step_schedule *q = &x->st->schedule;
    x->bubble = bubble_seconds(x);
    x->bubbles = 0;
    for (int i = 0; i < q->backward_done; i++) {
        const et_step_event *e = &q->events[i];
        switch (e->kind) {
        case ET_STEP_BUBBLE:
            advance(x, e->share * x->bubble * x->f, 0, "pipeline bubble (%s)",
                    x->bubbles++ ? "drain" : "fill");
            break;
        case ET_STEP_PASS:
            play_pass(x, e->pass, e->micro);
            break;
        case ET_STEP_SEND:
            advance(x, et_pipeline_send_time(s, sim_shape(w, x->r->rank, x->step, e->micro)) * x->f, 1,
                    "send %s %d", e->pass == ET_PASS_FORWARD ? "activations" : "gradients", e->micro);
            break;
        case ET_STEP_SYNC:
            advance(x, e->fixed, 0, "host synchronisation");
            break;
        case ET_STEP_ACCUMULATE:
            advance(x, e->fixed * x->f, 0, "accumulate gradients %d", e->micro);
            break;
        default: /* the communication stream's: the communicator plays them */
            break;
        }
    }
    if (!q->overlap && w->dp.ranks > 1)
        for (int k = 0; k < q->n_buckets; k++)
            announce(x, k, x->t);
    return x->t;
}

/* The SMs the group's collectives took from this rank's passes while both ran (et_step_dp_contention): each
 * bucket's collective and the parameter gathers as the communicator played them, clipped to the compute
 * stream's [step start, backward done); paid after backward, so the rank waits for the later of that and
 * the collectives' tail (the gathers' record is the step's last, past its buckets'). */
static void pay_dp_contention(rank_play *x, double bwd_end)
{
    const sim_group *grp = &x->w->groups[x->r->group];
    const et_step_schedule *q = &x->st->schedule;
    const int nb = x->st->n_buckets, step = x->step;
    const double *start = grp->coll_start + (size_t)step * (nb + 1);
    const double *end = grp->coll_end + (size_t)step * (nb + 1);
    const double t0 = x->r->step_start[step];
    double overlapped = 0;
    for (int k = 0; k < nb; k++)
        overlapped += et_step_overlap_before(start[k] - t0, end[k] - t0, bwd_end - t0);
    if (q->n_events && q->events[0].kind == ET_STEP_PARAM_GATHERS)
        overlapped += et_step_overlap_before(start[nb] - t0, end[nb] - t0, bwd_end - t0);
    const double until = bwd_end + et_step_dp_contention(x->w->s, overlapped), now = simgrid_get_clock();
    if (until > now) {
        sg_actor_sleep_for(until - now);
        sim_trace_note(x->r, 0, now, until - now, "data-parallel collectives' SMs");
    }
}

/* Rank r's step from where its backward is done: waits for the communicator (gradients reduced), the
 * global-norm all-reduce, the optimizer (folded into the next step's execution when nothing waits between),
 * the ZeRO parameter all-gather. */
static void play_after_backward(rank_play *x, double bwd_end, sg_exec_t exec, int fold_optimizer,
                                double *optimizer_pending)
{
    sim_world *w = x->w;
    sim_rank *r = x->r;
    const et_scenario *s = w->s;
    const et_step_schedule *q = &x->st->schedule;
    const int dp = w->dp.ranks > 1, step = x->step;
    sim_group *grp = &w->groups[r->group];
    *optimizer_pending = 0;
    for (int i = q->backward_done + 1; i < q->n_events; i++) {
        switch (q->events[i].kind) {
        case ET_STEP_GRADS_REDUCED:
            if (dp) {
                sg_barrier_wait(grp->meet); /* the communicator has played every bucket's collective */
                account_buckets(r, grp, x->st, step, q->overlap, x->ready, bwd_end);
            }
            if (exec) sg_exec_wait(exec);
            if (dp) pay_dp_contention(x, bwd_end);
            r->bwd_end[step] = bwd_end;
            break;
        case ET_STEP_GLOBAL_NORM: { /* a latency-bound all-reduce of one value */
            barrier(r, grp->compute_barrier, step, "wait for other ranks");
            const double c0 = simgrid_get_clock();
            sg_actor_sleep_for(et_allreduce_time(&w->dp, ET_COLL_AUTO, 4, NULL));
            sim_trace_note(r, 1, c0, simgrid_get_clock() - c0, "global-norm all-reduce");
            break;
        }
        case ET_STEP_OPTIMIZER: {
            const et_batch_shape *b = sim_shape(w, r->rank, step, q->micro_batches - 1);
            et_op_classes_times(&x->st->classes, b, &s->cluster.device, s->precision, NULL);
            const double opt = et_step_optimizer_seconds(q, s, &x->st->classes, b) * x->f;
            if (fold_optimizer && step < w->steps - 1)
                *optimizer_pending = opt;
            else
                sim_exec(r, opt, "optimizer", step);
            break;
        }
        case ET_STEP_SYNC:
            sim_exec(r, q->events[i].fixed, "host synchronisation", step);
            break;
        case ET_STEP_ZERO_GATHER: {
            barrier(r, grp->meet, step, "wait for other ranks");
            const double g0 = simgrid_get_clock();
            sg_barrier_wait(grp->meet); /* the communicator has gathered the updated parameters */
            sim_trace_note(r, 1, g0, simgrid_get_clock() - g0, "ZeRO parameter all-gather");
            break;
        }
        default:
            break;
        }
    }
    if (*optimizer_pending <= 0) r->step_end[step] = simgrid_get_clock();
}

/* Every rank plays its stage's step schedule; the communicator's actor plays the communication stream. */
static void gpu_actor(int argc, char **argv)
{
    (void)argc;
    sim_world *w = sim_w;
    sim_rank *r = &w->ranks[atoi(argv[1])];
    sim_stage *st = &w->stages[r->stage];
    const et_scenario *s = w->s;
    const int dp = w->dp.ranks > 1;
    sim_group *grp = &w->groups[r->group];
    rank_play x = {.w = w, .r = r, .st = st, .load_micro = -1};
    const int members = w->moe ? w->ep_groups[r->ep_group].size : 1;
    x.times = malloc(((size_t)st->schedule.n_segments + 1) * sizeof *x.times);
    x.ready = malloc(((size_t)st->n_buckets + 1) * sizeof *x.ready);
    x.load = malloc((size_t)members * sizeof *x.load);
    x.comms = malloc((size_t)members * sizeof *x.comms);
    /* an actor has no error path: out of memory stops the simulation, and etsim reports SimGrid's stop */
    xbt_assert(x.times && x.ready && x.load && x.comms, "etsim: out of memory for the step of rank %d",
               r->rank);
    /* With nothing to wait for between meeting the communicator and the optimizer, nor after it, a step's
     * optimizer runs in one execution with the next step's compute: one wake-up less a step. */
    const int fold_optimizer =
        !w->moe &&
        !(dp && (s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE || et_scenario_gathers_parameters(s)));
    double optimizer_pending = 0; /* the previous step's optimizer, at the start of this step's execution */
    for (int step = 0; step < w->steps; step++) {
        if (r->rank == 0 && w->o->progress) {
            fprintf(stderr, "\retsim: simulating step %d/%d on %d GPUs", step + 1, w->steps, w->n_ranks);
            fflush(stderr);
        }
        const double now = simgrid_get_clock(), step_start = now + optimizer_pending;
        if (optimizer_pending > 0) {
            r->busy[step - 1] += optimizer_pending;
            sim_trace_note(r, 0, now, optimizer_pending, "optimizer");
            r->step_end[step - 1] = step_start;
        }
        if (step == w->steps - 1 && r->rank == 0) w->trace.window_start = step_start;
        r->step_start[step] = step_start;
        r->bwd_end[step] = INFINITY; /* nothing counts as idle before backward has ended */
        x.step = step;
        x.f = noise_factor(w, r->rank, step) / (w->gpu_speed ? w->gpu_speed[r->rank] : 1);
        x.t = step_start, x.pending = optimizer_pending, x.busy = 0;
        if (dp && st->schedule.n_events && st->schedule.events[0].kind == ET_STEP_PARAM_GATHERS) {
            /* the communicator starts the parameter gathers when the group has started the step */
            barrier(r, grp->meet, step, "wait for other ranks");
            x.t = simgrid_get_clock();
        }
        const double bwd_end = play_to_backward_done(&x);
        sg_exec_t exec = x.pending > 0 ? sg_actor_exec_async(x.pending * sg_host_get_speed(r->host)) : NULL;
        r->busy[step] += x.busy;
        play_after_backward(&x, bwd_end, exec, fold_optimizer, &optimizer_pending);
    }
    free(x.times);
    free(x.ready);
    free(x.load);
    free(x.comms);
}

/* The communication stream of a data-parallel group, as the stage's step schedule lays it out: per step,
 * ZeRO 3's parameter gathers from the step's start, each bucket's collective from the latest ready time its
 * ranks announce (or the previous collective's end), then the ranks meet it; the ZeRO parameter all-gather
 * after the optimizer. */
static void communicator_actor(int argc, char **argv)
{
    (void)argc;
    sim_world *w = sim_w;
    const int id = atoi(argv[1]);
    sim_group *g = &w->groups[id];
    const sim_stage *st = &w->stages[g->stage];
    const et_step_schedule *q = &st->schedule;
    const et_scenario *s = w->s;
    const int nb = st->n_buckets;
    const double param_bytes = et_graph_param_gather_bytes(&st->graph, s->software.fp8_param_gather);
    for (int step = 0; step < w->steps; step++) {
        const double *latest = g->latest + (size_t)step * (nb + 1);
        double *start = g->coll_start + (size_t)step * (nb + 1), *end = g->coll_end + (size_t)step * (nb + 1);
        for (int i = 0; i < q->n_events; i++) {
            const et_step_event *e = &q->events[i];
            switch (e->kind) {
            case ET_STEP_PARAM_GATHERS: /* before forward and backward of every micro-batch, prefetched */
                sg_barrier_wait(g->meet);
                start[nb] = simgrid_get_clock(); /* the step's record past its buckets': the gathers */
                for (int j = 0; j < 2 * q->micro_batches; j++)
                    sim_ring_gather(g, param_bytes, 1, simgrid_get_clock());
                end[nb] = simgrid_get_clock();
                break;
            case ET_STEP_COLLECTIVE: {
                const int k = e->bucket;
                sg_sem_acquire(g->bucket_gate); /* bucket k announced by every rank */
                start[k] = fmax(latest[k], simgrid_get_clock());
                /* expert buckets: over the ranks holding the same experts */
                sim_group *over = w->moe && st->buckets[k].expert ? &w->expert_groups[id] : g;
                if (et_scenario_reduce_scatters_gradients(s))
                    sim_ring_gather(over, st->buckets[k].bytes, 1, start[k]);
                else
                    sim_allreduce(over, st->algo[k], st->buckets[k].bytes, start[k]);
                end[k] = simgrid_get_clock();
                if (id == 0) {
                    w->bucket_start[step * nb + k] = start[k];
                    w->bucket_end[step * nb + k] = end[k];
                }
                break;
            }
            case ET_STEP_GRADS_REDUCED:
                sg_barrier_wait(g->meet);
                break;
            case ET_STEP_ZERO_GATHER:
                sg_barrier_wait(g->meet);
                sim_ring_gather(g, param_bytes, 1, simgrid_get_clock());
                sg_barrier_wait(g->meet);
                break;
            default: /* the compute stream's: the ranks play them */
                break;
            }
        }
    }
}

/* Collective benchmark: the communicator runs the same sequence of collectives, back to back. */
static void bench_actor(int argc, char **argv)
{
    (void)argc;
    sim_world *w = sim_w;
    sim_group *g = &w->groups[atoi(argv[1])];
    const sim_options *o = w->o;
    for (int i = 0; i < o->bench_sizes; i++) {
        double start = simgrid_get_clock(), bytes = o->bench_bytes[i];
        if (o->bench_op == 0) {
            et_coll_algo algo;
            et_allreduce_time(&w->dp, o->bench_algo, bytes, &algo);
            sim_allreduce(g, algo, bytes, start);
        } else {
            sim_ring_gather(g, bytes, 1, start);
        }
        if (g == &w->groups[0]) {
            w->bucket_start[i] = start;
            w->bucket_end[i] = simgrid_get_clock();
        }
    }
}

void sim_start_actors(sim_world *w)
{
    char arg[16];
    const int bench = w->o->bench_sizes > 0;
    for (int i = 0; i < w->n_groups && w->dp.ranks > 1; i++) {
        snprintf(arg, sizeof arg, "%d", i);
        const char *argv[] = {"communicator", arg};
        sg_host_t host = w->ranks[w->groups[i].members[0]].host;
        sg_actor_create("communicator", host, bench ? bench_actor : communicator_actor, 2, (char **)argv);
    }
    for (int i = 0; i < w->n_ranks && !bench; i++) {
        snprintf(arg, sizeof arg, "%d", i);
        const char *argv[] = {"gpu", arg};
        sg_actor_create("gpu", w->ranks[i].host, gpu_actor, 2, (char **)argv);
    }
}
