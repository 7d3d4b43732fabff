/* The two actors of every simulated GPU: compute and communication. */
#include <math.h>
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#include <stdio.h>
#include <stdlib.h>

#include "batch.h"
#include "sim_world.h"

XBT_LOG_NEW_DEFAULT_CATEGORY(et_actors, "etsim compute and communication actors");

sim_world *sim_w;

/* splitmix64: a seeded, platform-independent random stream per (seed, step, rank). */
static unsigned long long mix(unsigned long long x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double uniform01(unsigned long long *state)
{
    *state = mix(*state);
    return ((*state >> 11) + 0.5) / 9007199254740992.0;
}

/* Per-rank compute noise: lognormal with mean 1 (sigma from the scenario). */
static double noise_factor(const sim_world *w, int rank, int step)
{
    double sigma = w->s->simulation.straggler_sigma;
    if (sigma <= 0) return 1;
    unsigned long long st = mix(w->s->simulation.seed ^ mix((unsigned long long)step * 1000003ULL + rank));
    double u1 = uniform01(&st), u2 = uniform01(&st);
    double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    return exp(sigma * z - sigma * sigma / 2);
}

void sim_rank_plan(const sim_world *w, int rank, int step, sim_plan *plan)
{
    const et_scenario *s = w->s;
    const sim_stage *st = &w->stages[w->ranks[rank].stage];
    et_batch_shape b = et_batch_expected(s);
    double tp_f = 0, tp_b = 0;
    double F = et_phase_time(s, &st->graph, ET_PHASE_FORWARD, &b, &tp_f);
    double Bw = et_backward_segments(s, &st->graph, st->buckets, st->n_buckets, &b, plan->seg);
    et_phase_time(s, &st->graph, ET_PHASE_BACKWARD, &b, &tp_b);
    double send = et_pipeline_send_time(s, &b);
    double m = (double)s->batch.grad_accum, p = s->parallel.pipeline;
    double f = noise_factor(w, rank, step);
    /* tensor-parallel all-reduces block compute: spread them over backward in proportion */
    double stretch = Bw > 0 ? (Bw + tp_b) / Bw : 1;
    for (int k = 0; k <= st->n_buckets; k++)
        plan->seg[k] *= stretch * f;
    plan->seg[st->n_buckets] += send * f;
    plan->pre = ((m - 1 + p - 1) * (F + tp_f + Bw + tp_b + 2 * send) + F + tp_f + send) * f;
    plan->opt = et_phase_time(s, &st->graph, ET_PHASE_OPTIMIZER, &b, NULL) * f;
}

static int traced(const sim_rank *r)
{
    return sim_w->o->trace_path && r->rank % sim_w->trace_every == 0;
}

static void exec(sim_rank *r, double seconds, const char *name, int step)
{
    if (seconds <= 0) return;
    double t0 = simgrid_get_clock();
    sg_actor_execute(seconds * sg_host_get_speed(r->host));
    r->busy[step] += simgrid_get_clock() - t0;
    if (traced(r)) sim_trace_add(&sim_w->trace, r->rank, 0, name, t0, simgrid_get_clock() - t0);
}

/* Compute-actor collectives block the rank: waiting for the others counts as idle. */
static void compute_barrier(sim_rank *r, int step)
{
    double t0 = simgrid_get_clock();
    sg_barrier_wait(sim_w->groups[r->group].compute_barrier);
    r->idle[step] += simgrid_get_clock() - t0;
}

static sg_mailbox_t *compute_boxes, *comm_boxes;

static void compute_actor(int argc, char **argv)
{
    (void)argc;
    sim_world *w = sim_w;
    sim_rank *r = &w->ranks[atoi(argv[1])];
    const sim_stage *st = &w->stages[r->stage];
    const et_scenario *s = w->s;
    int nb = st->n_buckets;
    int overlap = s->parallel.overlap && !w->o->force_no_overlap;
    sim_plan plan;
    plan.seg = malloc(((size_t)nb + 1) * sizeof *plan.seg);
    char name[64];
    for (int step = 0; step < w->steps; step++) {
        if (r->rank == 0 && w->o->progress) {
            fprintf(stderr, "\retsim: simulating step %d/%d on %d GPUs", step + 1, w->steps, w->n_ranks);
            fflush(stderr);
        }
        if (step == w->steps - 1 && r->rank == 0) w->trace.window_start = simgrid_get_clock();
        r->step_start[step] = simgrid_get_clock();
        r->bwd_end[step] = -1;
        sim_rank_plan(w, r->rank, step, &plan);
        exec(r, plan.pre, "forward", step);
        for (int k = 0; k < nb; k++) {
            snprintf(name, sizeof name, "backward to bucket %d", k);
            exec(r, plan.seg[k], name, step);
            if (s->optimizer.clip == ET_CLIP_PER_BUCKET) {
                snprintf(name, sizeof name, "clip bucket %d", k);
                exec(r, st->clip[k], name, step);
            }
            if (overlap) sg_sem_release(r->ready);
        }
        exec(r, plan.seg[nb], "backward (rest)", step);
        r->bwd_end[step] = simgrid_get_clock();
        if (!overlap)
            for (int k = 0; k < nb; k++)
                sg_sem_release(r->ready);
        for (int k = 0; k < nb; k++)
            sg_sem_acquire(r->done);
        r->wait_end[step] = simgrid_get_clock();
        if (s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE && w->dp.ranks > 1) {
            /* global norm: a latency-bound all-reduce of one value */
            compute_barrier(r, step);
            sg_actor_sleep_for(et_allreduce_time(&w->dp, ET_COLL_AUTO, 4, NULL));
        }
        exec(r, plan.opt, "optimizer", step);
        if (s->parallel.zero_stage >= 1 && w->dp.ranks > 1) {
            compute_barrier(r, step);
            double t0 = simgrid_get_clock();
            sim_ring_gather(r, compute_boxes, w->groups[r->group].compute_barrier,
                            st->graph.param_count * et_precision_bytes(s->precision), 1);
            if (traced(r))
                sim_trace_add(&w->trace, r->rank, 1, "ZeRO parameter all-gather", t0,
                              simgrid_get_clock() - t0);
        }
        r->step_end[step] = simgrid_get_clock();
    }
    free(plan.seg);
}

static void comm_actor(int argc, char **argv)
{
    (void)argc;
    sim_world *w = sim_w;
    sim_rank *r = &w->ranks[atoi(argv[1])];
    const sim_stage *st = &w->stages[r->stage];
    const et_scenario *s = w->s;
    sg_bar_t barrier = w->groups[r->group].comm_barrier;
    double param_bytes = st->graph.param_count * et_precision_bytes(s->precision);
    char name[96];
    for (int step = 0; step < w->steps; step++) {
        if (s->parallel.zero_stage >= 3)
            for (int i = 0; i < 2 * s->batch.grad_accum; i++) {
                sg_barrier_wait(barrier);
                sim_ring_gather(r, comm_boxes, barrier, param_bytes, 1);
            }
        for (int k = 0; k < st->n_buckets; k++) {
            const et_bucket *b = &st->buckets[k];
            sg_sem_acquire(r->ready);
            double arrive = simgrid_get_clock();
            sg_barrier_wait(barrier);
            double start = simgrid_get_clock();
            if (r->bwd_end[step] >= 0) r->idle[step] += start - fmax(arrive, r->bwd_end[step]);
            et_coll_algo algo;
            et_bucket_comm_time(s, &w->dp, b->bytes, &algo);
            if (s->parallel.zero_stage >= 2)
                sim_ring_gather(r, comm_boxes, barrier, b->bytes, 1);
            else
                sim_allreduce(r, comm_boxes, barrier, algo, b->bytes);
            double end = simgrid_get_clock();
            if (r->group == 0) {
                double *e = &w->bucket_end[step * st->n_buckets + k];
                if (end > *e) *e = end;
                w->bucket_start[step * st->n_buckets + k] = start;
            }
            if (traced(r)) {
                if (start > arrive)
                    sim_trace_add(&w->trace, r->rank, 1, "wait for other ranks", arrive, start - arrive);
                snprintf(name, sizeof name, "%s bucket %d (%.1f MiB)",
                         s->parallel.zero_stage >= 2 ? "reduce-scatter" : et_coll_algo_names[algo], k,
                         b->bytes / 1048576.0);
                sim_trace_add(&w->trace, r->rank, 1, name, start, end - start);
            }
            sg_sem_release(r->done);
        }
    }
}

/* Collective benchmark: every rank runs the same sequence of collectives, back to back. */
static void bench_actor(int argc, char **argv)
{
    (void)argc;
    sim_world *w = sim_w;
    sim_rank *r = &w->ranks[atoi(argv[1])];
    const sim_options *o = w->o;
    for (int i = 0; i < o->bench_sizes; i++) {
        sg_barrier_wait(w->groups[r->group].comm_barrier);
        double start = simgrid_get_clock(), bytes = o->bench_bytes[i];
        if (o->bench_op == 0) {
            et_coll_algo algo;
            et_allreduce_time(&w->dp, o->bench_algo, bytes, &algo);
            sim_allreduce(r, comm_boxes, w->groups[r->group].comm_barrier, algo, bytes);
        } else {
            sim_ring_gather(r, comm_boxes, w->groups[r->group].comm_barrier, bytes, 1);
        }
        double end = simgrid_get_clock();
        if (r->group == 0) {
            w->bucket_start[i] = start;
            if (end > w->bucket_end[i]) w->bucket_end[i] = end;
        }
    }
}

void sim_start_actors(sim_world *w)
{
    compute_boxes = malloc((size_t)w->n_ranks * sizeof *compute_boxes);
    comm_boxes = malloc((size_t)w->n_ranks * sizeof *comm_boxes);
    char name[32], arg[16];
    for (int i = 0; i < w->n_ranks; i++) {
        snprintf(name, sizeof name, "compute-%d", i);
        compute_boxes[i] = sg_mailbox_by_name(name);
        snprintf(name, sizeof name, "comm-%d", i);
        comm_boxes[i] = sg_mailbox_by_name(name);
    }
    for (int i = 0; i < w->n_ranks; i++) {
        snprintf(arg, sizeof arg, "%d", i);
        const char *argv[] = {"compute", arg};
        if (w->o->bench_sizes > 0) {
            argv[0] = "bench";
            sg_actor_create("bench", w->ranks[i].host, bench_actor, 2, (char **)argv);
            continue;
        }
        sg_actor_create("compute", w->ranks[i].host, compute_actor, 2, (char **)argv);
        argv[0] = "comm";
        sg_actor_create("comm", w->ranks[i].host, comm_actor, 2, (char **)argv);
    }
}
