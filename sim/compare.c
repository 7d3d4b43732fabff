#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "report.h"

/* A duration row in human units (report_format_duration), each later side against the first as A/X. */
static void duration_row(FILE *out, const char *name, const double *v, int n)
{
    fprintf(out, "%-34s", name);
    char text[32];
    for (int i = 0; i < n; i++) {
        report_format_duration(text, sizeof text, v[i]);
        fprintf(out, " %14s", text);
    }
    for (int i = 1; i < n; i++)
        if (v[i] > 0)
            fprintf(out, " %11.2fx", v[0] / v[i]);
        else
            fprintf(out, " %12s", "-");
    fputc('\n', out);
}

/* Every leaf of a scenario document as "path=value" (compact JSON values), name and description left out. */
typedef struct leaves {
    char (*path)[160];
    char (*value)[160];
    int n, cap;
} leaves;

static void collect(leaves *l, const char *path, json_t *v)
{
    if (json_is_object(v)) {
        const char *key;
        json_t *x;
        json_object_foreach(v, key, x)
        {
            if (!path[0] && (!strcmp(key, "name") || !strcmp(key, "description"))) continue;
            char sub[160];
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
            collect(l, sub, x);
        }
        return;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        void *p = realloc(l->path, (size_t)cap * sizeof *l->path),
             *q = p ? realloc(l->value, (size_t)cap * sizeof *l->value) : NULL;
        if (p) l->path = p;
        if (!q) return;
        l->value = q;
        l->cap = cap;
    }
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(6));
    snprintf(l->path[l->n], sizeof l->path[0], "%s", path);
    snprintf(l->value[l->n], sizeof l->value[0], "%s", text ? text : "?");
    free(text);
    l->n++;
}

static const char *leaf(const leaves *l, const char *path)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->path[i], path)) return l->value[i];
    return "-";
}

/* The keys whose values differ between the scenarios as loaded (their overrides applied), each with its
 * values in order: what makes the scenarios compared different, without a diff by hand. */
static void print_differences(FILE *out, int n, const json_t *const *docs)
{
    leaves l[COMPARE_MAX] = {{0}};
    for (int i = 0; i < n; i++)
        collect(&l[i], "", (json_t *)docs[i]); /* only read */
    int shown = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < l[i].n; k++) {
            int seen = 0, differs = 0;
            for (int j = 0; j < i && !seen; j++) /* each path once, where it first appears */
                seen = strcmp(leaf(&l[j], l[i].path[k]), "-") != 0;
            for (int j = 0; j < n && !seen; j++)
                differs |= strcmp(leaf(&l[j], l[i].path[k]), l[i].value[k]) != 0;
            if (seen || !differs) continue;
            fprintf(out, "%s %s:", shown++ ? "            " : "differs     ", l[i].path[k]);
            for (int j = 0; j < n; j++)
                fprintf(out, "%s %s", j ? " |" : "", leaf(&l[j], l[i].path[k]));
            fputc('\n', out);
        }
    if (!shown)
        fprintf(out, "differs      nothing in the scenarios as loaded (only --op-times or the engine)\n");
    for (int i = 0; i < n; i++)
        free(l[i].path), free(l[i].value);
}

/* One row over n sides: the values, then each later side against the first (time rows A/X, rate rows X/A). */
static void row(FILE *out, const char *name, const double *v, int n, double scale, int time)
{
    fprintf(out, "%-34s", name);
    for (int i = 0; i < n; i++)
        fprintf(out, " %14.3f", v[i] * scale);
    for (int i = 1; i < n; i++) {
        double ratio = time ? (v[i] > 0 ? v[0] / v[i] : NAN) : (v[0] > 0 ? v[i] / v[0] : NAN);
        if (!isfinite(ratio)) /* both zero, or one side has none of it */
            fprintf(out, " %12s", "-");
        else
            fprintf(out, " %11.2fx", ratio);
    }
    fputc('\n', out);
}

typedef struct side {
    double step, compute, exposed, idle, factor, mfu;
} side;

static side summarize(const et_scenario *s, const et_estimate *e, const sim_result *sim)
{
    side x;
    if (sim) {
        x.step = sim->step.mean;
        x.compute = sim->compute;
        x.exposed = sim->exposed_comm;
        x.idle = sim->idle;
        x.factor = sim->straggler_factor;
    } else {
        x.step = e->step_time;
        x.compute = e->compute + e->optimizer;
        x.exposed = e->dp_comm_exposed + e->zero_gather + e->clip_allreduce;
        x.idle = 0;
        x.factor = e->straggler_factor;
    }
    x.mfu =
        e->model_flops_per_step / (x.step * et_scenario_gpus(s) * s->cluster.device.peak_flops[s->precision]);
    return x;
}

/* Per-layer forward + backward time of one micro-batch and stored weight bytes, on the whole model (one
 * pipeline stage holding every layer, the scenario's tensor parallelism). Slot 0 is the embeddings, 1..L
 * the layers, L + 1 the head. Returns -1 when the graph cannot be built. */
static int layer_costs(const et_scenario *s, double *time, double *bytes)
{
    et_graph g;
    et_error err;
    et_graph_options o = et_scenario_graph_options(s, 0);
    o.pipeline = 1;
    o.layers_per_stage = NULL;
    if (et_graph_build(&s->model, &o, &g, &err)) return -1;
    et_batch_shape b = et_batch_expected(s);
    const int L = s->model.layers;
    for (int i = 0; i < L + 2; i++)
        time[i] = bytes[i] = 0;
    for (int i = 0; i < g.n_ops; i++) {
        const et_op *op = &g.ops[i];
        if (op->phase == ET_PHASE_OPTIMIZER) continue;
        int slot = op->layer >= 0 ? op->layer + 1 : (op->id[0] == 'e' ? 0 : L + 1);
        time[slot] += et_op_time(op, &b, &s->cluster.device, s->precision);
    }
    double e = et_precision_bytes(s->precision);
    for (int i = 0; i < g.n_params; i++) {
        const et_param *p = &g.params[i];
        int slot = p->layer >= 0 ? p->layer + 1 : (p->id[0] == 'e' ? 0 : L + 1);
        bytes[slot] += p->count * e + p->meta_bytes;
    }
    et_graph_free(&g);
    return 0;
}

/* One layer slot over n sides: A's time, each later side's time and speedup over A, then every side's
 * weights; with two sides, "B slower" marks a layer B slows. */
static void layer_row(FILE *out, const char *name, int n, double *const *t, double *const *w, int k)
{
    fprintf(out, "%-22s %12.4f", name, t[0][k] * 1e3);
    int slower = 0;
    for (int i = 1; i < n; i++) {
        const double speedup = t[i][k] > 0 ? t[0][k] / t[i][k] : NAN;
        fprintf(out, " %12.4f %9.2fx", t[i][k] * 1e3, speedup);
        slower |= speedup < 1;
    }
    for (int i = 0; i < n; i++)
        fprintf(out, " %14.2f", w[i][k] / 1048576.0);
    fprintf(out, "%s\n", n == 2 && slower ? "  B slower" : "");
}

/* Per-layer table when every scenario has A's layer count; identical consecutive layers collapse. */
static void print_layers(FILE *out, int n, const et_scenario *const *s)
{
    const int L = s[0]->model.layers;
    for (int i = 1; i < n; i++)
        if (s[i]->model.layers != L) return;
    double *t[COMPARE_MAX] = {NULL}, *w[COMPARE_MAX] = {NULL};
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        t[i] = calloc((size_t)L + 2, sizeof *t[i]), w[i] = calloc((size_t)L + 2, sizeof *w[i]);
        ok = t[i] && w[i] && !layer_costs(s[i], t[i], w[i]);
    }
    if (ok) {
        fprintf(out, "\n%-22s %12s", "per layer (fwd+bwd)", "A[ms]");
        char head[2][24];
        for (int i = 1; i < n; i++) {
            snprintf(head[0], sizeof head[0], "%c[ms]", 'A' + i);
            snprintf(head[1], sizeof head[1], "%c speedup", 'A' + i);
            fprintf(out, " %12s %10s", head[0], head[1]);
        }
        for (int i = 0; i < n; i++) {
            snprintf(head[0], sizeof head[0], "%c weights[MiB]", 'A' + i);
            fprintf(out, " %14s", head[0]);
        }
        fputc('\n', out);
        layer_row(out, "embeddings", n, t, w, 0);
        char name[48];
        for (int i = 1; i <= L;) {
            int j = i, same = 1;
            while (j < L && same) {
                for (int k = 0; k < n && same; k++)
                    same = t[k][j + 1] == t[k][i] && w[k][j + 1] == w[k][i];
                if (same) j++;
            }
            if (j > i)
                snprintf(name, sizeof name, "layers %d-%d, each", i - 1, j - 1);
            else
                snprintf(name, sizeof name, "layer %d", i - 1);
            layer_row(out, name, n, t, w, i);
            i = j + 1;
        }
        layer_row(out, "head", n, t, w, L + 1);
    }
    for (int i = 0; i < n; i++)
        free(t[i]), free(w[i]);
}

void compare_print_many(FILE *out, int n, const et_scenario *const *s, const et_estimate *const *e,
                        const sim_result *const *sim, const json_t *const *docs)
{
    if (n > COMPARE_MAX) n = COMPARE_MAX;
    side x[COMPARE_MAX];
    double v[COMPARE_MAX] = {0};
    fprintf(out, "compare ");
    for (int i = 0; i < n; i++) {
        x[i] = summarize(s[i], e[i], sim[i]);
        fprintf(out, "%s     %c: %s (%s)\n", i ? "        " : "", 'A' + i, s[i]->name, s[i]->source);
    }
    print_differences(out, n, docs);
    fprintf(out, "engine       %s\n\n",
            sim[0] ? "simgrid (step parts marked * are the cost model's)" : "analytic");
    fprintf(out, "%-34s", "");
    for (int i = 0; i < n; i++)
        fprintf(out, " %14c", 'A' + i);
    for (int i = 1; i < n; i++)
        fprintf(out, "       %c vs A", 'A' + i);
    fputc('\n', out);
#define ROW(name, expr, scale, time)                                                                         \
    do {                                                                                                     \
        for (int i = 0; i < n; i++)                                                                          \
            v[i] = (expr);                                                                                   \
        row(out, name, v, n, scale, time);                                                                   \
    } while (0)
    ROW("step [ms]", x[i].step, 1e3, 1);
    ROW("  compute per GPU [ms]", x[i].compute, 1e3, 1);
    ROW("    forward* [ms]", e[i]->forward, 1e3, 1);
    ROW("    backward* [ms]", e[i]->backward, 1e3, 1);
    ROW("    clipping per bucket* [ms]", e[i]->clip, 1e3, 1);
    ROW("    gradient accumulation* [ms]", e[i]->accumulate, 1e3, 1);
    ROW("    host synchronisation* [ms]", e[i]->host_sync, 1e3, 1);
    ROW("    optimizer* [ms]", e[i]->optimizer, 1e3, 1);
    /* the blocking communication and the bubble inside the compute stream, where some scenario has them */
#define ROW_IF_ANY(name, field)                                                                              \
    do {                                                                                                     \
        bool any = false;                                                                                    \
        for (int i = 0; i < n; i++)                                                                          \
            any = any || e[i]->field > 0;                                                                    \
        if (any) ROW(name, e[i]->field, 1e3, 1);                                                             \
    } while (0)
    ROW_IF_ANY("    tensor-parallel collectives* [ms]", tp_comm);
    ROW_IF_ANY("    experts' all-to-alls* [ms]", ep_comm);
    ROW_IF_ANY("    context-parallel exchanges* [ms]", cp_comm);
    ROW_IF_ANY("    pipeline sends* [ms]", pp_comm);
    ROW_IF_ANY("    pipeline bubble* [ms]", bubble);
#undef ROW_IF_ANY
    ROW("  exposed communication [ms]", x[i].exposed, 1e3, 1);
    ROW("  idle, waiting for stragglers [ms]", x[i].idle, 1e3, 1);
    ROW("gradient communication* [ms]", e[i]->dp_comm, 1e3, 1);
    ROW("straggler factor max/mean", x[i].factor, 1, 1);
    ROW("memory per GPU [GiB]", e[i]->memory.total, 1.0 / 1073741824.0, 1);
    ROW("  weights [GiB]", e[i]->memory.weights, 1.0 / 1073741824.0, 1);
    ROW("  gradients [GiB]", e[i]->memory.gradients, 1.0 / 1073741824.0, 1);
    ROW("  optimizer states [GiB]", e[i]->memory.optimizer_states, 1.0 / 1073741824.0, 1);
    ROW("  activations [GiB]", e[i]->memory.activations, 1.0 / 1073741824.0, 1);
    ROW("  framework reserve [GiB]", e[i]->memory.reserved, 1.0 / 1073741824.0, 1);
    ROW("  all but the reserve [GiB]", e[i]->memory.total - e[i]->memory.reserved, 1.0 / 1073741824.0, 1);
    ROW("MFU [%]", x[i].mfu, 100, 0);
    ROW("samples/s", s[i]->batch.global / x[i].step, 1, 0);
#undef ROW
    for (int i = 0; i < n; i++)
        v[i] = (sim[i] ? report_sim_train_time(e[i], sim[i]) : e[i]->train_time) + e[i]->eval_time;
    duration_row(out, "time-to-train", v, n);
    for (int i = 0; i < n; i++)
        v[i] *= e[i]->goodput.factor;
    duration_row(out, "  with failures and checkpoints", v, n);
    fprintf(out, "%-34s", "steps to train");
    for (int i = 0; i < n; i++)
        fprintf(out, " %14lld", e[i]->steps);
    fputc('\n', out);
    fprintf(out, "%-34s %s\n", "",
            "(X vs A: A/X for times, memory and the straggler factor, X/A for MFU and");
    fprintf(out, "%-34s %s\n", "", " samples/s; above 1, X is better: a speedup only on the time rows)");
    fprintf(out, "%-34s", "trainable parameters");
    for (int i = 0; i < n; i++)
        fprintf(out, " %14.4g", e[i]->params_total);
    fputc('\n', out);
    print_layers(out, n, s);
}
