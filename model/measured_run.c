#include "measured_run.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "input_files.h"
#include "quantile.h"
#include "scenario_graph.h"

#define FAIL(path_, ...) (et_error_set(err, r->file, 0, 0, path_, __VA_ARGS__), et_measured_run_free(r), -1)

/* The longest op or step a measurement may report: 10^6 s (11.6 days); beyond it the products of the
 * reports (days to train, costs) leave what a double prints meaningfully. */
#define MAX_SECONDS 1e6
/* The measured.json format this ET reads (runtime/rt_measured.h's RT_MEASURED_FORMAT_VERSION). */
#define RT_MEASURED_READS 2

static int positive_time(double t)
{
    return t > 0 && t <= MAX_SECONDS;
}

/* Every op's per-rank timings name a rank of the run: 0 <= rank < ranks. */
static int check_ranks(json_t *list, long long ranks, const char *where, et_measured_run *r, et_error *err)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        json_t *rank = json_object_get(e, "rank");
        if (!json_is_integer(rank) || json_integer_value(rank) < 0 || json_integer_value(rank) >= ranks) {
            char at[128];
            snprintf(at, sizeof at, "%s.ranks[%zu].rank", where, i);
            return FAIL(at, "a rank of the run expected (0 to %lld: the run had %lld)", ranks - 1, ranks);
        }
    }
    return 0;
}

/* The wall step's account beyond rank 0's ops (et_measured_run.h): the all-reduces' wait after backward, and
 * the slowest rank's extra op time. Values that are not numbers count as nothing. */
static void wall_account(et_measured_run *r, json_t *comm, json_t *ops, long long ranks)
{
    const size_t nb = json_array_size(comm);
    double *wait = calloc((size_t)r->steps + 1, sizeof *wait);
    int n = 0;
    for (int s = 0; wait && nb && s < r->steps; s++) {
        double last_start = -1, last_end = -1;
        for (size_t k = 0; k < nb; k++) {
            json_t *b = json_array_get(comm, k);
            const double st = json_number_value(json_array_get(json_object_get(b, "start_s"), (size_t)s)),
                         en = json_number_value(json_array_get(json_object_get(b, "end_s"), (size_t)s));
            if (st > last_start) last_start = st;
            if (en > last_end) last_end = en;
        }
        if (last_start >= 0 && last_end >= last_start && last_end <= MAX_SECONDS)
            wait[n++] = last_end - last_start;
    }
    r->comm_wait = n ? et_quantile(wait, n, 0.5) : 0;
    free(wait);
    double *sum = calloc((size_t)(ranks > 0 && ranks <= 1 << 20 ? ranks : 1), sizeof *sum);
    if (!sum) return;
    size_t i;
    json_t *op;
    json_array_foreach(ops, i, op)
    {
        size_t k;
        json_t *e;
        json_array_foreach(json_object_get(op, "ranks"), k, e)
        {
            const long long rank = json_integer_value(json_object_get(e, "rank"));
            const double t = json_number_value(json_object_get(e, "median_s"));
            if (rank >= 0 && rank < ranks && rank <= 1 << 20 && t >= 0 && t <= MAX_SECONDS) sum[rank] += t;
        }
    }
    double most = sum[0];
    for (long long k = 1; k < ranks && k <= 1 << 20; k++)
        if (sum[k] > most) most = sum[k];
    r->slowest_rank_extra = most - sum[0];
    free(sum);
}

/* The plan file is the one the run ran: its checksum is the one measured.json recorded. */
static int check_plan_sum(const char *plan, const char *want, et_measured_run *r, et_error *err)
{
    unsigned long long h;
    char hex[17];
    if (et_file_xxh64(plan, &h, err)) return -1;
    et_xxh64_hex(h, hex);
    if (strcmp(hex, want) != 0)
        return FAIL("$.plan_xxh64",
                    "the plan %s is not the one this run ran (xxh64 %s now, %s recorded): measured.json is "
                    "from another plan, or the plan changed since",
                    plan, hex, want);
    return 0;
}

json_t *et_measured_load_json(const char *path, et_error *err)
{
    json_error_t je;
    et_input_note(path);
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        et_error_set(err, path, je.line, je.column, NULL, "not readable JSON: %s (truncated?)", je.text);
    return root;
}

int et_measured_run_load(const char *path, const et_device_profile *profile, et_measured_run *r,
                         et_error *err)
{
    memset(r, 0, sizeof *r);
    snprintf(r->file, sizeof r->file, "%s", path);
    json_t *root = et_measured_load_json(path, err);
    if (!root) return -1;
    int rc = -1;
    json_t *tool = json_object_get(root, "tool"), *plan_file = json_object_get(root, "plan_file");
    json_t *ops = json_object_get(root, "ops"), *shapes = json_object_get(root, "batch_shapes");
    json_t *backend = json_object_get(root, "backend");
    json_t *step = json_object_get(json_object_get(root, "step_time_s"), "median");
    json_t *version = json_object_get(root, "format_version"),
           *plan_sum = json_object_get(root, "plan_xxh64");
    json_t *ranks = json_object_get(root, "ranks");
    if (!json_is_string(tool) || strcmp(json_string_value(tool), "etrun") != 0) {
        rc = FAIL("$.tool", "not an etrun measured.json (\"tool\": \"etrun\" expected)");
    } else if (version && !json_is_integer(version)) {
        rc = FAIL("$.format_version", "expected an integer");
    } else if (version && json_integer_value(version) > RT_MEASURED_READS) {
        rc = FAIL("$.format_version", "measured.json format %lld is newer than this ET reads (%d): update ET",
                  (long long)json_integer_value(version), RT_MEASURED_READS);
    } else if (!version || json_integer_value(version) < RT_MEASURED_READS || !json_is_string(plan_sum)) {
        rc = FAIL("$.plan_xxh64",
                  "measured.json names no checksum of its plan (format %lld, written by an older etrun): run "
                  "etrun again",
                  version ? (long long)json_integer_value(version) : 1LL);
    } else if (!json_is_string(plan_file) || !json_is_array(ops) || !json_is_array(shapes) ||
               !json_is_string(backend) || !json_is_number(step) || !json_is_integer(ranks) ||
               json_integer_value(ranks) < 1) {
        rc = FAIL("$",
                  "measured.json lacks plan_file, ops, batch_shapes, backend, ranks or step_time_s.median "
                  "(written by an older etrun?)");
    } else if (check_plan_sum(json_string_value(plan_file), json_string_value(plan_sum), r, err)) {
        /* err names the plan file */
    } else if (et_plan_load(json_string_value(plan_file), &r->plan, err)) {
        et_measured_run_free(r); /* err names the plan file */
    } else {
        snprintf(r->backend, sizeof r->backend, "%s", json_string_value(backend));
        r->step_measured = json_number_value(step);
        const et_device_profile *d = profile ? profile : &r->plan.s.cluster.device;
        const int cpu_run = strcmp(r->backend, "cpu") == 0;
        et_graph_options o = et_plan_graph_options(&r->plan.s);
        if (cpu_run != (d->kind == ET_DEVICE_CPU)) {
            rc = FAIL("$.backend", "measured on the %s backend, but the profile \"%s\" describes a %s device",
                      r->backend, d->name, et_device_kind_names[d->kind]);
        } else if (!positive_time(r->step_measured)) {
            rc = FAIL("$.step_time_s.median", "step time must be a positive number of seconds up to 10^6");
        } else if (et_graph_build(&r->plan.s.model, &o, &r->graph, err)) {
            et_measured_run_free(r);
        } else if ((int)json_array_size(ops) != r->graph.n_ops) {
            rc = FAIL("$.ops", "%zu measured ops, but the plan %s has %d: measured.json is from another plan",
                      json_array_size(ops), json_string_value(plan_file), r->graph.n_ops);
        } else {
            r->measured = calloc((size_t)r->graph.n_ops, sizeof *r->measured);
            r->steps = (int)json_array_size(shapes);
            r->micro = r->steps ? (int)json_array_size(json_array_get(shapes, 0)) : 0;
            r->shapes = calloc((size_t)(r->steps * r->micro + 1), sizeof *r->shapes);
            rc = 0;
            if (!r->measured || !r->shapes) rc = FAIL(NULL, "out of memory");
            if (!rc && (r->steps == 0 || r->micro == 0))
                rc = FAIL("$.batch_shapes", "no measured steps (all of them warm-up?)");
            for (int i = 0; !rc && i < r->graph.n_ops; i++) {
                json_t *op = json_array_get(ops, (size_t)i), *id = json_object_get(op, "id");
                json_t *rank0 = json_array_get(json_object_get(op, "ranks"), 0);
                char where[64];
                snprintf(where, sizeof where, "$.ops[%d]", i);
                if (!json_is_string(id) || strcmp(json_string_value(id), r->graph.ops[i].id) != 0) {
                    rc = FAIL(
                        where,
                        "op \"%s\" where the plan's graph has \"%s\": measured.json is from another plan",
                        json_is_string(id) ? json_string_value(id) : "?", r->graph.ops[i].id);
                    break;
                }
                json_t *t = json_object_get(rank0, "median_s");
                if (!json_is_number(t) || json_number_value(t) < 0 ||
                    !(json_number_value(t) <= MAX_SECONDS)) {
                    rc = FAIL(where, "ranks[0].median_s must be a number of seconds >= 0 and at most 10^6");
                    break;
                }
                if ((rc =
                         check_ranks(json_object_get(op, "ranks"), json_integer_value(ranks), where, r, err)))
                    break;
                r->measured[i] = json_number_value(t);
            }
            if (!rc) wall_account(r, json_object_get(root, "communication"), ops, json_integer_value(ranks));
            for (int s = 0; !rc && s < r->steps; s++) {
                json_t *micro = json_array_get(shapes, (size_t)s);
                for (int k = 0; !rc && k < r->micro; k++) {
                    json_t *b = json_array_get(micro, (size_t)k);
                    int ok = json_array_size(b) == 4;
                    for (size_t d = 0; ok && d < 4; d++) {
                        const double v = json_number_value(json_array_get(b, d));
                        ok = json_is_number(json_array_get(b, d)) && v >= (d == 0) && v <= 1e15;
                    }
                    if (!ok) {
                        char where[64];
                        snprintf(where, sizeof where, "$.batch_shapes[%d][%d]", s, k);
                        rc = FAIL(where, "a batch shape is [B, T, Q, P]: B >= 1 sequences, T, Q and P >= 0 "
                                         "(at most 10^15)");
                        break;
                    }
                    r->shapes[s * r->micro + k] = (et_batch_shape){
                        json_number_value(json_array_get(b, 0)), json_number_value(json_array_get(b, 1)),
                        json_number_value(json_array_get(b, 2)), json_number_value(json_array_get(b, 3))};
                }
            }
        }
    }
    json_decref(root);
    return rc;
}

void et_measured_run_free(et_measured_run *r)
{
    free(r->measured), free(r->shapes);
    r->measured = NULL, r->shapes = NULL;
    if (r->graph.ops) et_graph_free(&r->graph);
    if (r->plan.s.name[0] || r->plan.steps) et_plan_free(&r->plan);
    memset(&r->plan, 0, sizeof r->plan);
}

void et_measured_run_predict(const et_measured_run *r, const et_device_profile *d, double *out)
{
    const int n = r->graph.n_ops;
    double *steps = malloc((size_t)r->steps * n * sizeof *steps),
           *col = malloc((size_t)r->steps * sizeof *col);
    for (int s = 0; steps && s < r->steps; s++)
        et_step_op_times(&r->graph, &r->shapes[s * r->micro], r->micro, d, r->plan.s.precision,
                         steps + (size_t)s * n);
    for (int i = 0; steps && col && i < n; i++) {
        for (int s = 0; s < r->steps; s++)
            col[s] = steps[(size_t)s * n + i];
        out[i] = et_quantile(col, r->steps, 0.5);
    }
    free(steps), free(col);
}

int et_measured_run_op_scales(const et_measured_run *r, et_op_scales *out, et_error *err)
{
    const int n = r->graph.n_ops;
    double *pred = malloc((size_t)n * sizeof *pred);
    out->id = malloc((size_t)n * sizeof *out->id);
    out->factor = malloc((size_t)n * sizeof *out->factor);
    out->n = 0;
    if (!pred || !out->id || !out->factor) {
        free(pred);
        et_op_scales_free(out);
        return et_error_set_code(err, ET_ERROR_MEMORY, r->file, 0, 0, NULL, "out of memory");
    }
    et_measured_run_predict(r, &r->plan.s.cluster.device, pred);
    for (int i = 0; i < n; i++) {
        if (!(pred[i] > 0) || !(r->measured[i] > 0)) continue;
        snprintf(out->id[out->n], sizeof out->id[0], "%s", r->graph.ops[i].id);
        out->factor[out->n++] = r->measured[i] / pred[i];
    }
    free(pred);
    return 0;
}
