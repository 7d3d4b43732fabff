#include "compare.h"

#include <math.h>

static double num(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

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
        x.step = num(json_object_get(sim, "step_time_s"), "mean");
        x.compute = num(sim, "compute_s");
        x.exposed = num(sim, "exposed_comm_s");
        x.idle = num(sim, "idle_s");
        x.factor = num(sim, "straggler_factor");
    } else {
        x.step = e->step_time;
        x.compute = e->compute + e->optimizer;
        x.exposed = e->dp_comm_exposed + e->zero_gather + e->clip_allreduce;
        x.idle = 0;
        x.factor = e->straggler_factor;
    }
    x.mfu = e->model_flops_per_step / (x.step * et_scenario_gpus(s) * s->cluster.device.peak_flops[s->precision]);
    return x;
}

void compare_print(FILE *out, const et_scenario *a, const et_estimate *ea, const json_t *sim_a,
                   const et_scenario *b, const et_estimate *eb, const json_t *sim_b)
{
    side x = summarize(a, ea, sim_a), y = summarize(b, eb, sim_b);
    fprintf(out, "compare      A: %s (%s)\n             B: %s (%s)\n", a->name, a->source, b->name, b->source);
    fprintf(out, "engine       %s\n\n", sim_a ? "simgrid (step parts marked * are the cost model's)" : "analytic");
    fprintf(out, "%-34s %14s %14s %12s\n", "", "A", "B", "speedup B");
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
    double ta = ea->steps * x.step + ea->eval_time, tb = eb->steps * y.step + eb->eval_time;
    row(out, "time-to-train [s]", ta, tb, 1, 1);
    fprintf(out, "%-34s %14lld %14lld\n", "steps to train", ea->steps, eb->steps);
}
