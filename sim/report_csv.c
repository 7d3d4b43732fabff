#include "report_csv.h"

#include <stdio.h>
#include <string.h>

#include "atomic_file.h"
#include "batch.h"
#include "scenario_graph.h"

json_t *report_op_rows(const et_scenario *s, const et_graph *g, const et_batch_shape *b)
{
    json_t *ops = json_array();
    for (int i = 0; ops && i < g->n_ops; i++) {
        const et_op *op = &g->ops[i];
        double t = et_op_is_comm(op->kind) ? 0 : et_op_time(op, b, &s->cluster.device, s->precision);
        json_array_append_new(ops, json_pack("{s:s, s:s, s:s, s:f, s:f, s:f}", "id", op->id, "phase",
                                             et_phase_names[op->phase], "kind", et_op_kind_names[op->kind],
                                             "flops", et_linear_eval(&op->flops, b), "bytes",
                                             et_linear_eval(&op->bytes, b), "time_s", t));
    }
    return ops;
}

typedef struct table {
    const json_t *rows;       /* array of objects */
    const char *const *keys;  /* columns, NULL-terminated */
    const char *const *heads; /* header cells, with units */
} table;

static int write_table(FILE *out, void *ctx)
{
    const table *t = ctx;
    for (int c = 0; t->heads[c]; c++)
        fprintf(out, "%s%s", c ? "," : "", t->heads[c]);
    fputc('\n', out);
    for (size_t r = 0; r < json_array_size(t->rows); r++) {
        const json_t *row = json_array_get(t->rows, r);
        for (int c = 0; t->keys[c]; c++) {
            const json_t *v = json_object_get(row, t->keys[c]);
            if (c) fputc(',', out);
            if (json_is_string(v))
                fprintf(out, "%s", json_string_value(v)); /* ids and names hold no commas */
            else if (json_is_integer(v))
                fprintf(out, "%lld", (long long)json_integer_value(v));
            else if (json_is_number(v))
                fprintf(out, "%.12g", json_number_value(v));
        }
        fputc('\n', out);
    }
    return ferror(out) ? -1 : 0;
}

static const char *const names[REPORT_CSV_FILES] = {"ops", "buckets", "ranks", "steps"};

int report_csv_paths(const char *prefix, int simulated, char paths[REPORT_CSV_FILES][1024])
{
    const int n = simulated ? REPORT_CSV_FILES : 1;
    for (int i = 0; i < n; i++)
        snprintf(paths[i], sizeof paths[i], "%s-%s.csv", prefix, names[i]);
    return n;
}

int report_csv_write(const char *prefix, const et_scenario *s, const json_t *sim, et_error *err)
{
    static const char *const op_keys[] = {"id", "phase", "kind", "flops", "bytes", "time_s", NULL};
    static const char *const op_heads[] = {"id", "phase", "kind", "flops", "bytes", "time_s", NULL};
    static const char *const bucket_keys[] = {"bucket",        "bytes",      "algorithm",  "time_s",
                                              "closed_form_s", "algbw_GBps", "busbw_GBps", NULL};
    static const char *const rank_keys[] = {"rank", "stage", "compute_s", "exposed_comm_s", "idle_s", NULL};
    static const char *const step_keys[] = {"step",           "time_s",           "compute_s", "idle_s",
                                            "exposed_comm_s", "straggler_factor", NULL};
    char paths[REPORT_CSV_FILES][1024];
    report_csv_paths(prefix, sim != NULL, paths);
    json_t *ops = NULL;
    if (!sim) { /* the analytic estimate's ops: stage 0, the expected micro-batch, as the simulator lists */
        et_graph g;
        et_graph_options o = et_scenario_graph_options(s, 0);
        if (et_graph_build(&s->model, &o, &g, err)) return -1;
        const et_batch_shape b = et_batch_expected(s);
        ops = report_op_rows(s, &g, &b);
        et_graph_free(&g);
    }
    table t = {sim ? json_object_get(sim, "ops") : ops, op_keys, op_heads};
    int rc = et_atomic_write(paths[0], write_table, &t, err);
    json_decref(ops);
    if (rc || !sim) return rc;
    const table more[] = {{json_object_get(sim, "buckets"), bucket_keys, bucket_keys},
                          {json_object_get(sim, "ranks"), rank_keys, rank_keys},
                          {json_object_get(sim, "steps"), step_keys, step_keys}};
    for (int i = 0; i < 3; i++)
        if (et_atomic_write(paths[i + 1], write_table, (void *)&more[i], err)) return -1;
    return 0;
}
