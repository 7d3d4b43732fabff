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

void sim_rank_plan(sim_world *w, int rank, int step, sim_plan *plan)
{
    const et_scenario *s = w->s;
    const sim_rank *r = &w->ranks[rank];
    sim_stage *st = &w->stages[r->stage];
    const int m = (int)s->batch.grad_accum, p = s->parallel.pipeline, nb = st->n_buckets;
    const double f = noise_factor(w, rank, step) / (w->gpu_speed ? w->gpu_speed[rank] : 1);
    plan->f = f;
    /* every micro-batch but the last runs forward and backward whole; the last one's backward is split at
     * the bucket-ready points; the 1F1B bubble costs (p - 1) / v average micro-batches */
    double pre = 0, mean_micro = 0, tp_f = 0, tp_b = 0, F = 0, Bw = 0, send = 0;
    for (int i = 0; i < m; i++) {
        const et_batch_shape *b = sim_shape(w, rank, step, i);
        et_op_classes_times(&st->classes, b, &s->cluster.device, s->precision, NULL);
        tp_f = tp_b = 0;
        F = et_phase_time_of(s, &st->classes, ET_PHASE_FORWARD, b, &tp_f);
        send = et_pipeline_send_time(s, b);
        if (i < m - 1) {
            Bw = et_phase_time_of(s, &st->classes, ET_PHASE_BACKWARD, b, &tp_b);
            pre += F + tp_f + Bw + tp_b + 2 * send;
            mean_micro += (F + tp_f + Bw + tp_b + 2 * send) / m;
        } else {
            Bw = et_backward_segments_of(s, &st->classes, st->buckets, nb, b, plan->seg, &tp_b);
            mean_micro += (F + tp_f + Bw + tp_b + 2 * send) / m;
            pre += F + tp_f + send;
            plan->opt = et_phase_time_of(s, &st->classes, ET_PHASE_OPTIMIZER, b, NULL) * f;
        }
        if (plan->fwd) {
            plan->fwd[i] = F * f, plan->tp_fwd[i] = tp_f * f, plan->send[i] = send * f;
            plan->bwd[i] = Bw * f, plan->tp_bwd[i] = tp_b * f;
        }
    }
    plan->bubble = et_pipeline_bubble_micro_batches(p, s->parallel.virtual_pipeline) * mean_micro * f;
    pre += et_pipeline_bubble_micro_batches(p, s->parallel.virtual_pipeline) * mean_micro;
    /* tensor-parallel all-reduces block compute: spread them over backward in proportion */
    double stretch = Bw > 0 ? (Bw + tp_b) / Bw : 1;
    for (int k = 0; k <= nb; k++)
        plan->seg[k] *= stretch * f;
    plan->seg[nb] += send * f;
    plan->pre = pre * f;
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

/* Announces when this rank's buckets will be ready; the last rank of the group to announce opens the
 * communicator's gate for the step. */
static void announce(sim_group *grp, int step, int nb, int overlap, const double *ready)
{
    double *latest = grp->latest + (size_t)step * (nb + 1);
    for (int k = 0; k < nb; k++)
        latest[k] = fmax(latest[k], overlap ? ready[k] : ready[nb]);
    if (++grp->announced[step] == grp->size) sg_sem_release(grp->announce_gate);
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

/* The trace of `pre` on a traced rank: its micro-batches in 1F1B order from `t` (forward of the first
 * min(p - stage - 1, m) micro-batches, then one forward and one backward at a time, then the remaining
 * backwards but the last, which the bucket segments show), each with its blocking tensor-parallel
 * communication and pipeline send on the communication lane; the bubble as idle time, the share of a
 * stage's upstream stages before its first forward and the rest before the cool-down backwards. The
 * events add up to `pre` exactly. Interleaved schedules (virtual_pipeline > 1) are drawn in the same
 * order, model chunks merged. */
static void trace_forward(const sim_rank *r, const sim_plan *plan, int i, double *t)
{
    sim_trace_note(r, 0, *t, plan->fwd[i], "forward micro-batch %d", i);
    *t += plan->fwd[i];
    sim_trace_note(r, 1, *t, plan->tp_fwd[i], "tensor-parallel communication (forward %d)", i);
    *t += plan->tp_fwd[i];
    sim_trace_note(r, 1, *t, plan->send[i], "send activations %d", i);
    *t += plan->send[i];
}

static void trace_backward(const sim_rank *r, const sim_plan *plan, int i, double *t)
{
    sim_trace_note(r, 0, *t, plan->bwd[i], "backward micro-batch %d", i);
    *t += plan->bwd[i];
    sim_trace_note(r, 1, *t, plan->tp_bwd[i], "tensor-parallel communication (backward %d)", i);
    *t += plan->tp_bwd[i];
    sim_trace_note(r, 1, *t, plan->send[i], "send gradients %d", i);
    *t += plan->send[i];
}

static void trace_micro_batches(const sim_rank *r, const sim_plan *plan, double t)
{
    const et_scenario *s = sim_w->s;
    const int m = (int)s->batch.grad_accum, p = s->parallel.pipeline, st = r->stage;
    const double fill = p > 1 ? plan->bubble * st / (p - 1) : 0, drain = plan->bubble - fill;
    const int warm = p - st - 1 < m ? p - st - 1 : m;
    sim_trace_note(r, 0, t, fill, "pipeline bubble (fill)");
    t += fill;
    for (int i = 0; i < warm; i++)
        trace_forward(r, plan, i, &t);
    if (warm == m) {
        sim_trace_note(r, 0, t, drain, "pipeline bubble (drain)");
        t += drain;
    }
    for (int k = 0; k < m - warm; k++) {
        trace_forward(r, plan, warm + k, &t);
        if (warm + k == m - 1) {
            sim_trace_note(r, 0, t, drain, "pipeline bubble (drain)");
            t += drain;
        }
        if (k < m - 1) trace_backward(r, plan, k, &t);
    }
    for (int k = m - warm; k < m - 1; k++)
        trace_backward(r, plan, k, &t);
}

/* Forward's compute of a step on rank r: busy, and traced micro-batch by micro-batch when traced. */
static void account_forward(sim_rank *r, const sim_plan *p, int step, double step_start)
{
    r->busy[step] += p->pre;
    if (p->fwd)
        trace_micro_batches(r, p, step_start);
    else
        sim_trace_note(r, 0, step_start, p->pre, "forward");
}

/* A dense step's forward and backward on rank r: bucket k is ready after backward's segment k and its
 * clipping kernel (ready[k]); they never wait for other ranks, so the times are known once forward starts.
 * Starts the execution that plays them (*exec, or NULL when empty) and returns backward's end. */
static double play_dense(sim_world *w, sim_rank *r, int step, const sim_plan *p, double *ready, double now,
                         double step_start, sg_exec_t *exec)
{
    const et_scenario *s = w->s;
    const sim_stage *st = &w->stages[r->stage];
    const int nb = st->n_buckets, dp = w->dp.ranks > 1;
    const int overlap = s->parallel.overlap && !w->o->force_no_overlap;
    const int clip = s->optimizer.clip == ET_CLIP_PER_BUCKET;
    sim_group *grp = &w->groups[r->group];
    const int zero3 = s->parallel.zero_stage >= 3 && dp;
    if (zero3) {
        /* parameters gathered before forward and backward (the communicator plays the gathers),
         * prefetched under the forward pass */
        sg_exec_t fwd = sg_actor_exec_async(p->pre * sg_host_get_speed(r->host));
        barrier(r, grp->meet, step, "wait for other ranks");
        sg_barrier_wait(grp->meet);
        sg_exec_wait(fwd);
        account_forward(r, p, step, step_start);
    }
    double t0 = zero3 ? simgrid_get_clock() : step_start + p->pre, t = t0;
    for (int k = 0; k <= nb; k++) {
        if (k < nb)
            sim_trace_note(r, 0, t, p->seg[k], "backward to bucket %d", k);
        else
            sim_trace_note(r, 0, t, p->seg[k], "backward (rest)");
        t += p->seg[k];
        if (k < nb && clip) {
            sim_trace_note(r, 0, t, st->clip[k], "clip bucket %d", k);
            t += st->clip[k];
        }
        ready[k] = t;
    }
    if (dp) announce(grp, step, nb, overlap, ready);
    /* the previous optimizer (if folded), forward (unless ZeRO-3 ran it under the gathers) and
     * backward: one execution */
    const double exec_start = zero3 ? t0 : now;
    if (!zero3 && p->pre > 0) {
        account_forward(r, p, step, step_start);
    }
    *exec = t > exec_start ? sg_actor_exec_async((t - exec_start) * sg_host_get_speed(r->host)) : NULL;
    r->busy[step] += t - t0;
    return t;
}

/* Compute never waits for communication during backward, so its timeline is known in advance: backward
 * runs as one asynchronous execution, and the rank announces when each bucket will be ready, which hands
 * the bucket to the communicator's actor (the communication stream). */
static void gpu_actor(int argc, char **argv)
{
    (void)argc;
    sim_world *w = sim_w;
    sim_rank *r = &w->ranks[atoi(argv[1])];
    const sim_stage *st = &w->stages[r->stage];
    const et_scenario *s = w->s;
    const int nb = st->n_buckets, dp = w->dp.ranks > 1;
    const int overlap = s->parallel.overlap && !w->o->force_no_overlap;
    sim_group *grp = &w->groups[r->group];
    sim_plan plan = {0};
    plan.seg = malloc(((size_t)nb + 1) * sizeof *plan.seg);
    const size_t m = (size_t)s->batch.grad_accum;
    double *parts = traced(r) ? malloc(5 * m * sizeof *parts) : NULL;
    if (parts)
        plan.fwd = parts, plan.bwd = parts + m, plan.tp_fwd = parts + 2 * m, plan.tp_bwd = parts + 3 * m,
        plan.send = parts + 4 * m;
    double *ready = malloc(((size_t)nb + 1) * sizeof *ready);
    /* an actor has no error path: out of memory stops the simulation, and etsim reports SimGrid's stop */
    xbt_assert(plan.seg && ready && (parts || !traced(r)), "etsim: out of memory for the plan of rank %d",
               r->rank);
    /* With nothing to wait for between meeting the communicator and the optimizer, nor after it, a step's
     * optimizer runs in one execution with the next step's forward and backward: one wake-up less a step. */
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
        sim_rank_plan(w, r->rank, step, &plan);
        if (w->moe) {
            /* experts' all-to-alls as flows: compute waits for them, buckets are announced as they become
             * ready (sim_moe.c) */
            const double bwd_end = sim_moe_compute(w, r, step, &plan, ready);
            if (dp) {
                sg_barrier_wait(grp->meet);
                account_buckets(r, grp, st, step, overlap, ready, bwd_end);
            }
            r->bwd_end[step] = bwd_end;
        } else {
            sg_exec_t bwd;
            const double bwd_end = play_dense(w, r, step, &plan, ready, now, step_start, &bwd);
            if (dp) {
                sg_barrier_wait(grp->meet); /* the communicator has played every bucket's collective */
                account_buckets(r, grp, st, step, overlap, ready, bwd_end);
            }
            if (bwd) sg_exec_wait(bwd);
            r->bwd_end[step] = bwd_end;
        }
        if (s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE && dp) {
            /* global norm: a latency-bound all-reduce of one value */
            barrier(r, grp->compute_barrier, step, "wait for other ranks");
            double c0 = simgrid_get_clock();
            sg_actor_sleep_for(et_allreduce_time(&w->dp, ET_COLL_AUTO, 4, NULL));
            sim_trace_note(r, 1, c0, simgrid_get_clock() - c0, "global-norm all-reduce");
        }
        if (fold_optimizer && step < w->steps - 1) {
            optimizer_pending = plan.opt;
            continue;
        }
        sim_exec(r, plan.opt, "optimizer", step);
        if (et_scenario_gathers_parameters(s) && dp) {
            barrier(r, grp->meet, step, "wait for other ranks");
            double g0 = simgrid_get_clock();
            sg_barrier_wait(grp->meet); /* the communicator has gathered the updated parameters */
            sim_trace_note(r, 1, g0, simgrid_get_clock() - g0, "ZeRO parameter all-gather");
        }
        r->step_end[step] = simgrid_get_clock();
    }
    free(plan.seg);
    free(parts);
    free(ready);
}

/* The communication stream of a data-parallel group: per step, the ZeRO-3 parameter gathers, then each
 * bucket's collective from the latest ready time of its ranks, then the ZeRO parameter all-gather. */
static void communicator_actor(int argc, char **argv)
{
    (void)argc;
    sim_world *w = sim_w;
    const int id = atoi(argv[1]);
    sim_group *g = &w->groups[id];
    const sim_stage *st = &w->stages[g->stage];
    const et_scenario *s = w->s;
    const int nb = st->n_buckets, zero = s->parallel.zero_stage;
    const double param_bytes = st->graph.param_count * et_precision_bytes(s->precision);
    for (int step = 0; step < w->steps; step++) {
        if (zero >= 3) {
            sg_barrier_wait(g->meet);
            for (int i = 0; i < 2 * s->batch.grad_accum; i++)
                sim_ring_gather(g, param_bytes, 1, simgrid_get_clock());
            sg_barrier_wait(g->meet);
        }
        if (!w->moe) sg_sem_acquire(g->announce_gate);
        const double *latest = g->latest + (size_t)step * (nb + 1);
        double *start = g->coll_start + (size_t)step * (nb + 1), *end = g->coll_end + (size_t)step * (nb + 1);
        for (int k = 0; k < nb; k++) {
            if (w->moe) sg_sem_acquire(g->bucket_gate); /* bucket k announced by every rank */
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
        }
        sg_barrier_wait(g->meet);
        if (et_scenario_gathers_parameters(s)) {
            sg_barrier_wait(g->meet);
            sim_ring_gather(g, param_bytes, 1, simgrid_get_clock());
            sg_barrier_wait(g->meet);
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
