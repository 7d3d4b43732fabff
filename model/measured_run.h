/* et_measured_run: one measured etrun run joined with the cost model, op by op: what `etcalib report` prints
 * and what `etcalib fit` fits. A run is measured.json (docs/runtime.md) plus the plan it names (`plan_file`):
 * the plan's graph, as etrun ran it, gives each op's FLOPs and bytes for the batches rank 0 ran
 * (`batch_shapes`), so any device profile can predict the same op.
 *
 * Contract: et_measured_run_load() fails with *err (file, JSON path, what was wrong; exit 2 in etcalib) when
 * the file is not measured.json, is truncated, has a zero, negative or non-finite time, names a plan whose
 * graph has other op ids (another plan), or was measured on another kind of device than the profile
 * describes (`profile` may be NULL: the plan's own). Predictions are seconds per step (optimizer ops once,
 * other ops summed over the step's micro-batches), the median over the measured steps. */
#ifndef ET_MEASURED_RUN_H
#define ET_MEASURED_RUN_H

#include <jansson.h>

#include "et_error.h"
#include "graph.h"
#include "plan.h"

typedef struct et_measured_run {
    char file[1024];
    et_plan plan;
    et_graph graph;
    double *measured;       /* per op: rank 0's median seconds per step */
    int steps, micro;       /* measured steps, micro-batches per step */
    et_batch_shape *shapes; /* steps x micro */
    double step_measured;   /* median step time */
    char backend[16];
    /* where the wall step went beyond rank 0's ops (etcalib report): the median over measured steps of the
     * wait after backward for the gradient all-reduces still in flight (the last bucket's start, when
     * backward ends, to the last end; 0 without buckets), and how much longer the slowest rank's ops take
     * than rank 0's (a wait that happens inside those all-reduces) */
    double comm_wait;
    double slowest_rank_extra;
} et_measured_run;

int et_measured_run_load(const char *path, const et_device_profile *profile, et_measured_run *out,
                         et_error *err);
void et_measured_run_free(et_measured_run *r);

/* Loads a JSON file; a file that does not parse (truncated) fills *err with its line and column. */
json_t *et_measured_load_json(const char *path, et_error *err);

/* Per op: the profile's predicted seconds per step, median over the measured steps (out: n_ops). */
void et_measured_run_predict(const et_measured_run *r, const et_device_profile *d, double *out);

/* Per op with a modelled and a measured time: measured / modelled under the run's own profile, by op id
 * (for etsim --op-times). Fails only when out of memory. */
int et_measured_run_op_scales(const et_measured_run *r, et_op_scales *out, et_error *err);

#endif
