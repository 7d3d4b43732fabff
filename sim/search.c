#define _POSIX_C_SOURCE 200809L
#include "search.h"

#include "graph.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "error_band.h"
#include "json_reader.h"
#include "scenario_override.h"
#include "wall_clock.h"

/* Inserts p into the `keep` fastest (sorted), taking ownership of p->scenario; returns 1 when kept. */
/* What a plan spends: its cost with prices, else its GPU-hours. */
static double spend(const search_plan *p)
{
    return p->price > 0 ? p->cost : p->gpu_hours;
}

/* Keeps the plans no other plan beats on both time-to-train and spend (a copy without the document). */
static void front_add(search_result *r, const search_plan *p)
{
    for (int i = 0; i < r->n_front; i++) {
        const search_plan *q = &r->front[i];
        if (q->time_to_train_s <= p->time_to_train_s && spend(q) <= spend(p)) return;
    }
    int n = 0;
    for (int i = 0; i < r->n_front; i++) {
        const search_plan *q = &r->front[i];
        if (!(p->time_to_train_s <= q->time_to_train_s && spend(p) <= spend(q))) r->front[n++] = *q;
    }
    r->n_front = n;
    if (r->n_front == r->cap_front) {
        int cap = r->cap_front ? 2 * r->cap_front : 16;
        search_plan *f = realloc(r->front, (size_t)cap * sizeof *f);
        if (!f) return; /* the front is a summary; the ranked table does not depend on it */
        r->front = f;
        r->cap_front = cap;
    }
    int at = r->n_front;
    while (at > 0 && r->front[at - 1].time_to_train_s > p->time_to_train_s)
        at--;
    memmove(&r->front[at + 1], &r->front[at], (size_t)(r->n_front - at) * sizeof *r->front);
    r->front[at] = *p;
    r->front[at].scenario = NULL;
    r->n_front++;
}

const char *const search_status_names[] = {"ranked", "does_not_fit", "misses_deadline", "over_budget", NULL};

double search_price(const search_space *space, const char *device)
{
    if (!space) return 0;
    /* profile file names and the names inside profiles differ in case only (a100-sxm4-80gb, A100-SXM4-80GB)
     */
    for (int i = 0; device && i < space->n_prices; i++)
        if (!strcasecmp(space->price_device[i], device)) return space->device_price[i];
    return space->price;
}

int search_space_check(const search_space *space, const et_scenario *s, const char *scenario_device,
                       et_error *err)
{
    const int per_node = s->cluster.gpus_per_node;
    char names[2 * 8 + 2][128]; /* the device names a price may use */
    int n_names = 0;
    snprintf(names[n_names++], sizeof names[0], "%s", scenario_device ? scenario_device : "");
    snprintf(names[n_names++], sizeof names[0], "%s", s->cluster.device.name);
    for (int i = 0; i < space->n_devices; i++) {
        char path[1100];
        et_device_profile d;
        if (et_device_profile_path(space->devices[i], s->dir, NULL, "--search-devices", path, sizeof path,
                                   err))
            return -1;
        if (et_device_profile_load(path, &d, err)) return -1; /* names the profile's file and key */
        snprintf(names[n_names++], sizeof names[0], "%s", space->devices[i]);
        snprintf(names[n_names++], sizeof names[0], "%s", d.name);
    }
    for (int i = 0; i < space->n_tensor; i++)
        if (per_node % space->tensor[i] != 0)
            return et_error_set(
                err, NULL, 0, 0, "--search-tensor",
                "a tensor-parallel degree of %d does not divide the scenario's %d GPUs a node "
                "(tensor parallelism stays inside a node)",
                space->tensor[i], per_node);
    for (int i = 0; i < space->n_prices; i++) {
        int known = 0;
        for (int k = 0; k < n_names && !known; k++)
            known = !strcasecmp(space->price_device[i], names[k]);
        if (!known)
            return et_error_set(err, NULL, 0, 0, "prices",
                                "\"%s\" names no device of this search (the scenario's \"%s\"%s): its price "
                                "would be ignored",
                                space->price_device[i], names[0],
                                space->n_devices ? " and the --search-devices entries" : "");
    }
    return 0;
}

const char *const search_order_names[] = {"time", "gpu-hours", "cost", "energy", NULL};

search_order search_ranking(const search_space *space)
{
    if (space && space->rank_by > 0) return (search_order)(space->rank_by - 1);
    if (!space || (space->deadline_s <= 0 && space->budget_gpu_hours <= 0 && space->budget_cost <= 0))
        return SEARCH_BY_TIME;
    return space->price > 0 || space->n_prices > 0 ? SEARCH_BY_COST : SEARCH_BY_GPU_HOURS;
}

double search_rank_key(const search_plan *p, search_order by)
{
    return by == SEARCH_BY_COST        ? p->cost
           : by == SEARCH_BY_GPU_HOURS ? p->gpu_hours
           : by == SEARCH_BY_ENERGY    ? p->energy_kwh
                                       : p->time_to_train_s;
}

/* Whether a ranks after b: a larger key, or an equal one (to 1e-9) and more memory a GPU (ZeRO 2 against
 * 3, recomputation or none, at one time: the plan with headroom first). */
static int ranks_after(const search_plan *a, const search_plan *b, search_order by)
{
    const double ka = search_rank_key(a, by), kb = search_rank_key(b, by);
    if (fabs(ka - kb) > 1e-9 * fmax(fabs(ka), fabs(kb))) return ka > kb;
    return a->memory_gib > b->memory_gib;
}

static int keep_plan(search_result *r, int keep, search_plan *p, search_order by_cost)
{
    int at = r->n_best;
    while (at > 0 && ranks_after(&r->best[at - 1], p, by_cost))
        at--;
    if (at >= keep) {
        json_decref(p->scenario);
        return 0;
    }
    if (r->n_best == keep) {
        json_decref(r->best[keep - 1].scenario);
        r->n_best--;
    }
    memmove(&r->best[at + 1], &r->best[at], (size_t)(r->n_best - at) * sizeof *r->best);
    r->best[at] = *p;
    r->n_best++;
    return 1;
}

/* One candidate: the scenario document with its plan replaced, validated by the parser, estimated. */
/* Keeps `p` as the nearest refused plan of its kind when it is nearer than the one kept (by `value`). */
static void nearest(search_plan *kept, int count, const search_plan *p, double value, double kept_value)
{
    if (count == 1 || value < kept_value) {
        *kept = *p;
        kept->scenario = NULL;
    }
}

static int add_ranked(search_result *r, const search_plan *p)
{
    if (r->n_all == r->cap_all) {
        int cap = r->cap_all ? 2 * r->cap_all : 1024;
        search_plan *a = realloc(r->all, (size_t)cap * sizeof *a);
        if (!a) return -1;
        r->all = a;
        r->cap_all = cap;
    }
    r->all[r->n_all] = *p;
    r->all[r->n_all++].scenario = NULL;
    return 0;
}

/* Keeps the first refusal in byte order (deterministic whatever the threads): a candidate's, or another
 * thread's when results merge. */
static void keep_refusal(char *kept, const char *text)
{
    if (text[0] && (!kept[0] || strcmp(text, kept) < 0)) snprintf(kept, 400, "%s", text);
}

static void note_refusal(char *kept, const et_error *err)
{
    char text[400];
    if (snprintf(text, sizeof text, "%s%s%.300s", err->path, err->path[0] ? ": " : "", err->text) < 0) return;
    keep_refusal(kept, text);
}

/* The document of plan p: the scenario's with its parallelism, batch, device and GPU count replaced (what
 * the plan space does not vary is kept) and the varied key set last, so that it may also name a key the plan
 * sets; with `base_only`, the parallelism holds the kept keys alone (the search sets the rest itself). */
static json_t *plan_document(const json_t *root, const search_plan *p, const search_space *space,
                             int base_only, et_error *err)
{
    static const char *const recompute[] = {"none", "full", "selective"};
    json_t *doc = json_deep_copy(root);
    json_t *par = json_object();
    if (!doc || !par) {
        json_decref(doc), json_decref(par);
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for the search");
        return NULL;
    }
    if (!base_only) {
        json_object_set_new(par, "tensor", json_integer(p->tensor));
        json_object_set_new(par, "pipeline", json_integer(p->pipeline));
        json_object_set_new(par, "virtual_pipeline", json_integer(p->virtual_pipeline));
        json_object_set_new(par, "zero_stage", json_integer(p->zero_stage));
        json_object_set_new(par, "recompute", json_string(recompute[p->recompute]));
        json_object_set_new(par, "sequence_parallel", json_boolean(p->sequence_parallel));
        json_object_set_new(par, "expert", json_integer(p->expert));
        json_object_set_new(par, "context", json_integer(p->context));
    }
    /* what the plan space does not vary is kept from the scenario */
    const json_t *old = json_object_get(root, "parallelism");
    static const char *const kept[] = {"bucket_MiB", "allreduce", "overlap", "attention", "tp_overlap", NULL};
    for (int k = 0; kept[k]; k++) {
        json_t *v = json_object_get(old, kept[k]);
        if (v && !(strcmp(kept[k], "tp_overlap") == 0 && !base_only && !p->sequence_parallel))
            json_object_set_new(par, kept[k], json_deep_copy(v)); /* the shared root is only read */
    }
    if (!base_only && p->bucket_mib > 0) json_object_set_new(par, "bucket_MiB", json_real(p->bucket_mib));
    if (!base_only && p->allreduce >= 0)
        json_object_set_new(par, "allreduce", json_string(et_coll_algo_names[p->allreduce]));
    json_object_set_new(doc, "parallelism", par);
    json_object_set_new(
        doc, "batch",
        json_pack("{s:I, s:I}", "global", (json_int_t)p->global, "local", (json_int_t)p->local));
    json_t *cluster = json_object_get(doc, "cluster");
    if (space && p->device >= 0)
        json_object_set_new(cluster, "device", json_string(space->devices[p->device]));
    const json_t *per_node = json_object_get(cluster, "gpus_per_node");
    if (json_is_integer(per_node) && json_integer_value(per_node) > 0) {
        json_int_t nodes = p->gpus / json_integer_value(per_node);
        /* listed faults name parts of the scenario's own cluster: another size has other parts */
        if (nodes != json_integer_value(json_object_get(cluster, "nodes")))
            json_object_del(cluster, "faults");
        json_object_set_new(cluster, "nodes", json_integer(nodes));
    }
    if (p->vary >= 0 && et_scenario_json_set(doc, space->vary[p->vary], err)) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* The scenario the candidates of one device, varied value and GPU count share: read once, the plan not yet
 * set (et_scenario_read); `ok` 0 when it cannot be read, `err` saying why (every such candidate is refused
 * with it). */
typedef struct plan_base {
    et_scenario s;
    int ok;
    et_error err;
    const char *device_name; /* as the scenario writes it (prices may name it) */
    double
        band_edge[ET_BAND_SHAPES]; /* with --deadline-at-band-edge: each family's slow edge (error_band.h) */
} plan_base;

/* The bases of a search: one per device, varied value and GPU count, in that order. */
typedef struct plan_bases {
    plan_base *base;
    int n_dev, n_vary, n_counts;
    const int *counts;
} plan_bases;

static const plan_base *base_of(const plan_bases *b, const search_plan *p)
{
    int g = 0;
    while (g + 1 < b->n_counts && b->counts[g] != p->gpus)
        g++;
    const int dev = p->device >= 0 ? p->device : 0, vary = p->vary >= 0 ? p->vary : 0;
    return &b->base[((size_t)dev * b->n_vary + vary) * b->n_counts + g];
}

/* Reads every base (a failed one refuses its candidates with its error, as a parse of theirs would). */
static int bases_read(plan_bases *b, const json_t *root, const char *path, const search_space *space,
                      long long global, long long local, et_error *err)
{
    const size_t n = (size_t)b->n_dev * b->n_vary * b->n_counts;
    b->base = calloc(n, sizeof *b->base);
    if (!b->base)
        return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory for the search");
    const char *device = json_string_value(json_object_get(json_object_get(root, "cluster"), "device"));
    for (size_t i = 0; i < n; i++) {
        plan_base *x = &b->base[i];
        const int g = (int)(i % (size_t)b->n_counts),
                  vary = (int)(i / (size_t)b->n_counts % (size_t)b->n_vary),
                  dev = (int)(i / ((size_t)b->n_counts * b->n_vary));
        const search_plan p = {.gpus = b->counts[g],
                               .global = global,
                               .local = local,
                               .device = space && space->n_devices > 0 ? dev : -1,
                               .vary = space && space->n_vary > 0 ? vary : -1};
        x->device_name = device;
        json_t *doc = plan_document(root, &p, space, 1, &x->err);
        if (!doc && x->err.code == ET_ERROR_MEMORY)
            return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory for the search");
        x->ok = doc && !et_scenario_read(doc, path, NULL, &x->s, &x->err);
        if (x->ok && space && space->deadline_at_band) et_error_band_edges(&x->s, x->band_edge);
        json_decref(doc);
    }
    return 0;
}

static void bases_free(plan_bases *b)
{
    for (int i = 0; b->base && i < b->n_dev * b->n_vary * b->n_counts; i++)
        if (b->base[i].ok) et_scenario_free(&b->base[i].s);
    free(b->base);
    b->base = NULL;
}

/* Plan p's scenario: its base with p's parallel fields and batch, derived and checked by the parser's own
 * rules (et_scenario_check_plan). It shares the base's allocations: never freed. */
static int plan_scenario(const et_scenario *base, const search_plan *p, et_scenario *s, et_error *err)
{
    *s = *base;
    s->parallel.tensor = p->tensor, s->parallel.pipeline = p->pipeline;
    s->parallel.virtual_pipeline = p->virtual_pipeline, s->parallel.zero_stage = p->zero_stage;
    s->parallel.recompute = p->recompute, s->parallel.sequence_parallel = p->sequence_parallel;
    s->parallel.expert = p->expert, s->parallel.context = p->context;
    s->parallel.tp_overlap = p->sequence_parallel && base->parallel.tp_overlap; /* kept with sp only */
    if (p->bucket_mib > 0) s->parallel.bucket_bytes = p->bucket_mib * 1048576.0;
    if (p->allreduce >= 0) s->parallel.allreduce = (et_coll_algo)p->allreduce;
    s->batch.global = p->global, s->batch.local = p->local, s->batch.grad_accum = 0;
    return et_scenario_check_plan(s, err);
}

/* One candidate: its scenario checked by the parser's rules, estimated, filed by what became of it. */
static void try_plan(const plan_base *base, search_plan *p, int keep, const search_space *space,
                     search_result *r)
{
    r->tried++;
    et_scenario s;
    et_error err;
    if (!base->ok || plan_scenario(&base->s, p, &s, &err)) {
        r->invalid++;
        note_refusal(r->refusal, base->ok ? &err : &base->err);
        return;
    }
    et_estimate e;
    if (et_analytic_estimate(&s, &e, &err)) {
        r->invalid++;
        note_refusal(r->refusal, &err);
        return;
    }
    p->data = s.parallel.data;
    p->grad_accum = s.batch.grad_accum;
    p->step_s = e.step_time;
    p->mfu = e.mfu;
    p->memory_gib = e.memory.total / 1073741824.0;
    p->time_to_train_s = e.time_to_train_with_failures; /* what the run is expected to take, failures in */
    p->gpu_hours = et_gpu_hours(&s, e.time_to_train_with_failures);
    p->energy_kwh = e.energy_run_kwh;
    p->price = search_price(space, p->device >= 0 ? space->devices[p->device] : base->device_name);
    p->cost = p->gpu_hours * p->price;
    p->tflops_per_gpu = et_tflops_per_gpu(&s, e.model_flops_per_step, e.step_time);
    p->scenario = NULL; /* written for the plans kept, once the search is done (plan_document) */
    const double usable = e.memory.capacity * (1 - (space ? space->memory_headroom : 0));
    if (!e.memory.fits || e.memory.total > usable) {
        p->status = SEARCH_TOO_BIG;
        add_ranked(r, p);
        r->too_big++;
        nearest(&r->nearest_too_big, r->too_big, p, p->memory_gib, r->nearest_too_big.memory_gib);
        return;
    }
    /* a deadline at the band's slow edge: the time a run of this family would take at its p90 */
    const double edge = space && space->deadline_at_band ? base->band_edge[et_error_band_shape(&s)] : 1;
    if (space && space->deadline_s > 0 && e.time_to_train * edge > space->deadline_s) {
        p->status = SEARCH_TOO_SLOW;
        add_ranked(r, p);
        r->too_slow++;
        nearest(&r->nearest_too_slow, r->too_slow, p, p->time_to_train_s,
                r->nearest_too_slow.time_to_train_s);
        return;
    }
    if (space && ((space->budget_gpu_hours > 0 && p->gpu_hours > space->budget_gpu_hours) ||
                  (space->budget_cost > 0 && p->cost > space->budget_cost))) {
        p->status = SEARCH_OVER_BUDGET;
        add_ranked(r, p);
        r->over_budget++;
        nearest(&r->nearest_over_budget, r->over_budget, p, spend(p), spend(&r->nearest_over_budget));
        return;
    }
    r->ranked++;
    p->status = SEARCH_RANKED;
    add_ranked(r, p); /* a copy for --search-csv; a failed one only shortens that file */
    front_add(r, p);
    keep_plan(r, keep, p, search_ranking(space));
}

/* The kept plans' documents, each parsed and estimated again as etsim would read it: the candidate's
 * scenario (its base with the plan set) and its document must agree, or the search is wrong. */
static int kept_documents(search_result *r, const json_t *root, const char *path, const search_space *space,
                          et_error *err)
{
    for (int i = 0; i < r->n_best; i++) {
        search_plan *p = &r->best[i];
        json_t *doc = plan_document(root, p, space, 0, err);
        if (!doc) return -1;
        et_scenario s;
        et_estimate e;
        int bad = et_scenario_parse(doc, path, NULL, &s, err);
        if (!bad) {
            bad = et_analytic_estimate(&s, &e, err);
            et_scenario_free(&s);
        }
        if (bad || fabs(e.step_time - p->step_s) > 1e-12 * p->step_s) {
            json_decref(doc);
            return et_error_set_code(err, ET_ERROR_INTERNAL, path, 0, 0, NULL,
                                     "the search's plan %dx%dx%d (micro-batch %lld) reads back %s: its "
                                     "candidate and its document disagree",
                                     p->tensor, p->pipeline, p->data, p->local,
                                     bad ? "as an error" : "with another step time");
        }
        p->scenario = doc;
    }
    return 0;
}

typedef struct progress {
    atomic_long done; /* candidates evaluated, over every thread */
    size_t total;
    double start;
} progress;

typedef struct worker {
    const plan_bases *bases;
    const search_plan *cand;
    size_t n_cand;
    int index, count, keep;
    const search_space *space;
    progress *progress;
    search_result r;
} worker;

/* Whether v is allowed by a narrowed dimension (n 0: every value). */
static int allowed(const int *values, int n, long long v)
{
    for (int i = 0; i < n; i++)
        if (values[i] == v) return 1;
    return n == 0;
}

/* Evaluates the index-th of `count` blocks of the candidates into its own result. */
static void *work(void *arg)
{
    worker *w = arg;
    et_graph_set_ids(false); /* estimates only: no op ids to format */
    /* a contiguous block of candidates per thread (consecutive ones share graphs) */
    const size_t per = (w->n_cand + (size_t)w->count - 1) / (size_t)w->count, first = (size_t)w->index * per;
    for (size_t i = first; i < w->n_cand && i < first + per; i++) {
        search_plan p = w->cand[i];
        try_plan(base_of(w->bases, &p), &p, w->keep, w->space, &w->r);
        long done = atomic_fetch_add(&w->progress->done, 1) + 1;
        /* the first thread reports for all: the share done and the time left at the rate so far */
        if (w->index == 0 && w->space && w->space->progress && done % 512 == 0) {
            double elapsed = et_wall_seconds() - w->progress->start,
                   share = (double)done / w->progress->total;
            fprintf(stderr, "\retsim: search: %ld of %zu plans (%.0f%%), %.0f s left   ", done,
                    w->progress->total, 100 * share, share > 0 ? elapsed * (1 - share) / share : 0);
        }
    }
    et_analytic_release_cache();
    et_graph_set_ids(true);
    return NULL;
}

void search_result_merge(search_result *out, search_result *r, int keep, search_order order)
{
    /* the nearest refused plans over both (counts before the sums) */
    if (r->too_big && (!out->too_big || r->nearest_too_big.memory_gib < out->nearest_too_big.memory_gib))
        out->nearest_too_big = r->nearest_too_big;
    if (r->too_slow &&
        (!out->too_slow || r->nearest_too_slow.time_to_train_s < out->nearest_too_slow.time_to_train_s))
        out->nearest_too_slow = r->nearest_too_slow;
    if (r->over_budget &&
        (!out->over_budget || spend(&r->nearest_over_budget) < spend(&out->nearest_over_budget)))
        out->nearest_over_budget = r->nearest_over_budget;
    keep_refusal(out->refusal, r->refusal);
    out->tried += r->tried, out->invalid += r->invalid, out->too_big += r->too_big;
    out->too_slow += r->too_slow, out->over_budget += r->over_budget, out->ranked += r->ranked;
    for (int i = 0; i < r->n_all; i++)
        add_ranked(out, &r->all[i]);
    for (int i = 0; i < r->n_front; i++)
        front_add(out, &r->front[i]);
    for (int i = 0; i < r->n_best; i++)
        keep_plan(out, keep, &r->best[i], order);
    r->n_best = 0; /* the documents now belong to out (or were released) */
    search_result_free(r);
}

/* The values of each dimension of the space: the user's, else the defaults from the scenario. */
typedef struct space_dims {
    int counts[32], n_counts;
    double buckets[8];
    int n_buckets, algos[4], n_algos;
    long long batches[16], micro[8];
    int n_batches, n_micro;
    int experts[16], n_experts, contexts[16], n_contexts;
    int n_vary, n_dev, per_node, layers;
} space_dims;

static int space_dims_of(const search_space *space, const et_scenario *base, const char *path, space_dims *d,
                         et_error *err)
{
    memset(d, 0, sizeof *d);
    d->layers = base->model.layers, d->per_node = base->cluster.gpus_per_node;
    for (int i = 0; space && i < space->n_gpus && i < 32; i++) {
        if (space->gpus[i] <= 0 || space->gpus[i] % d->per_node)
            return et_error_set(err, path, 0, 0, "$.cluster.gpus_per_node",
                                "--search-gpus %d is not a multiple of the %d GPUs of a node", space->gpus[i],
                                d->per_node);
        d->counts[d->n_counts++] = space->gpus[i];
    }
    if (!d->n_counts) d->counts[d->n_counts++] = et_scenario_gpus(base);
    if (space && space->max_gpus > 0) { /* a limit on the GPUs: a filter of the counts */
        int kept = 0, lowest = d->counts[0];
        for (int i = 0; i < d->n_counts; i++) {
            if (d->counts[i] < lowest) lowest = d->counts[i];
            if (d->counts[i] <= space->max_gpus) d->counts[kept++] = d->counts[i];
        }
        if (!kept)
            return et_error_set(err, NULL, 0, 0, "--max-gpus",
                                "%d GPUs is below every GPU count of the search (the smallest is %d; "
                                "--search-gpus gives others)",
                                space->max_gpus, lowest);
        d->n_counts = kept;
    }
    for (int i = 0; space && i < space->n_buckets && i < 8; i++)
        d->buckets[d->n_buckets++] = space->bucket_mib[i];
    if (!d->n_buckets) d->buckets[d->n_buckets++] = 0;
    for (int i = 0; space && i < space->n_algos && i < 4; i++)
        d->algos[d->n_algos++] = space->algos[i];
    if (!d->n_algos) d->algos[d->n_algos++] = -1;
    d->n_vary = space && space->n_vary > 0 ? space->n_vary : 1;
    d->n_dev = space && space->n_devices > 0 ? space->n_devices : 1;
    for (int i = 0; space && i < space->n_batches && i < 16; i++)
        d->batches[d->n_batches++] = space->batches[i];
    if (!d->n_batches) d->batches[d->n_batches++] = base->batch.global;
    /* micro-batches: powers of two to 64, and the scenario's own */
    for (long long m = 1; m <= 64; m *= 2)
        d->micro[d->n_micro++] = m;
    if (base->batch.local & (base->batch.local - 1) || base->batch.local > 64)
        d->micro[d->n_micro++] = base->batch.local;
    if (space && space->n_micro > 0) /* the user's micro-batches instead */
        for (d->n_micro = 0; d->n_micro < space->n_micro && d->n_micro < 8; d->n_micro++)
            d->micro[d->n_micro] = space->micro[d->n_micro];
    /* expert parallelism: powers of two dividing the experts (the parser refuses those that do not divide
     * a plan's data ranks); context parallelism: the scenario's */
    for (int x = 1; x <= base->model.moe.experts && d->n_experts < 16; x *= 2)
        if (base->model.moe.experts % x == 0) d->experts[d->n_experts++] = x;
    if (space && space->n_expert > 0)
        for (d->n_experts = 0; d->n_experts < space->n_expert && d->n_experts < 16; d->n_experts++)
            d->experts[d->n_experts] = space->expert[d->n_experts];
    if (!d->n_experts) d->experts[d->n_experts++] = 1;
    for (int i = 0; space && i < space->n_context && i < 16; i++)
        d->contexts[d->n_contexts++] = space->context[i];
    if (!d->n_contexts)
        d->contexts[d->n_contexts++] = base->parallel.context > 1 ? base->parallel.context : 1;
    return 0;
}

/* Appends one candidate; -1 when out of memory. */
static int push(search_plan **cand, size_t *n, size_t *cap, const search_plan *p)
{
    if (*n == *cap) {
        const size_t c = *cap ? 2 * *cap : 1024;
        search_plan *x = realloc(*cand, c * sizeof *x);
        if (!x) return -1;
        *cand = x, *cap = c;
    }
    (*cand)[(*n)++] = *p;
    return 0;
}

static int add_sizes(const search_space *space, const space_dims *d, const search_plan *shape,
                     search_plan **cand, size_t *n, size_t *cap);

/* Every candidate of the space, GPU counts and micro-batches innermost (consecutive candidates share their
 * graphs, analytic.c); -1 when out of memory. */
static int candidates_of(const search_space *space, const space_dims *d, search_plan **cand, size_t *n)
{
    size_t cap = 0;
    *cand = NULL, *n = 0;
    const int L = d->layers, per_node = d->per_node;
    for (int dev = 0; dev < d->n_dev; dev++)
        for (int t = 1; t <= per_node; t++) {
            if (per_node % t || (space && !allowed(space->tensor, space->n_tensor, t))) continue;
            for (int pp = 1; pp <= L; pp++) {
                if (L % pp || (space && !allowed(space->pipeline, space->n_pipeline, pp))) continue;
                for (int v = 1; v <= (pp > 1 ? 4 : 1); v *= 2)
                    for (int rc = 0; rc < 3; rc++) {
                        if (space && !allowed(space->recompute, space->n_recompute, rc)) continue;
                        for (int sp = 0; sp <= (t > 1); sp++)
                            for (int z = 0; z <= 3; z++) {
                                if (space && !allowed(space->zero, space->n_zero, z)) continue;
                                const search_plan shape = {.device = space && space->n_devices > 0 ? dev : -1,
                                                           .tensor = t,
                                                           .pipeline = pp,
                                                           .virtual_pipeline = v,
                                                           .zero_stage = z,
                                                           .recompute = (et_recompute)rc,
                                                           .sequence_parallel = sp};
                                if (add_sizes(space, d, &shape, cand, n, &cap)) return -1;
                            }
                    }
            }
        }
    return 0;
}

/* The candidates of one parallel shape: every global batch, GPU count, micro-batch, bucket, algorithm and
 * varied, expert and context value. */
static int add_sizes(const search_space *space, const space_dims *d, const search_plan *shape,
                     search_plan **cand, size_t *n, size_t *cap)
{
    for (int gb = 0; gb < d->n_batches; gb++)
        for (int g = 0; g < d->n_counts; g++)
            for (int mi = 0; mi < d->n_micro; mi++) {
                if (space && !allowed(space->micro, space->n_micro, d->micro[mi])) continue;
                for (int bk = 0; bk < d->n_buckets; bk++)
                    for (int al = 0; al < d->n_algos; al++)
                        for (int va = 0; va < d->n_vary * d->n_experts * d->n_contexts; va++) {
                            search_plan p = *shape;
                            p.gpus = d->counts[g], p.global = d->batches[gb], p.local = d->micro[mi];
                            p.bucket_mib = d->buckets[bk], p.allreduce = d->algos[al];
                            p.vary = space && space->n_vary > 0 ? va % d->n_vary : -1;
                            p.expert = d->experts[va / d->n_vary % d->n_experts];
                            p.context = d->contexts[va / (d->n_vary * d->n_experts)];
                            if (push(cand, n, cap, &p)) return -1;
                        }
            }
    return 0;
}

/* The candidates evaluated on `threads` threads, each keeping its own best, merged into out. */
static void evaluate(const plan_bases *bases, const search_plan *cand, size_t n_cand, int threads, int keep,
                     const search_space *space, search_result *out)
{
    progress prog = {.total = n_cand ? n_cand : 1, .start = et_wall_seconds()};
    atomic_init(&prog.done, 0);
    worker w[64];
    pthread_t tid[64];
    int started[64] = {0};
    for (int k = 0; k < threads; k++) {
        w[k] = (worker){bases, cand, n_cand, k, threads, keep, space, &prog, {0}};
        w[k].r.best = calloc((size_t)(keep > 0 ? keep : 1), sizeof *w[k].r.best);
        started[k] = w[k].r.best && (threads == 1 || pthread_create(&tid[k], NULL, work, &w[k]) == 0);
        if (started[k] && threads == 1) work(&w[k]);
    }
    for (int k = 0; k < threads; k++) {
        if (started[k] && threads > 1) pthread_join(tid[k], NULL);
        if (!started[k]) { /* a thread that could not start: its share runs here */
            if (!w[k].r.best) w[k].r.best = calloc((size_t)(keep > 0 ? keep : 1), sizeof *w[k].r.best);
            if (w[k].r.best) work(&w[k]);
        }
        search_result_merge(out, &w[k].r, keep, search_ranking(space));
    }
    if (space && space->progress) fputs("\r\033[K", stderr);
}

int search_run(const char *scenario_path, const char *const *sets, int n_sets, const search_space *space,
               int keep, search_result *out, et_error *err)
{
    memset(out, 0, sizeof *out);
    const double t0 = et_wall_seconds();
    json_t *root;
    if (et_scenario_json_load(scenario_path, sets, n_sets, &root, err)) return -1;
    et_scenario base;
    if (et_scenario_parse(root, scenario_path, NULL, &base, err)) {
        json_decref(root);
        return -1;
    }
    space_dims d;
    search_plan *cand = NULL;
    size_t n_cand = 0;
    int rc = space_dims_of(space, &base, scenario_path, &d, err);
    const long long base_global = base.batch.global, base_local = base.batch.local;
    et_scenario_free(&base);
    out->best = rc ? NULL : calloc((size_t)(keep > 0 ? keep : 1), sizeof *out->best);
    /* every candidate first (cheap), then evaluated in parallel */
    if (!rc && (!out->best || candidates_of(space, &d, &cand, &n_cand)))
        rc = et_error_set_code(err, ET_ERROR_MEMORY, scenario_path, 0, 0, NULL,
                               "out of memory for the search");
    plan_bases bases = {NULL, d.n_dev, d.n_vary, d.n_counts, d.counts};
    if (!rc) rc = bases_read(&bases, root, scenario_path, space, base_global, base_local, err);
    if (!rc) {
        /* under MPI, this rank's block of the candidates (the same list on every rank) */
        if (space && space->ranks > 1) {
            const size_t per = (n_cand + (size_t)space->ranks - 1) / (size_t)space->ranks;
            const size_t first = (size_t)space->rank * per < n_cand ? (size_t)space->rank * per : n_cand;
            const size_t last = first + per < n_cand ? first + per : n_cand;
            memmove(cand, cand + first, (last - first) * sizeof *cand);
            n_cand = last - first;
        }
        int threads = space && space->threads > 0 ? space->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
        evaluate(&bases, cand, n_cand, threads, keep, space, out);
        out->threads = threads;
        rc = kept_documents(out, root, scenario_path, space, err);
    }
    free(cand);
    bases_free(&bases);
    json_decref(root);
    if (rc) {
        search_result_free(out);
        return -1;
    }
    out->seconds = et_wall_seconds() - t0;
    return 0;
}

void search_result_free(search_result *r)
{
    for (int i = 0; i < r->n_best; i++)
        json_decref(r->best[i].scenario);
    free(r->best);
    free(r->front);
    free(r->all);
    memset(r, 0, sizeof *r);
}
