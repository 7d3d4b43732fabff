#include "run_timing.h"

#include <math.h>

#include "collectives.h"
#include "phase_time.h"

void et_run_count_of(const et_scenario *s, et_run_count *out)
{
    const double interval = s->target.eval_interval_samples, global = (double)s->batch.global;
    const bool evaluates = interval > 0 && s->target.eval_samples > 0;
    *out = (et_run_count){.steps = s->target.steps};
    if (evaluates && s->target.timing == ET_TIMING_MLPERF) {
        /* the smallest k whose evaluation ends a step at or after the target's: ceil(k I / G) >= steps,
         * that is k I / G > steps - 1 */
        const double k = floor((double)(s->target.steps - 1) * global / interval) + 1;
        out->evals = k;
        out->steps = (long long)ceil(k * interval / global);
        if (out->steps < s->target.steps) out->steps = s->target.steps; /* rounding at 1e15 steps */
    } else if (evaluates) {
        out->evals = floor(s->target.samples / interval);
    }
    if (evaluates && s->target.initial_eval) out->evals += 1;
    out->warmup_steps = s->target.warmup_steps < out->steps ? s->target.warmup_steps : out->steps;
    out->warmup_s = (double)out->warmup_steps * s->target.warmup_extra_s;
}

double et_eval_time(const et_scenario *s, double evals, double forward_micro_s)
{
    if (evals <= 0 || s->target.eval_samples <= 0) return 0;
    const double micro_batches = ceil(s->target.eval_samples / (double)(s->batch.local * s->parallel.data));
    double metric = et_sync_time(s);
    if (s->parallel.data > 1) {
        const et_comm_group g = et_dp_group(s);
        metric += et_allreduce_time(&g, s->parallel.allreduce, 16, NULL);
    }
    return evals * (micro_batches * forward_micro_s + metric);
}
