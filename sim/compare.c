#include "compare.h"

#include <math.h>
#include <stdlib.h>

#include "batch.h"
#include "report.h"

/* One row; `time` rows show A/B, rate rows B/A. */
static void row(FILE *out, const char *name, double a, double b, double scale, int time)
{
    double ratio = time ? (b > 0 ? a / b : NAN) : (a > 0 ? b / a : NAN);
    if (a == 0 && b == 0)
        fprintf(out, "%-34s %14.3f %14.3f %12s\n", name, 0.0, 0.0, "-");
    else
        fprintf(out, "%-34s %14.3f %14.3f %11.2fx\n", name, a * scale, b * scale, ratio);
}

typedef struct side {
    double step, compute, exposed, idle, factor, mfu;
} side;

static side summarize(const et_scenario *s, const et_estimate *e, const json_t *sim)
{
    side x;
    if (sim) {
        x.step = report_num(json_object_get(sim, "step_time_s"), "mean");
        x.compute = report_num(sim, "compute_s");
        x.exposed = report_num(sim, "exposed_comm_s");
        x.idle = report_num(sim, "idle_s");
        x.factor = report_num(sim, "straggler_factor");
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

static void layer_row(FILE *out, const char *name, double ta, double tb, double ba, double bb)
{
    double speedup = tb > 0 ? ta / tb : NAN;
    fprintf(out, "%-22s %12.4f %12.4f %9.2fx %13.2f %13.2f%s\n", name, ta * 1e3, tb * 1e3, speedup,
            ba / 1048576.0, bb / 1048576.0, speedup < 1 ? "  B slower" : "");
}

/* Per-layer table when both scenarios have the same layer count; identical consecutive layers collapse. */
static void print_layers(FILE *out, const et_scenario *a, const et_scenario *b)
{
    const int L = a->model.layers;
    if (b->model.layers != L) return;
    double *ta = calloc((size_t)L + 2, sizeof *ta), *tb = calloc((size_t)L + 2, sizeof *tb);
    double *ba = calloc((size_t)L + 2, sizeof *ba), *bb = calloc((size_t)L + 2, sizeof *bb);
    if (ta && tb && ba && bb && !layer_costs(a, ta, ba) && !layer_costs(b, tb, bb)) {
        fprintf(out, "\n%-22s %12s %12s %10s %13s %13s\n", "per layer (fwd+bwd)", "A[ms]", "B[ms]", "speedup",
                "A weights[MiB]", "B weights[MiB]");
        layer_row(out, "embeddings", ta[0], tb[0], ba[0], bb[0]);
        char name[48];
        for (int i = 1; i <= L;) {
            int j = i;
            while (j < L && ta[j + 1] == ta[i] && tb[j + 1] == tb[i] && ba[j + 1] == ba[i] &&
                   bb[j + 1] == bb[i])
                j++;
            if (j > i)
                snprintf(name, sizeof name, "layers %d-%d, each", i - 1, j - 1);
            else
                snprintf(name, sizeof name, "layer %d", i - 1);
            layer_row(out, name, ta[i], tb[i], ba[i], bb[i]);
            i = j + 1;
        }
        layer_row(out, "head", ta[L + 1], tb[L + 1], ba[L + 1], bb[L + 1]);
    }
    free(ta);
    free(tb);
    free(ba);
    free(bb);
}

void compare_print(FILE *out, const et_scenario *a, const et_estimate *ea, const json_t *sim_a,
                   const et_scenario *b, const et_estimate *eb, const json_t *sim_b)
{
    side x = summarize(a, ea, sim_a), y = summarize(b, eb, sim_b);
    fprintf(out, "compare      A: %s (%s)\n             B: %s (%s)\n", a->name, a->source, b->name,
            b->source);
    fprintf(out, "engine       %s\n\n",
            sim_a ? "simgrid (step parts marked * are the cost model's)" : "analytic");
    fprintf(out, "%-34s %14s %14s %12s\n", "", "A", "B", "B vs A");
    row(out, "step [ms]", x.step, y.step, 1e3, 1);
    row(out, "  compute per GPU [ms]", x.compute, y.compute, 1e3, 1);
    row(out, "    forward* [ms]", ea->forward, eb->forward, 1e3, 1);
    row(out, "    backward* [ms]", ea->backward, eb->backward, 1e3, 1);
    row(out, "    clipping per bucket* [ms]", ea->clip, eb->clip, 1e3, 1);
    row(out, "    optimizer* [ms]", ea->optimizer, eb->optimizer, 1e3, 1);
    row(out, "  exposed communication [ms]", x.exposed, y.exposed, 1e3, 1);
    row(out, "  idle, waiting for stragglers [ms]", x.idle, y.idle, 1e3, 1);
    row(out, "gradient communication* [ms]", ea->dp_comm, eb->dp_comm, 1e3, 1);
    row(out, "straggler factor max/mean", x.factor, y.factor, 1, 1);
    row(out, "memory per GPU [GiB]", ea->memory.total, eb->memory.total, 1.0 / 1073741824.0, 1);
    row(out, "MFU [%]", x.mfu, y.mfu, 100, 0);
    row(out, "samples/s", a->batch.global / x.step, b->batch.global / y.step, 1, 0);
    double ta = (sim_a ? report_sim_train_time(ea, sim_a) : ea->train_time) + ea->eval_time;
    double tb = (sim_b ? report_sim_train_time(eb, sim_b) : eb->train_time) + eb->eval_time;
    row(out, "time-to-train [s]", ta, tb, 1, 1);
    fprintf(out, "%-34s %14lld %14lld\n", "steps to train", ea->steps, eb->steps);
    fprintf(out, "%-34s %s\n", "",
            "(B vs A: A/B for times, memory and the straggler factor, B/A for MFU and");
    fprintf(out, "%-34s %s\n", "", " samples/s; above 1, B is better: a speedup only on the time rows)");
    fprintf(out, "%-34s %14.4g %14.4g\n", "trainable parameters", ea->params_total, eb->params_total);
    print_layers(out, a, b);
}
