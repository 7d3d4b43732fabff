#define _POSIX_C_SOURCE 200809L
#include "step_sim.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <simgrid/engine.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/config.h>
#include <xbt/log.h>

#include "batch.h"
#include "fabric_zone.h"
#include "platform.h"
#include "quantile.h"
#include "report_csv.h"
#include "sg_cxx.h"
#include "sim_world.h"
#include "wall_clock.h"

const char *const sim_bench_op_names[] = {"allreduce", "reduce_scatter", "allgather", NULL};

/* The child's failure (sent to sim_finish in place of the results): always -1. */
static int fail_as(et_error *result, et_error_code code, const char *fmt, const char *a)
{
    return et_error_set_code(result, code, NULL, 0, 0, NULL, fmt, a);
}

static int fail(et_error *result, const char *fmt, const char *a)
{
    return fail_as(result, ET_ERROR_INPUT, fmt, a);
}

/* The host of every rank, from one pass over the platform's hosts named gpu-<node>-<local> (looking each up
 * by name walks every zone); NULL entries for ranks without a host. NULL when out of memory. */
static sg_host_t *hosts_by_rank(const et_scenario *s)
{
    const int k = s->cluster.gpus_per_node, gpus = et_scenario_gpus(s);
    sg_host_t *by_rank = calloc((size_t)gpus, sizeof *by_rank);
    sg_host_t *all = sg_host_list();
    size_t n = sg_host_count();
    for (size_t i = 0; i < n && by_rank && all; i++) {
        int node, local, end = 0;
        const char *name = sg_host_get_name(all[i]);
        if (sscanf(name, "gpu-%d-%d%n", &node, &local, &end) == 2 && name[end] == '\0' && node >= 0 &&
            local >= 0 && local < k && (long)node * k + local < gpus)
            by_rank[node * k + local] = all[i];
    }
    free(all);
    return by_rank;
}

/* The replicas' shapes at the front of `shapes` spread over their context-parallel ranks, each a share
 * (in place, from the back). Returns 0. */
static int expand_context(const et_scenario *s, et_batch_shape *shapes, int replicas, int cp)
{
    for (int d = replicas * cp - 1; d >= 0; d--)
        shapes[d] = et_batch_context_share(s, shapes[d / cp]);
    return 0;
}

/* A group's buffers for planning and playing its phases' flows (at most 4 per member): -1 when out of
 * memory. */
static int flow_buffers(sim_group *g)
{
    const size_t n = 4 * (size_t)g->size + 8;
    g->flows = malloc(n * sizeof *g->flows);
    g->comms = malloc(n * sizeof *g->comms);
    int ok = g->flows && g->comms;
    for (int p = 0; p < SIM_PATTERNS; p++) {
        g->plans[p].n = -1;
        g->plans[p].launch = malloc(n * sizeof *g->plans[p].launch);
        ok = ok && g->plans[p].launch;
    }
    return ok ? 0 : -1;
}

/* Each communicator's members as the x groups of ranks holding the same experts (every x-th member),
 * which reduce the expert buckets: the same actor plays them, as subgroups of one group (sim_world.h). */
static int expert_groups(sim_world *w)
{
    const int x = et_scenario_expert_data_span(w->s); /* every x-th member shares the experts */
    w->edp = et_ep_data_group(w->s);
    w->expert_groups = calloc((size_t)w->n_groups, sizeof *w->expert_groups);
    if (!w->expert_groups) return -1;
    for (int i = 0; i < w->n_groups; i++) {
        const sim_group *g = &w->groups[i];
        sim_group *e = &w->expert_groups[i];
        const size_t size = (size_t)g->size;
        e->size = g->size, e->stage = g->stage, e->subgroups = x, e->sub_size = g->size / x;
        e->comm = &w->edp;
        e->members = malloc(size * sizeof(int));
        if (!e->members || flow_buffers(e)) return -1;
        for (int j = 0; j < x; j++)
            for (int q = 0; q < e->sub_size; q++)
                e->members[j * e->sub_size + q] = g->members[q * x + j];
    }
    return 0;
}

/* Every pipeline stage's graph, buckets, op classes, step schedule and bucket algorithms. */
static int build_stages(sim_world *w, et_error *result)
{
    const et_scenario *s = w->s;
    const int pp = s->parallel.pipeline;
    et_error err;
    for (int st = 0; st < pp; st++) {
        sim_stage *stage = &w->stages[st];
        et_graph_options o = et_scenario_graph_options(s, st);
        if (et_graph_build(&s->model, &o, &stage->graph, &err) ||
            et_buckets_build(&stage->graph, s->parallel.bucket_bytes, et_precision_bytes(s->precision),
                             &stage->buckets, &stage->n_buckets, &err))
            return fail_as(result, err.code, "%s", err.text);
        stage->algo = calloc((size_t)stage->n_buckets + 1, sizeof *stage->algo);
        if (!stage->algo || et_op_classes_build(&stage->graph, &stage->classes))
            return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "bucket plans");
        if (et_step_schedule_build(s, &stage->classes, st, stage->buckets, stage->n_buckets,
                                   s->parallel.overlap && !w->o->force_no_overlap, &stage->schedule, &err))
            return fail_as(result, err.code, "%s", err.text);
        for (int k = 0; k < stage->n_buckets; k++) {
            const et_comm_group group = et_bucket_group(s, &stage->buckets[k], &w->dp);
            et_bucket_comm_time(s, &group, stage->buckets[k].bytes, &stage->algo[k]);
        }
    }
    return 0;
}

/* The data-parallel communicators (merged per stage when `merge`), their members and schedules. */
static int build_groups(sim_world *w, int merge, et_error *result)
{
    const et_scenario *s = w->s;
    const int t = s->parallel.tensor,
              dp = et_scenario_grad_ranks(s); /* data x context ranks: the gradient communicator */
    /* Megatron order: tensor rank fastest, then data, then pipeline stage */
    for (int g = 0; g < w->n_groups; g++) {
        sim_group *grp = &w->groups[g];
        grp->subgroups = merge ? t : 1;
        grp->sub_size = dp;
        grp->size = grp->subgroups * dp;
        grp->members = malloc((size_t)grp->size * sizeof(int));
        if (!grp->members) return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "groups");
        grp->stage = merge ? g : g / t;
        const size_t size = (size_t)grp->size;
        grp->meet = sg_barrier_init((unsigned)size + 1);
        grp->compute_barrier = sg_barrier_init((unsigned)size);
        size_t nb = (size_t)w->stages[grp->stage].n_buckets + 1, records = (size_t)w->steps * nb;
        grp->latest = malloc(sizeof(double) * records);
        grp->coll_start = calloc(records, sizeof(double));
        grp->coll_end = calloc(records, sizeof(double));
        grp->bucket_announced = calloc(records, sizeof(int));
        grp->bucket_gate = sg_sem_init(0);
        if (!grp->latest || !grp->coll_start || !grp->coll_end || !grp->bucket_announced || flow_buffers(grp))
            return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "collective schedules");
        for (size_t i = 0; i < records; i++)
            grp->latest[i] = -INFINITY;
    }
    return 0;
}

/* Every rank: its stage, communicator, host and per-step records. */
static int build_ranks(sim_world *w, int merge, et_error *result)
{
    const et_scenario *s = w->s;
    const int gpus = et_scenario_gpus(s), t = s->parallel.tensor, pp = s->parallel.pipeline,
              dp = et_scenario_grad_ranks(s);
    const int per_stage = gpus / pp;
    size_t per_step = (size_t)w->steps;
    sg_host_t *by_rank = hosts_by_rank(s);
    if (!by_rank) return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "the host table");
    for (int rank = 0; rank < gpus; rank++) {
        sim_rank *r = &w->ranks[rank];
        int st = rank / per_stage, within = rank % per_stage, d = within / t, tp = within % t;
        r->rank = rank;
        r->stage = st;
        r->group = merge ? st : st * t + tp;
        r->index = d;
        w->groups[r->group].members[(merge ? tp * dp : 0) + d] = rank;
        r->host = by_rank[rank];
        if (!r->host) {
            char host[64];
            et_fabric_host_name(host, sizeof host, rank / s->cluster.gpus_per_node,
                                rank % s->cluster.gpus_per_node);
            free(by_rank);
            return fail(result, "the platform has no host named %s (hosts must be gpu-<node>-<local>)", host);
        }
        double *block = calloc(5 * per_step, sizeof(double));
        if (!block) {
            free(by_rank);
            return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "per-step records");
        }
        r->step_start = block;
        r->step_end = block + per_step;
        r->busy = block + 2 * per_step;
        r->bwd_end = block + 3 * per_step;
        r->idle = block + 4 * per_step;
    }
    free(by_rank);
    return 0;
}

/* Each data-parallel rank's batch of every micro-batch of every step, from the sampling library. */
static int sample_batches(sim_world *w, et_error *result)
{
    const et_scenario *s = w->s;
    const int dp = et_scenario_grad_ranks(s);
    et_error err;
    const int m = (int)s->batch.grad_accum;
    /* context-parallel ranks share their replica's sequences (each its share of them) */
    const int replicas = s->parallel.data, cp = dp / replicas;
    w->shapes = malloc((size_t)w->steps * m * dp * sizeof *w->shapes);
    et_sampler sampler;
    if (!w->shapes || et_sampler_init(&sampler, &s->data.lengths, &s->data.sampling, (int)s->batch.local,
                                      replicas, s->simulation.seed, s->source, "$.data.sampling", &err))
        return fail_as(result, w->shapes ? err.code : ET_ERROR_MEMORY, "cannot sample batches: %s",
                       w->shapes ? err.text : "out of memory");
    for (int k = 0; k < w->steps * m; k++)
        if (et_sampler_shapes(&sampler, &s->model, s->data.unpadded, k, w->shapes + (size_t)k * dp) ||
            expand_context(s, w->shapes + (size_t)k * dp, replicas, cp)) {
            et_sampler_free(&sampler);
            return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "sampled batches");
        }
    et_sampler_free(&sampler);
    return 0;
}

static int build_world(sim_world *w, et_error *result)
{
    const et_scenario *s = w->s;
    const int gpus = et_scenario_gpus(s), t = s->parallel.tensor, pp = s->parallel.pipeline;
    w->n_ranks = gpus;
    w->dp = et_dp_group(s);
    w->ranks = calloc((size_t)gpus, sizeof *w->ranks);
    /* identical communicators merged (sim_world.h): a stage's tensor ranks compute alike without per-rank
     * noise, and a generated fabric without faults treats every GPU of a node alike */
    const et_cluster *cl = &s->cluster;
    /* experts' all-to-alls as flows (sim_moe.c); their tensor ranks route differently, never merged */
    w->moe = s->model.moe.experts > 0 && s->parallel.expert > 1 && w->o->bench_sizes == 0;
    const int merge = t > 1 && !w->moe && !w->o->all_groups && s->simulation.straggler_sigma <= 0 &&
                      !cl->platform_file[0] && cl->n_faults == 0 && !cl->random_faults.set;
    w->n_groups = merge ? pp : pp * t;
    w->groups = calloc((size_t)w->n_groups, sizeof *w->groups);
    w->n_stages = pp;
    w->stages = calloc((size_t)pp, sizeof *w->stages);
    if (!w->ranks || !w->groups || !w->stages)
        return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "the simulated ranks");
    if (build_stages(w, result) || build_groups(w, merge, result) || build_ranks(w, merge, result)) return -1;
    if (w->moe && (sim_moe_build(w) || expert_groups(w)))
        return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "the expert-parallel groups");
    size_t records =
        w->o->bench_sizes > 0 ? (size_t)w->o->bench_sizes : (size_t)w->steps * (size_t)w->stages[0].n_buckets;
    w->bucket_start = calloc(records + 1, sizeof(double));
    w->bucket_end = calloc(records + 1, sizeof(double));
    if (!w->bucket_start || !w->bucket_end)
        return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "bucket records");
    if (sample_batches(w, result)) return -1;
    /* Mirroring needs flows whose progress depends only on the links they cross: true of CM02 and of LV08
     * and SMPI without cross-traffic (a reverse flow would load links the route does not list); not of
     * the IB model, which penalises flows by the others at their hosts. */
    char model[32];
    et_network_model(model, sizeof model);
    w->mirror_allowed = !sg_cfg_get_boolean("network/crosstraffic") &&
                        (!strcmp(model, "CM02") || !strcmp(model, "LV08") || !strcmp(model, "SMPI"));
    /* Each phase's latency is its closed form's alpha term, slept by the communicator; flows then start
     * together. CM02 and LV08 would also make every flow wait its route latency and, worse, weigh its
     * share of a link by the inverse of that latency (TCP's RTT unfairness, which RDMA fabrics do not
     * have): their flows pay no latency of their own. Other models keep theirs, and flows start early by
     * it. */
    w->flow_latency_factor = s->cluster.latency_factor;
    if (!strcmp(model, "CM02") || !strcmp(model, "LV08")) {
        sg_cfg_set_double("network/latency-factor", 0.0);
        w->flow_latency_factor = 0;
        /* and with no TCP window (gamma 0), no flow has a rate bound below its links' shares */
        w->equal_shares = w->mirror_allowed && sg_cfg_get_double("network/TCP-gamma") == 0;
    }
    /* all-to-all flows share links with the communicators' flows: no flow is alone, nor played by the
     * flows of one link */
    if (w->moe) w->mirror_allowed = w->equal_shares = 0;
    sim_claim_links(w);
    int keep = w->o->trace_ranks > 0 ? w->o->trace_ranks : 64;
    w->trace_every = gpus > keep ? (gpus + keep - 1) / keep : 1;
    return 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The bucket collectives of the last step on stage 0's first communicator, or the benchmark's sizes. */
static void collective_record(sim_collective_record *c, double bytes, const char *algorithm, double t,
                              double closed, double busbw_factor)
{
    c->bytes = bytes;
    snprintf(c->algorithm, sizeof c->algorithm, "%s", algorithm);
    c->time = t;
    c->closed_form = closed;
    c->algbw_GBps = t > 0 ? bytes / t / 1e9 : 0;
    c->busbw_GBps = c->algbw_GBps * busbw_factor;
    c->error = closed > 0 ? t / closed - 1 : 0;
}

static void bucket_records(const sim_world *w, sim_result *out)
{
    const et_scenario *s = w->s;
    const sim_stage *st0 = &w->stages[0];
    for (int k = 0; k < out->n_collectives; k++) {
        const int i = (w->steps - 1) * st0->n_buckets + k;
        const double bytes = st0->buckets[k].bytes;
        et_coll_algo algo;
        const et_comm_group group = et_bucket_group(s, &st0->buckets[k], &w->dp);
        const double closed = et_bucket_comm_time(s, &group, bytes, &algo);
        const int scatter = et_scenario_reduce_scatters_gradients(s);
        collective_record(&out->collectives[k], bytes, scatter ? "reduce_scatter" : et_coll_algo_names[algo],
                          w->bucket_end[i] - w->bucket_start[i], closed,
                          scatter ? et_busbw_factor_gather(group.ranks)
                                  : et_busbw_factor_allreduce(group.ranks));
    }
}

/* Per step, per rank and over the run: step times, compute, exposed communication, idle time. */
static void step_records(const sim_world *w, sim_result *out, double *sorted)
{
    const int S = w->steps, N = w->n_ranks;
    double prev_end = 0;
    for (int k = 0; k < S; k++) {
        double end = 0, busy = 0, idle = 0, exposed = 0, busiest = 0;
        for (int r = 0; r < N; r++) {
            const sim_rank *x = &w->ranks[r];
            end = fmax(end, x->step_end[k]);
            busiest = fmax(busiest, x->busy[k]);
            out->rank_compute[(size_t)k * N + r] = x->busy[k];
            busy += x->busy[k];
            idle += x->idle[k];
            exposed += (x->step_end[k] - x->step_start[k]) - x->busy[k] - x->idle[k];
        }
        sim_step_record *rec = &out->steps[k];
        *rec = (sim_step_record){end - prev_end, busy / N, fmax(0, exposed / N), idle / N,
                                 busy > 0 ? busiest / (busy / N) : 1};
        prev_end = end;
        out->compute += busy / N / S;
        out->idle += idle / N / S;
        out->exposed_comm += exposed / N / S;
        out->straggler_factor += rec->straggler_factor / S;
        out->step.mean += rec->time / S;
        sorted[k] = rec->time;
    }
    out->exposed_comm = fmax(0, out->exposed_comm);
    qsort(sorted, (size_t)S, sizeof *sorted, compare_double);
    out->step.p50 = et_quantile_sorted(sorted, S, 0.5);
    out->step.p99 = et_quantile_sorted(sorted, S, 0.99);
    out->step.min = sorted[0];
    out->step.max = sorted[S - 1];
    for (int r = 0; r < N; r++) {
        const sim_rank *x = &w->ranks[r];
        sim_rank_record *rec = &out->ranks[r];
        *rec = (sim_rank_record){.rank = r, .stage = x->stage};
        for (int k = 0; k < S; k++) {
            rec->compute += x->busy[k] / S;
            rec->idle += x->idle[k] / S;
            rec->exposed_comm += ((x->step_end[k] - x->step_start[k]) - x->busy[k] - x->idle[k]) / S;
        }
        rec->exposed_comm = fmax(0, rec->exposed_comm);
    }
}

/* What the training steps measured; -1 when out of memory. */
static int results(const sim_world *w, sim_result *out)
{
    const int S = w->steps, N = w->n_ranks;
    memset(out, 0, sizeof *out);
    out->simulated_steps = S;
    out->detailed = w->o->detailed;
    out->n_steps = S, out->n_ranks = N;
    out->n_collectives = w->stages[0].n_buckets;
    out->steps = calloc((size_t)S, sizeof *out->steps);
    out->rank_compute = calloc((size_t)S * N, sizeof *out->rank_compute);
    out->ranks = calloc((size_t)N, sizeof *out->ranks);
    out->collectives = calloc((size_t)out->n_collectives + 1, sizeof *out->collectives);
    double *sorted = calloc((size_t)S, sizeof *sorted);
    if (!out->steps || !out->rank_compute || !out->ranks || !out->collectives || !sorted) {
        free(sorted);
        sim_result_free(out);
        return -1;
    }
    step_records(w, out, sorted);
    free(sorted);
    bucket_records(w, out);
    if (w->moe) {
        out->has_alltoall = true;
        sim_moe_results(w, &out->alltoall);
    }
    return 0;
}

static int bench_results(const sim_world *w, sim_result *out)
{
    const sim_options *o = w->o;
    const int N = w->dp.ranks;
    memset(out, 0, sizeof *out);
    out->bench = true;
    snprintf(out->collective, sizeof out->collective, "%s", sim_bench_op_names[o->bench_op]);
    out->bench_ranks = N, out->bench_nodes = w->dp.nodes, out->bench_ranks_per_node = w->dp.ranks_per_node;
    out->n_collectives = o->bench_sizes;
    out->collectives = calloc((size_t)o->bench_sizes + 1, sizeof *out->collectives);
    if (!out->collectives) return -1;
    for (int i = 0; i < o->bench_sizes; i++) {
        const double bytes = o->bench_bytes[i];
        et_coll_algo algo = ET_COLL_RING;
        const double closed = o->bench_op == 0 ? et_allreduce_time(&w->dp, o->bench_algo, bytes, &algo)
                                               : et_ring_reduce_scatter_time(&w->dp, bytes);
        collective_record(&out->collectives[i], bytes, et_coll_algo_names[algo],
                          w->bucket_end[i] - w->bucket_start[i], closed,
                          o->bench_op == 0 ? et_busbw_factor_allreduce(N) : et_busbw_factor_gather(N));
    }
    return 0;
}

/* The child's failure (what sim_finish reports), sent in place of the results: 1, the child's exit status. */
static int send_failure(int fd, const et_error *f)
{
    sim_result_send_failure(fd, f->code, f->text);
    return 1;
}

static int send_results(int fd, const sim_world *w)
{
    sim_result r;
    if ((w->o->bench_sizes > 0 ? bench_results(w, &r) : results(w, &r))) {
        sim_result_send_failure(fd, ET_ERROR_MEMORY, "out of memory for the results");
        return 1;
    }
    const int rc = sim_result_send(fd, &r) ? 1 : 0;
    sim_result_free(&r);
    return rc;
}

/* --stats: what the simulation cost, for the scaling benchmark (bench/sim_scaling.sh). The peak resident
 * memory is the simulator's own (this child process: SimGrid, the actors, the world), not etsim's. */
static void print_stats(const sim_world *w, double setup_s, double run_s)
{
    struct rusage ru;
    double peak_mib = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024.0 : 0;
    fprintf(stderr,
            "etsim: stats: %d GPUs, %d steps: set-up %.3f s, simulation %.3f s; flows %lld modelled, %lld "
            "simulated; %.2f us of simulation per GPU and step; peak RSS %.1f MiB (%.1f KiB per GPU)\n",
            w->n_ranks, w->steps, setup_s, run_s, w->flows_modelled, w->flows_simulated,
            1e6 * run_s / ((double)w->n_ranks * w->steps), peak_mib, peak_mib * 1024 / w->n_ranks);
}

int sim_child_main(const et_scenario *s, const sim_options *o, int fd)
{
    et_error result;
    const double t_begin = et_wall_seconds();
    const int generated = !s->cluster.platform_file[0];
    /* etsim's defaults, then the user's --cfg and --log (later ones win). Actors here are shallow: 128 KiB
     * stacks, and no guard pages (each costs two memory mappings, and 65,536 actors would pass Linux's
     * default vm.max_map_count of 65,530). A generated cluster's network configuration comes first too; a
     * platform file carries its own. */
    char config[PLATFORM_CONFIG_OPTIONS][96];
    char *argv[SIM_MAX_SIMGRID_ARGS + PLATFORM_CONFIG_OPTIONS + 8];
    int argc = 0;
    argv[argc++] = "etsim";
    argv[argc++] = "--log=root.thresh:warning";
    argv[argc++] = "--cfg=contexts/stack-size:128";
    argv[argc++] = "--cfg=contexts/guard-size:0";
    for (int i = 0, n = generated ? platform_config_options(s, config) : 0; i < n; i++)
        argv[argc++] = config[i];
    /* logs and the context options (read while SimGrid starts; etsim checks them first) go to
     * simgrid_init, the others are set one by one after it */
    for (int i = 0; i < o->n_simgrid_args; i++)
        if (!strncmp(o->simgrid_args[i], "--log=", 6) || !strncmp(o->simgrid_args[i], "--cfg=contexts/", 15))
            argv[argc++] = (char *)o->simgrid_args[i];
    argv[argc] = NULL;
    simgrid_init(&argc, argv);
    /* the user's options one by one, so that a bad one is an error message rather than SimGrid's abort */
    for (int i = 0; i < o->n_simgrid_args; i++) {
        char why[256];
        if (strncmp(o->simgrid_args[i], "--cfg=", 6) || !strncmp(o->simgrid_args[i], "--cfg=contexts/", 15) ||
            !et_cfg_set(o->simgrid_args[i] + 6, why, sizeof why))
            continue;
        char text[600];
        snprintf(text, sizeof text, "--cfg %s: %s", o->simgrid_args[i] + 6, why);
        fail(&result, "%s", text);
        return send_failure(fd, &result);
    }
    et_fabric fabric = {.slowest = -1};
    if (generated) {
        et_error err;
        char text[512];
        if (et_fabric_build(&s->cluster, &fabric, &err)) {
            fail_as(&result, err.code, "%s", err.text);
            return send_failure(fd, &result);
        }
        if (et_fabric_zone_create(&fabric, text, sizeof text)) {
            fail_as(&result, ET_ERROR_INTERNAL, "%s", text);
            return send_failure(fd, &result);
        }
    } else {
        char text[600];
        if (et_load_platform(s->cluster.platform_file, text, sizeof text)) {
            char full[1200];
            snprintf(full, sizeof full, "%s: %s", s->cluster.platform_file, text);
            fail(&result, "%s", full);
            return send_failure(fd, &result);
        }
    }
    sim_world w = {.s = s,
                   .o = o,
                   .steps = o->steps > 0 ? o->steps : s->simulation.steps,
                   .gpu_speed = generated ? fabric.gpu_speed : NULL};
    sim_w = &w;
    if (build_world(&w, &result)) return send_failure(fd, &result);
    char missing[1200];
    if (!generated && sim_check_routes(&w, missing, sizeof missing)) {
        fail(&result, "%s", missing);
        return send_failure(fd, &result);
    }
    sim_start_actors(&w);
    const double t_run = et_wall_seconds();
    simgrid_run();
    if (o->progress) fputc('\n', stderr);
    if (o->stats) print_stats(&w, t_run - t_begin, et_wall_seconds() - t_run);
    if (o->trace_path) {
        et_error err;
        int *stage = malloc((size_t)w.n_ranks * sizeof *stage);
        for (int r = 0; stage && r < w.n_ranks; r++)
            stage[r] = w.ranks[r].stage;
        int bad = !stage ||
                  sim_trace_write(&w.trace, o->trace_path, s->name, stage, s->cluster.gpus_per_node, &err);
        if (!stage) snprintf(err.text, sizeof err.text, "out of memory");
        free(stage);
        if (bad) {
            fail_as(&result, stage ? err.code : ET_ERROR_MEMORY, "cannot write the trace: %s", err.text);
            return send_failure(fd, &result);
        }
    }
    return send_results(fd, &w);
}

int sim_check_size(const et_scenario *s, et_error *err)
{
    if (et_scenario_gpus(s) <= ET_MAX_SIMULATED_GPUS) return 0;
    return et_error_set(
        err, s->source, 0, 0, "$.cluster",
        "%d GPUs are more than the simulator plays (at most %d); --analytic estimates any size",
        et_scenario_gpus(s), ET_MAX_SIMULATED_GPUS);
}

int sim_start(const et_scenario *s, const sim_options *o, sim_child *child, et_error *err)
{
    child->pid = -1;
    child->fd = -1;
    if (sim_check_size(s, err)) return -1;
    int fds[2];
    if (pipe(fds))
        return et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL, "cannot create a pipe: %s",
                                 strerror(errno));
    fflush(stdout);
    fflush(stderr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL, "cannot fork the simulator: %s",
                                 strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        /* the simulator dies with etsim: a killed etsim leaves no child simulating on */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1); /* etsim died before prctl */
        int rc = sim_child_main(s, o, fds[1]);
        close(fds[1]);
        _exit(rc);
    }
    close(fds[1]);
    child->pid = pid;
    child->fd = fds[0];
    return 0;
}

int sim_finish(sim_child *child, const et_scenario *s, sim_result *out, et_error *err)
{
    et_error received;
    const int bad = sim_result_receive(child->fd, out, &received);
    close(child->fd);
    int status = 0;
    waitpid(child->pid, &status, 0);
    child->pid = -1;
    child->fd = -1;
    if (!bad && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    sim_result_free(out);
    if (bad == -1) /* the child's own failure, or out of memory here */
        return et_error_set_code(err, received.code, s->source, 0, 0, NULL, "simulation failed: %s",
                                 received.text);
    if (WIFSIGNALED(status))
        return et_error_set_code(err, ET_ERROR_INTERNAL, s->source, 0, 0, NULL,
                                 "simulation failed: SimGrid stopped with signal %d (see its messages above)",
                                 WTERMSIG(status));
    return et_error_set_code(err, ET_ERROR_INTERNAL, s->source, 0, 0, NULL,
                             "simulation failed (see SimGrid's messages above)");
}

int sim_run(const et_scenario *s, const sim_options *o, sim_result *out, et_error *err)
{
    sim_child child;
    memset(out, 0, sizeof *out);
    if (sim_start(s, o, &child, err)) return -1;
    return sim_finish(&child, s, out, err);
}

int sim_runs_once(const et_scenario *s, const sim_options *o)
{
    const et_method *m = &s->method;
    return m->kind != ET_METHOD_TENSOR_TRAIN || m->n_phases <= 1 || o->bench_sizes > 0;
}

int sim_run_phases(const et_scenario *s, const sim_options *o, sim_result *out, et_error *err)
{
    const et_method *m = &s->method;
    if (sim_runs_once(s, o)) return sim_run(s, o, out, err);
    sim_phase_record *phases = calloc((size_t)m->n_phases, sizeof *phases);
    if (!phases)
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for the phases");
    et_scenario phase = *s;
    phase.method.n_phases = 1;
    for (int i = 0; i < m->n_phases; i++) {
        phase.method.tt_rank = m->phases[i].rank;
        sim_result r;
        if (sim_run(&phase, o, &r, err)) {
            free(phases);
            if (i > 0) sim_result_free(out);
            return -1;
        }
        phases[i] = (sim_phase_record){m->phases[i].from, m->phases[i].rank, r.step};
        if (i == 0)
            *out = r;
        else
            sim_result_free(&r);
    }
    out->phases = phases;
    out->n_phases = m->n_phases;
    return 0;
}
