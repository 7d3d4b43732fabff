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

/* The child's failure, as {"error": text, "code": et_error_code} for sim_finish. */
static int fail_as(json_t **result, et_error_code code, const char *fmt, const char *a)
{
    char text[1200];
    snprintf(text, sizeof text, fmt, a);
    *result = json_pack("{s:s, s:i}", "error", text, "code", (int)code);
    return -1;
}

static int fail(json_t **result, const char *fmt, const char *a)
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
    const int x = w->s->parallel.expert;
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

/* Every pipeline stage's graph, buckets, op classes, step schedule, clipping times and bucket algorithms. */
static int build_stages(sim_world *w, json_t **result)
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
        stage->clip = calloc((size_t)stage->n_buckets + 1, sizeof *stage->clip);
        stage->algo = calloc((size_t)stage->n_buckets + 1, sizeof *stage->algo);
        if (!stage->clip || !stage->algo || et_op_classes_build(&stage->graph, &stage->classes))
            return fail_as(result, ET_ERROR_MEMORY, "out of memory for %s", "bucket plans");
        if (et_step_schedule_build(s, &stage->classes, st, stage->buckets, stage->n_buckets,
                                   s->parallel.overlap && !w->o->force_no_overlap, &stage->schedule, &err))
            return fail_as(result, err.code, "%s", err.text);
        for (int k = 0; k < stage->n_buckets; k++) {
            stage->clip[k] = et_bucket_clip_time(s, stage->buckets[k].bytes);
            const et_comm_group group = et_bucket_group(s, &stage->buckets[k], &w->dp);
            et_bucket_comm_time(s, &group, stage->buckets[k].bytes, &stage->algo[k]);
        }
    }
    return 0;
}

/* The data-parallel communicators (merged per stage when `merge`), their members and schedules. */
static int build_groups(sim_world *w, int merge, json_t **result)
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
static int build_ranks(sim_world *w, int merge, json_t **result)
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
static int sample_batches(sim_world *w, json_t **result)
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

static int build_world(sim_world *w, json_t **result)
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

static json_t *results(const sim_world *w)
{
    const et_scenario *s = w->s;
    const int S = w->steps, N = w->n_ranks;
    double *step = calloc((size_t)S, sizeof *step), *sorted = calloc((size_t)S, sizeof *sorted);
    json_t *steps = json_array(), *ranks = json_array(), *buckets = json_array(), *ops = json_array();
    double prev_end = 0, busy_sum = 0, idle_sum = 0, exposed_sum = 0;
    double factor_sum = 0;
    for (int k = 0; k < S; k++) {
        double end = 0, busy = 0, idle = 0, exposed = 0, busiest = 0;
        json_t *loads = json_array();
        for (int r = 0; r < N; r++) {
            const sim_rank *x = &w->ranks[r];
            end = fmax(end, x->step_end[k]);
            busiest = fmax(busiest, x->busy[k]);
            json_array_append_new(loads, json_real(x->busy[k]));
            busy += x->busy[k];
            idle += x->idle[k];
            exposed += (x->step_end[k] - x->step_start[k]) - x->busy[k] - x->idle[k];
        }
        step[k] = end - prev_end;
        prev_end = end;
        busy_sum += busy / N;
        idle_sum += idle / N;
        exposed_sum += exposed / N;
        double factor = busy > 0 ? busiest / (busy / N) : 1;
        factor_sum += factor;
        json_array_append_new(steps, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:o}", "step", k, "time_s",
                                               step[k], "compute_s", busy / N, "exposed_comm_s",
                                               fmax(0, exposed / N), "idle_s", idle / N, "straggler_factor",
                                               factor, "rank_compute_s", loads));
    }
    memcpy(sorted, step, (size_t)S * sizeof *step);
    qsort(sorted, (size_t)S, sizeof *sorted, compare_double);
    double mean = 0;
    for (int k = 0; k < S; k++)
        mean += step[k] / S;
    for (int r = 0; r < N; r++) {
        const sim_rank *x = &w->ranks[r];
        double busy = 0, idle = 0, exposed = 0;
        for (int k = 0; k < S; k++) {
            busy += x->busy[k] / S;
            idle += x->idle[k] / S;
            exposed += ((x->step_end[k] - x->step_start[k]) - x->busy[k] - x->idle[k]) / S;
        }
        json_array_append_new(ranks, json_pack("{s:i, s:i, s:f, s:f, s:f}", "rank", r, "stage", x->stage,
                                               "compute_s", busy, "idle_s", idle, "exposed_comm_s",
                                               fmax(0, exposed)));
    }
    const sim_stage *st0 = &w->stages[0];
    for (int k = 0; k < st0->n_buckets; k++) {
        int i = (S - 1) * st0->n_buckets + k;
        double t = w->bucket_end[i] - w->bucket_start[i], bytes = st0->buckets[k].bytes;
        et_coll_algo algo;
        const et_comm_group group = et_bucket_group(s, &st0->buckets[k], &w->dp);
        double closed = et_bucket_comm_time(s, &group, bytes, &algo);
        double factor = et_scenario_reduce_scatters_gradients(s) ? et_busbw_factor_gather(group.ranks)
                                                                 : et_busbw_factor_allreduce(group.ranks);
        json_array_append_new(
            buckets,
            json_pack("{s:i, s:f, s:s, s:f, s:f, s:f, s:f}", "bucket", k, "bytes", bytes, "algorithm",
                      et_scenario_reduce_scatters_gradients(s) ? "reduce_scatter" : et_coll_algo_names[algo],
                      "time_s", t, "closed_form_s", closed, "algbw_GBps", t > 0 ? bytes / t / 1e9 : 0,
                      "busbw_GBps", t > 0 ? bytes / t / 1e9 * factor : 0));
    }
    /* per op of stage 0, over its ranks and the simulated steps: seconds per step */
    const et_batch_shape b = et_batch_expected(s);
    json_decref(ops);
    ops = report_op_rows(s, &st0->graph, &b);
    json_t *out = json_pack(
        "{s:s, s:i, s:b, s:{s:f, s:f, s:f, s:f, s:f}, s:f, s:f, s:f, s:f, s:o, s:o, s:o, s:o}", "engine",
        "simgrid", "simulated_steps", S, "detailed_collectives", w->o->detailed, "step_time_s", "mean", mean,
        "p50", et_quantile_sorted(sorted, S, 0.5), "p99", et_quantile_sorted(sorted, S, 0.99), "min",
        sorted[0], "max", sorted[S - 1], "compute_s", busy_sum / S, "exposed_comm_s",
        fmax(0, exposed_sum / S), "idle_s", idle_sum / S, "straggler_factor", factor_sum / S, "steps", steps,
        "buckets", buckets, "ops", ops, "ranks", ranks);
    if (out && w->moe) json_object_set_new(out, "alltoall", sim_moe_results(w));
    free(step);
    free(sorted);
    return out;
}

static json_t *bench_results(const sim_world *w)
{
    const sim_options *o = w->o;
    json_t *rows = json_array();
    int N = w->dp.ranks;
    for (int i = 0; i < o->bench_sizes; i++) {
        double bytes = o->bench_bytes[i], t = w->bucket_end[i] - w->bucket_start[i], closed;
        et_coll_algo algo = ET_COLL_RING;
        if (o->bench_op == 0)
            closed = et_allreduce_time(&w->dp, o->bench_algo, bytes, &algo);
        else
            closed = et_ring_reduce_scatter_time(&w->dp, bytes);
        double factor = o->bench_op == 0 ? et_busbw_factor_allreduce(N) : et_busbw_factor_gather(N);
        json_array_append_new(
            rows, json_pack("{s:f, s:s, s:f, s:f, s:f, s:f, s:f}", "bytes", bytes, "algorithm",
                            et_coll_algo_names[algo], "time_s", t, "closed_form_s", closed, "algbw_GBps",
                            t > 0 ? bytes / t / 1e9 : 0, "busbw_GBps", t > 0 ? bytes / t / 1e9 * factor : 0,
                            "error", closed > 0 ? t / closed - 1 : 0));
    }
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:o}", "engine", "simgrid", "collective",
                     sim_bench_op_names[o->bench_op], "ranks", N, "nodes", w->dp.nodes, "ranks_per_node",
                     w->dp.ranks_per_node, "results", rows);
}

/* One buffer, written in large chunks (json_dumpfd writes piecemeal). */
static int write_json_fd(int fd, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (!text) return -1;
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    free(text);
    return done == len ? 0 : -1;
}

/* Reads a whole pipe into memory and parses it (json_loadfd reads byte by byte). */
static json_t *read_json_fd(int fd)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) break;
            buf = bigger;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            json_t *j = len ? json_loadb(buf, len, 0, NULL) : NULL;
            free(buf);
            return j;
        }
        len += (size_t)n;
    }
    free(buf);
    return NULL;
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
    json_t *result = NULL;
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
        write_json_fd(fd, result);
        return 1;
    }
    et_fabric fabric = {.slowest = -1};
    if (generated) {
        et_error err;
        char text[512];
        if (et_fabric_build(&s->cluster, &fabric, &err)) {
            fail_as(&result, err.code, "%s", err.text);
            write_json_fd(fd, result);
            return 1;
        }
        if (et_fabric_zone_create(&fabric, text, sizeof text)) {
            fail_as(&result, ET_ERROR_INTERNAL, "%s", text);
            write_json_fd(fd, result);
            return 1;
        }
    } else {
        char text[600];
        if (et_load_platform(s->cluster.platform_file, text, sizeof text)) {
            char full[1200];
            snprintf(full, sizeof full, "%s: %s", s->cluster.platform_file, text);
            fail(&result, "%s", full);
            write_json_fd(fd, result);
            return 1;
        }
    }
    sim_world w = {.s = s,
                   .o = o,
                   .steps = o->steps > 0 ? o->steps : s->simulation.steps,
                   .gpu_speed = generated ? fabric.gpu_speed : NULL};
    sim_w = &w;
    if (build_world(&w, &result)) {
        write_json_fd(fd, result);
        return 1;
    }
    char missing[1200];
    if (!generated && sim_check_routes(&w, missing, sizeof missing)) {
        fail(&result, "%s", missing);
        write_json_fd(fd, result);
        return 1;
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
            write_json_fd(fd, result);
            return 1;
        }
    }
    return write_json_fd(fd, o->bench_sizes > 0 ? bench_results(&w) : results(&w)) ? 1 : 0;
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

int sim_finish(sim_child *child, const et_scenario *s, json_t **out, et_error *err)
{
    *out = NULL;
    json_t *j = read_json_fd(child->fd);
    close(child->fd);
    int status = 0;
    waitpid(child->pid, &status, 0);
    child->pid = -1;
    child->fd = -1;
    json_t *e = j ? json_object_get(j, "error") : NULL;
    if (e) {
        json_t *code = json_object_get(j, "code");
        et_error_set_code(err,
                          json_is_integer(code) ? (et_error_code)json_integer_value(code) : ET_ERROR_INTERNAL,
                          s->source, 0, 0, NULL, "simulation failed: %s", json_string_value(e));
        json_decref(j);
        return -1;
    }
    if (!j || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        json_decref(j);
        if (WIFSIGNALED(status))
            return et_error_set_code(err, ET_ERROR_INTERNAL, s->source, 0, 0, NULL,
                                     "simulation failed: SimGrid stopped with signal %d "
                                     "(see its messages above)",
                                     WTERMSIG(status));
        return et_error_set_code(err, ET_ERROR_INTERNAL, s->source, 0, 0, NULL,
                                 "simulation failed (see SimGrid's messages above)");
    }
    *out = j;
    return 0;
}

int sim_run(const et_scenario *s, const sim_options *o, json_t **out, et_error *err)
{
    sim_child child;
    *out = NULL;
    if (sim_start(s, o, &child, err)) return -1;
    return sim_finish(&child, s, out, err);
}

int sim_runs_once(const et_scenario *s, const sim_options *o)
{
    const et_method *m = &s->method;
    return m->kind != ET_METHOD_TENSOR_TRAIN || m->n_phases <= 1 || o->bench_sizes > 0;
}

int sim_run_phases(const et_scenario *s, const sim_options *o, json_t **out, et_error *err)
{
    const et_method *m = &s->method;
    if (sim_runs_once(s, o)) return sim_run(s, o, out, err);
    json_t *phases = json_array(), *first = NULL;
    et_scenario phase = *s;
    phase.method.n_phases = 1;
    for (int i = 0; i < m->n_phases; i++) {
        phase.method.tt_rank = m->phases[i].rank;
        json_t *sim;
        if (sim_run(&phase, o, &sim, err)) {
            json_decref(phases);
            json_decref(first);
            return -1;
        }
        json_array_append_new(phases, json_pack("{s:f, s:i, s:O}", "from", m->phases[i].from, "rank",
                                                m->phases[i].rank, "step_time_s",
                                                json_object_get(sim, "step_time_s")));
        if (i == 0)
            first = sim;
        else
            json_decref(sim);
    }
    json_object_set_new(first, "phases", phases);
    *out = first;
    return 0;
}
