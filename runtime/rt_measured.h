/* rt_measured: what one etrun run records, step by step, and measured.json (docs/runtime.md lists every
 * key): provenance, per-step times and losses, per-op measured times per rank beside the cost model's
 * prediction for the same batches, and per-bucket communication timings.
 *
 * Contract: rt_run_log_init() allocates for `steps` steps (fails with *err when out of memory);
 * rt_measured_write() is collective over the communicator (every rank calls it; rank 0 writes, atomically)
 * and returns the same status on every rank. */
#ifndef ET_RT_MEASURED_H
#define ET_RT_MEASURED_H

#include "plan.h"
#include "rt_comm.h"
#include "rt_model.h"
#include "rt_reducer.h"

typedef struct rt_run_log {
    int n_ops, n_buckets, steps;       /* steps of this run (after a resume: the remaining ones) */
    long long first_step;              /* global index of the first */
    int measured;                      /* steps recorded after warm-up */
    char stopped[768];                 /* why the run ended early ("" when it ran every step) */
    double *step_s, *loss, *grad_norm; /* steps */
    double *op_s, *op_predicted_s;     /* measured x n_ops */
    rt_bucket_record *buckets;         /* measured x n_buckets */
    int micro;                         /* micro-batches per step */
    et_batch_shape *shapes;            /* measured x micro: rank 0's batches, as the cost model sees them */
    double tokens_per_step;            /* global, last step */
    double flops_per_step;             /* this rank's model FLOPs, last step */
    double predicted_step_s;           /* this rank's compute, as the cost model predicts it, last step */
    long long host_waits;              /* the backend's waits for its device in the last step (rank 0) */
} rt_run_log;

int rt_run_log_init(rt_run_log *log, const rt_model *m, int steps, int micro, long long first_step,
                    et_error *err);
void rt_run_log_free(rt_run_log *log);
/* Median, min and max of the measured steps' times (the log->measured steps after warm-up, the tail of
 * step_s); all 0 when none was measured. */
typedef struct rt_step_stats {
    double median, min, max;
} rt_step_stats;
rt_step_stats rt_run_log_step_stats(const rt_run_log *log);

/* Version of measured.json's layout (docs/report-format.md); raised when a key changes meaning. */
#define RT_MEASURED_FORMAT_VERSION 2 /* 2: plan_xxh64, the plan file's checksum (model/checksum.h) */

int rt_measured_write(const char *path, const char *plan_path, const et_plan *p, const rt_model *m,
                      rt_comm *comm, const rt_run_log *log, et_error *err);

#endif
