#define _POSIX_C_SOURCE 200809L
#include "sim_result.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "faults.h"
#include "report_csv.h"
#include "scenario_graph.h"

void sim_result_free(sim_result *r)
{
    free(r->steps);
    free(r->rank_compute);
    free(r->ranks);
    free(r->collectives);
    free(r->phases);
    free(r->faults.parts);
    memset(r, 0, sizeof *r);
}

/* The pipe: the struct (its pointers meaningless on the other side), then each array in field order. */
static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        const ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *data, size_t n)
{
    char *p = data;
    while (n > 0) {
        const ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* Each array of a result: its address in the struct, and its size in bytes from the struct's counts. */
typedef struct array_field {
    void **at;
    size_t bytes;
} array_field;

static int arrays_of(sim_result *r, array_field *a)
{
    const size_t steps = (size_t)r->n_steps, ranks = (size_t)r->n_ranks;
    a[0] = (array_field){(void **)&r->steps, steps * sizeof *r->steps};
    a[1] = (array_field){(void **)&r->rank_compute, steps * ranks * sizeof *r->rank_compute};
    a[2] = (array_field){(void **)&r->ranks, ranks * sizeof *r->ranks};
    a[3] = (array_field){(void **)&r->collectives, (size_t)r->n_collectives * sizeof *r->collectives};
    a[4] = (array_field){(void **)&r->phases, (size_t)r->n_phases * sizeof *r->phases};
    a[5] = (array_field){(void **)&r->faults.parts, (size_t)r->faults.count * sizeof *r->faults.parts};
    return 6;
}

/* What precedes the results on the pipe: whether the child failed, and why. */
typedef struct wire_header {
    int failed;
    int code; /* et_error_code */
    char text[1200];
} wire_header;

int sim_result_send_failure(int fd, et_error_code code, const char *text)
{
    wire_header h = {.failed = 1, .code = (int)code};
    snprintf(h.text, sizeof h.text, "%s", text);
    return write_all(fd, &h, sizeof h);
}

int sim_result_send(int fd, const sim_result *r)
{
    const wire_header h = {0};
    sim_result copy = *r;
    array_field a[6];
    const int n = arrays_of(&copy, a);
    if (write_all(fd, &h, sizeof h) || write_all(fd, r, sizeof *r)) return -1;
    for (int i = 0; i < n; i++)
        if (a[i].bytes && write_all(fd, *a[i].at, a[i].bytes)) return -1;
    return 0;
}

int sim_result_receive(int fd, sim_result *r, et_error *err)
{
    wire_header h;
    memset(r, 0, sizeof *r);
    if (read_all(fd, &h, sizeof h)) {
        et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                          "the simulation ended without its results");
        return -2;
    }
    if (h.failed) {
        h.text[sizeof h.text - 1] = '\0';
        return et_error_set_code(err, (et_error_code)h.code, NULL, 0, 0, NULL, "%s", h.text);
    }
    if (read_all(fd, r, sizeof *r)) {
        memset(r, 0, sizeof *r);
        et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                          "the simulation ended without its results");
        return -2;
    }
    array_field a[6];
    const int n = arrays_of(r, a);
    for (int i = 0; i < n; i++)
        *a[i].at = NULL; /* the sender's addresses */
    for (int i = 0; i < n; i++) {
        if (!a[i].bytes) continue;
        *a[i].at = malloc(a[i].bytes);
        if (!*a[i].at) {
            sim_result_free(r);
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                     "out of memory receiving the simulation's results");
        }
        if (read_all(fd, *a[i].at, a[i].bytes)) {
            sim_result_free(r);
            et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                              "the simulation's results were cut short");
            return -2;
        }
    }
    return 0;
}

static json_t *stats_json(const sim_step_stats *t)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f}", "mean", t->mean, "p50", t->p50, "p99", t->p99, "min",
                     t->min, "max", t->max);
}

static json_t *collectives_json(const sim_result *r)
{
    json_t *rows = json_array();
    for (int k = 0; rows && k < r->n_collectives; k++) {
        const sim_collective_record *c = &r->collectives[k];
        json_t *row = r->bench ? json_object() : json_pack("{s:i}", "bucket", k);
        json_t *fields = json_pack("{s:f, s:s, s:f, s:f, s:f, s:f}", "bytes", c->bytes, "algorithm",
                                   c->algorithm, "time_s", c->time, "closed_form_s", c->closed_form,
                                   "algbw_GBps", c->algbw_GBps, "busbw_GBps", c->busbw_GBps);
        json_object_update(row, fields);
        json_decref(fields);
        if (r->bench) json_object_set_new(row, "error", json_real(c->error));
        json_array_append_new(rows, row);
    }
    return rows;
}

static json_t *fault_part_json(const sim_fault_part *p)
{
    return json_pack("{s:s, s:s, s:f, s:f, s:s}", "part", et_fault_part_names[p->part], "where", p->where,
                     "factor", p->factor, "fraction_left", p->fraction_left, "effect", p->effect);
}

static json_t *faults_json(const sim_faults *f)
{
    json_t *parts = json_array();
    for (int i = 0; parts && i < f->count; i++)
        json_array_append_new(parts, fault_part_json(&f->parts[i]));
    json_t *out = json_pack("{s:i, s:o, s:f, s:f, s:f}", "count", f->count, "parts", parts, "healthy_step_s",
                            f->healthy_step, "step_s", f->step, "cost_s", f->cost);
    if (out && f->has_slowest)
        json_object_set_new(out, "slowest",
                            json_pack("{s:s, s:s, s:f, s:f, s:f}", "part",
                                      et_fault_part_names[f->slowest.part], "where", f->slowest.where,
                                      "fraction_left", f->slowest.fraction_left, "step_alone_s",
                                      f->slowest_step_alone, "cost_alone_s", f->slowest_cost_alone));
    return out;
}

static json_t *bench_json(const sim_result *r)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:o}", "engine", "simgrid", "collective", r->collective,
                     "ranks", r->bench_ranks, "nodes", r->bench_nodes, "ranks_per_node",
                     r->bench_ranks_per_node, "results", collectives_json(r));
}

/* Per op of stage 0 at the expected micro-batch: what the simulator's compute durations come from. */
static json_t *ops_json(const et_scenario *s)
{
    et_graph g;
    et_error err;
    et_graph_options o = et_scenario_graph_options(s, 0);
    if (et_graph_build(&s->model, &o, &g, &err)) return NULL;
    const et_batch_shape b = et_batch_expected(s);
    json_t *ops = report_op_rows(s, &g, &b);
    et_graph_free(&g);
    return ops;
}

json_t *sim_result_json(const et_scenario *s, const sim_result *r)
{
    if (r->bench) return bench_json(r);
    json_t *steps = json_array(), *ranks = json_array(), *ops = ops_json(s);
    for (int k = 0; steps && k < r->n_steps; k++) {
        const sim_step_record *x = &r->steps[k];
        json_t *loads = json_array();
        for (int i = 0; loads && i < r->n_ranks; i++)
            json_array_append_new(loads, json_real(r->rank_compute[(size_t)k * r->n_ranks + i]));
        json_array_append_new(steps, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:o}", "step", k, "time_s",
                                               x->time, "compute_s", x->compute, "exposed_comm_s",
                                               x->exposed_comm, "idle_s", x->idle, "straggler_factor",
                                               x->straggler_factor, "rank_compute_s", loads));
    }
    for (int i = 0; ranks && i < r->n_ranks; i++) {
        const sim_rank_record *x = &r->ranks[i];
        json_array_append_new(ranks, json_pack("{s:i, s:i, s:f, s:f, s:f}", "rank", x->rank, "stage",
                                               x->stage, "compute_s", x->compute, "idle_s", x->idle,
                                               "exposed_comm_s", x->exposed_comm));
    }
    json_t *out =
        json_pack("{s:s, s:i, s:b, s:o, s:f, s:f, s:f, s:f, s:o, s:o, s:o, s:o}", "engine", "simgrid",
                  "simulated_steps", r->simulated_steps, "detailed_collectives", r->detailed, "step_time_s",
                  stats_json(&r->step), "compute_s", r->compute, "exposed_comm_s", r->exposed_comm, "idle_s",
                  r->idle, "straggler_factor", r->straggler_factor, "steps", steps, "buckets",
                  collectives_json(r), "ops", ops ? ops : json_array(), "ranks", ranks);
    if (out && r->has_alltoall)
        json_object_set_new(out, "alltoall",
                            json_pack("{s:f, s:f, s:f, s:f}", "per_step", r->alltoall.per_step, "time_s",
                                      r->alltoall.time, "wait_s", r->alltoall.wait, "closed_form_s",
                                      r->alltoall.closed_form));
    if (out && r->n_phases) {
        json_t *phases = json_array();
        for (int i = 0; phases && i < r->n_phases; i++)
            json_array_append_new(phases, json_pack("{s:f, s:i, s:o}", "from", r->phases[i].from, "rank",
                                                    r->phases[i].rank, "step_time_s",
                                                    stats_json(&r->phases[i].step)));
        json_object_set_new(out, "phases", phases);
    }
    if (out && r->faults.count) json_object_set_new(out, "faults", faults_json(&r->faults));
    return out;
}
