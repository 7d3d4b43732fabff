/* run_timing: what a time-to-train counts, under one of two rules (docs/cost-model.md, "Time-to-train").
 *
 *   steps (default)  the target's steps, floor(samples / eval_interval) evaluations, and the initial
 *                    evaluation and the first steps' warm-up when the scenario states them.
 *   mlperf           MLPerf Training's timed region, run_start to run_stop: initialisation is excluded; the
 *                    run stops at the first evaluation that sees the target, so the target's steps are
 *                    rounded up to the evaluation cadence. An evaluation runs when the samples trained pass
 *                    a multiple of eval_interval_samples, at the end of step ceil(k I / G) for the k-th
 *                    (I the interval, G the global batch): the k that stops the run is the smallest with
 *                    ceil(k I / G) >= the target's steps.
 *
 * Each evaluation runs ceil(eval_samples / (local x data ranks)) forward micro-batches on every rank,
 * all-reduces its metric (two 8-byte counts) over the data-parallel ranks and reads it on the host (one
 * synchronisation). Warm-up: target.warmup.steps first steps each take target.warmup.extra_s more than the
 * steady step (a figure the user states: nothing in the cost model predicts it).
 *
 * Contract: pure functions of the scenario; nothing is allocated. */
#ifndef ET_RUN_TIMING_H
#define ET_RUN_TIMING_H

#include "scenario.h"

typedef struct et_run_count {
    long long steps;        /* steps inside the timed region */
    double evals;           /* evaluations inside it, the initial one included */
    long long warmup_steps; /* target.warmup.steps, at most the steps run */
    double warmup_s;        /* their extra time */
} et_run_count;

void et_run_count_of(const et_scenario *s, et_run_count *out);

/* The time of `evals` evaluations when one forward micro-batch takes forward_micro_s (0 when the scenario
 * states no evaluation). */
double et_eval_time(const et_scenario *s, double evals, double forward_micro_s);

#endif
